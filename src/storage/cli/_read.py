"""Commands that read the index: ``search``, ``ask``, ``health``."""

from __future__ import annotations

import sys
from typing import Annotated, TextIO, cast

import typer
from rich.table import Table
from rich.text import Text

from .._dsl.text import MAX_QUERY_CHARS, clip
from .._types.answers import Answer, AnswerDelta, AnswerEntry
from .._types.requests import QuerySyntax
from .._types.results import SearchResponse, relevant, similarity_floor
from ..agent._format import snippet
from ._app import app, err, open_client, out, parse_filters, run, search_mode

# -- search --------------------------------------------------------------------------------------------


# The options search and ask share (what to search and within which documents).
ModeOption = Annotated[str, typer.Option(help="hybrid, bm25 or knn.")]
FilterOption = Annotated[
    list[str] | None,
    typer.Option(
        "--filter",
        "-f",
        help="key=value (ticker=AAPL), a range (published_at>=2024-01-01; >, <=, <) or key!= (absent); repeatable.",
    ),
]
SinceOption = Annotated[str | None, typer.Option(help="Only documents published on or after (YYYY-MM-DD).")]
UntilOption = Annotated[str | None, typer.Option(help="Only documents published on or before (YYYY-MM-DD).")]


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="What to look for.")],
    mode: ModeOption = "hybrid",
    filter_: FilterOption = None,
    since: SinceOption = None,
    until: UntilOption = None,
    limit: Annotated[int, typer.Option(help="Hits to show.")] = 10,
    syntax: Annotated[str, typer.Option(help="plain (default) or boolean (AND/OR/NOT, prefixes).")] = "plain",
    facet: Annotated[
        list[str] | None,
        typer.Option(
            help="Count the matches by a field: ticker, source:25, published_at:month, metadata.<key>; repeatable."
        ),
    ] = None,
    group_by: Annotated[
        str | None, typer.Option(help="One hit per value of ticker, source, doc_type or metadata.<key>.")
    ] = None,
    per_group: Annotated[int, typer.Option(help="Hits per group with --group-by.")] = 1,
    diversity: Annotated[float, typer.Option(help="0 (ranked order) to 1: fewer near-duplicates on a page.")] = 0.0,
    min_similarity: Annotated[
        float | None,
        typer.Option(
            help="Hide semantic-only hits less similar than this (default: the model's relevance floor; 0 shows all)."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the whole response as JSON.")] = False,
) -> None:
    """Search; a table with each hit's per-leg ranks and the part that matched (and facets, groups), or JSON
    for scripts."""

    async def go() -> int:
        async with open_client() as client:
            res = await client.search(
                query,
                mode=search_mode(mode),
                filters=parse_filters(filter_ or [], since=since, until=until) or None,
                limit=limit,
                syntax=cast(QuerySyntax, syntax),  # (validated by the search: InvalidQuery)
                facets=facet or None,
                group_by=group_by,
                per_group=per_group,
                diversity=diversity,
            )
            floor = min_similarity if min_similarity is not None else similarity_floor(client.embedder)
        if as_json:
            out.print(res.model_dump_json(indent=2), markup=False)
        else:
            print_table(res, min_similarity=floor)
        return 0

    run(go())


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="The question to answer from the documents.")],
    mode: ModeOption = "hybrid",
    filter_: FilterOption = None,
    since: SinceOption = None,
    until: UntilOption = None,
    limit: Annotated[int | None, typer.Option(help="Documents to retrieve (default ES_ANSWER_LIMIT).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the whole answer as JSON (no streaming).")] = False,
) -> None:
    """Answer a question from the documents with a chat model (LLM_*): the answer streams, then its sources.
    Exit 1 when the chat model failed (the retrieved entries are still listed)."""

    async def go() -> int:
        async with open_client() as client:
            filters = parse_filters(filter_ or [], since=since, until=until) or None
            if client.llm is None:  # no chat model: what the answer would read, and how to get a model
                found = await client.search(question, mode=search_mode(mode), filters=filters, limit=limit or 5)
                print_table(found)
                err.print(
                    "no answer: no chat model is configured. Set LLM_PROVIDER=openai, LLM_MODEL and LLM_BASE_URL "
                    "(any OpenAI-compatible server; LLM_API_KEY for a hosted one), or run a local one: "
                    "`python -m embeddings.local_llm start` prints the variables to export (the first time it "
                    "compiles llama.cpp's server: gcc, g++ and cmake, ~3 minutes on 2 cores; later starts take "
                    "seconds).",
                    markup=False,
                )
                return 1
            if as_json:
                done = await client.answer(question, mode=search_mode(mode), filters=filters, limit=limit)
                out.print(done.model_dump_json(indent=2), markup=False)
                return 1 if done.status == "llm_failed" else 0
            answer: Answer | None = None
            stream = client.answer_stream(question, mode=search_mode(mode), filters=filters, limit=limit)
            async for item in stream:
                if isinstance(item, AnswerDelta):
                    out.print(item.text, end="", markup=False)
                else:
                    answer = item.answer
        assert answer is not None
        print_answer(answer, streamed=True)
        return 1 if answer.status == "llm_failed" else 0

    run(go())


def _where(entry: AnswerEntry) -> str:
    spans = (
        ", ".join(f"{a}-{b}" for a, b in entry.passages[:3])
        if len(entry.passages) > 1 or (entry.passages and entry.passages[0][0] > 0)
        else ""
    )
    return (f" ({entry.source})" if entry.source else "") + (f" [characters {spans}]" if spans else "")


def print_answer(answer: Answer, *, streamed: bool = False) -> None:
    """The answer (unless already streamed), then the cited sources and what went wrong, if anything. An
    answer that cites nothing is never shown with sources: it says it is unsupported."""
    if answer.status == "llm_failed":
        if streamed:
            out.print("", markup=False)
        reason = answer.degradation.reason if answer.degradation is not None else None
        err.print(f"no answer: the chat model failed ({reason}): {answer.error}", markup=False)
        if reason == "llm_disconnected":
            err.print(
                "the chat server died while answering; a local one started with `python -m embeddings.local_llm "
                "start` writes its log to .cache/llm/instances/<model>/server.log (LLM_LOCAL_CACHE)",
                markup=False,
            )
    elif answer.status == "no_context":
        err.print("no answer: what the search found does not fit the chat model's context (see LLM_CONTEXT_TOKENS)")
    elif not streamed or answer.status == "nothing_found":
        out.print(answer.answer or "", markup=False)
    else:
        out.print("", markup=False)
    if answer.sources:
        out.print("\nsources:", markup=False)
        for entry in answer.sources:
            out.print(f"  [#{entry.id}] {entry.title or '(untitled)'}{_where(entry)}", markup=False)
    elif answer.uncited:
        out.print(
            "\nuncited: the model cited none of the entries it was given, so nothing supports this answer. "
            "The entries were:",
            markup=False,
        )
        for entry in answer.entries:
            out.print(f"  [#{entry.id}] {entry.title or '(untitled)'}{_where(entry)}", markup=False)
    elif answer.status in ("llm_failed", "no_context") and (answer.entries or answer.search.hits):
        out.print("\nretrieved (not answered):", markup=False)
        for hit in answer.search.hits:
            out.print(f"  [#{hit.id}] {hit.title or '(untitled)'}", markup=False)
    if answer.invented_citations:
        invented = ", ".join("#" + c for c in answer.invented_citations)
        out.print(f"not in the documents (invented by the model, ignored): {invented}", markup=False)
    t = answer.timings
    llm = f", model {t.llm_ms / 1000:.1f} s" if t.llm_ms is not None else ""
    out.print(f"({answer.model or 'no model'}; search {t.search_ms:.0f} ms{llm})", markup=False, style="dim")


def print_table(res: SearchResponse, *, min_similarity: float = 0.0) -> None:
    """The hits as a table: ranks per leg, the title and the part that matched (a long document's best
    passage, with where it is; else the highlighted words), then groups, facets and what went wrong.
    Semantic-only hits below ``min_similarity`` are left out and counted (the agent tool's rule)."""
    legs = ", ".join(
        f"{leg} {r.hits} hits {r.latency_ms:.0f} ms" + ("" if r.ok else f" FAILED ({r.reason})")
        for leg, r in res.legs.items()
    )
    shown = [hit for hit in res.hits if relevant(hit, min_similarity)]
    title = f"{clip(res.query, 120)!r} ({res.mode}; {legs})"
    table = Table(title=title, title_justify="left", show_lines=True)
    for col in ("#", "id", "score", "bm25", "knn"):
        table.add_column(col, justify="left" if col == "id" else "right")
    table.add_column("title and what matched", ratio=1)
    for n, hit in enumerate(shown, start=1):
        matched = Text(hit.title or "(untitled)", style="bold")
        excerpt = snippet(hit, 240)
        if excerpt:
            where = f" [characters {hit.passages[0].start}-{hit.passages[0].end}]" if hit.passages else ""
            matched.append("\n" + excerpt, style="")
            matched.append(where, style="dim")
        table.add_row(
            str(n),
            hit.id,
            f"{hit.normalized_score:.3f}",
            str(hit.ranks.get("bm25", "-")),
            str(hit.ranks.get("knn", "-")),
            matched,
        )
    if shown:
        out.print(table)
    else:
        out.print(title, markup=False)
    if "truncated" in res.query_adjustments:
        out.print(
            f"note: the query was longer than {MAX_QUERY_CHARS:,} characters; only its first "
            f"{len(res.query):,} (cut at a word boundary) were searched",
            markup=False,
        )
    hidden = len(res.hits) - len(shown)
    if hidden:
        out.print(
            f"{hidden} semantic-only hit{'s' if hidden != 1 else ''} less similar than {min_similarity:g} not shown "
            "(no keyword matched them; --min-similarity 0 shows them)",
            markup=False,
        )
    if res.groups is not None:
        for group in res.groups:
            more = f" ({group.known_matches} among the candidates)" if group.known_matches > len(group.ids) else ""
            out.print(f"group {group.value or '(none)'}: {', '.join(group.ids)}{more}", markup=False)
    facets = res.facets
    if facets is not None:
        for name, found in facets.counts.items():
            counts = ", ".join(f"{b.value} {b.count}" for b in found.buckets) or "none"
            out.print(f"facet {name}: {counts}", markup=False)
        if facets.partial:
            out.print(f"facets count the {' and '.join(facets.over)} matches only (a leg failed)", markup=False)
        if facets.error:
            out.print(f"facets unavailable: {facets.error}", markup=False)
    if res.degradation is not None:
        failed = ", ".join(res.degradation.legs_failed) or "rerank"
        out.print(f"degraded: {failed} failed ({res.degradation.reason})", markup=False)
    if not shown:
        out.print("no matches", markup=False)


def print_response(res: SearchResponse, stream: TextIO | None = None) -> None:
    """Plain-text summary (the demo's output)."""
    target = stream if stream is not None else sys.stdout
    legs = ", ".join(
        f"{leg}: {r.hits} hits in {r.latency_ms:.0f} ms" + ("" if r.ok else f" FAILED ({r.reason})")
        for leg, r in res.legs.items()
    )
    print(f'query "{res.query}" ({res.mode}; {legs}; overlap {res.overlap})', file=target)
    if res.degradation is not None:
        failed = ", ".join(res.degradation.legs_failed) or "rerank"
        print(f"  degraded: {failed} failed ({res.degradation.reason})", file=target)
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
        async with open_client() as client:
            report = await client.health()
        if as_json:
            out.print(report.model_dump_json(indent=2), markup=False)
            return 0 if report.cluster.status != "red" else 1
        c = report.cluster
        out.print(f"cluster {c.name}: {c.status} ({c.nodes} nodes)", markup=False)
        out.print(f"server: Elasticsearch {report.version}, license {report.license}", markup=False)
        idx = report.index
        if idx.exists:
            out.print(
                f"index: {idx.alias} -> {', '.join(idx.indices)}: {idx.documents} documents, "
                f"{idx.size_bytes / 1e6:.1f} MB",
                markup=False,
            )
        else:
            out.print(f"index: {idx.alias} does not exist (run: hybrid-search init)", markup=False)
        if idx.building:
            out.print(
                f"building (a reembed that has not finished; run it again to resume): {', '.join(idx.building)}",
                markup=False,
            )
        out.print("breakers: " + ", ".join(f"{dep} {b.state}" for dep, b in report.breakers.items()), markup=False)
        out.print(f"embeddings: {report.embedding_model} ({report.embedding_dimensions} dims)")
        f = report.fusion
        sources = ", ".join(f"{param} from {source}" for param, source in report.fusion_sources.items())
        weights = f"{f.bm25_weight:g}:{f.knn_weight:g}"
        out.print(f"fusion: {f.method} k={f.k} window={f.window} bm25:knn={weights} ({sources})", markup=False)
        return 0 if c.status != "red" else 1

    run(go())
