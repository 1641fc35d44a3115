"""Where a hybrid search spends the client's CPU: client CPU per search (ours vs raw elasticsearch-py doing
the same work) and a cProfile of our searches. Prints figures; nothing is asserted.

    .venv/bin/python bench/profile_search.py                 # 2,000 SciFact documents, 300 queries
    .venv/bin/python bench/profile_search.py --top 40 --window 50
    .venv/bin/py-spy record -r 1000 -f raw -o stacks.txt -- \
        .venv/bin/python bench/profile_search.py --canned-only --no-cprofile   # sampled (the bench extra)

Starts a local Elasticsearch unless ES_URL is set. Query vectors are precomputed for both clients (an
in-memory embedder), so the figures are the client's own work: request building, (de)serialisation,
fusion, models, logging, tracing, resilience. ``process_time`` is this process only (Elasticsearch runs
in its own), so "client CPU per search" is what the client takes from the cores Elasticsearch shares.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import pstats
import resource
import statistics
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, ClassVar

import orjson
from elastic_transport import ApiResponseMeta, BaseAsyncNode, HttpHeaders
from elastic_transport._node import NodeApiResponse
from elasticsearch import AsyncElasticsearch
from elasticsearch.serializer import OrjsonSerializer
from raw_client import (  # bench/raw_client.py: the hand-written references
    Precomputed,
    bm25_request,
    fetch_request,
    knn_request,
    one_phase,
    query_key,
    two_phase,
)
from throughput import interleaved_throughput  # bench/throughput.py's slices

from embeddings import CachedEmbedder, LocalEmbedder, Vector
from storage import SearchClient, SearchSettings
from storage.evaluation import load_beir
from storage.local_es import url_or_local

ROOT = Path(__file__).resolve().parents[1]


async def cpu_per_call(call: Callable[[str], Awaitable[Any]], queries: list[str]) -> dict[str, float]:
    """Per call, sequential calls: client CPU (user and system time apart), wall time (ms) and voluntary
    context switches (a wake-up of the process: more of them would mean more event-loop round trips)."""
    r0, w0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    for q in queries:
        await call(q)
    r1, n = resource.getrusage(resource.RUSAGE_SELF), len(queries)
    return {
        "user": (r1.ru_utime - r0.ru_utime) * 1000 / n,
        "sys": (r1.ru_stime - r0.ru_stime) * 1000 / n,
        "wall": (time.perf_counter() - w0) * 1000 / n,
        "switches": (r1.ru_nvcsw - r0.ru_nvcsw) / n,
    }


def _kind(body: bytes | None) -> str:
    """Which of a search's three requests a body is: ``knn``, ``fetch`` (the page's ids) or ``bm25``."""
    return "knn" if body and b'"knn"' in body else "fetch" if body and b'"ids"' in body else "bm25"


class CannedNode(BaseAsyncNode):
    """A transport node answering from recorded responses, instantly: the client's CPU without the server's
    noise (both clients send the same requests and get the same bytes back)."""

    answers: ClassVar[dict[str, bytes]] = {}

    async def perform_request(  # type: ignore[override]
        self, method: str, target: str, body: bytes | None = None, headers: Any = None, request_timeout: Any = None
    ) -> NodeApiResponse:
        kind = _kind(body)
        headers_out = HttpHeaders({"content-type": "application/json", "x-elastic-product": "Elasticsearch"})
        meta = ApiResponseMeta(status=200, http_version="1.1", headers=headers_out, duration=0.0, node=self.config)
        return NodeApiResponse(meta, self.answers[kind])

    async def close(self) -> None:
        return None


def _clocked(perform: Callable[..., Awaitable[Any]], seen: dict[str, float]) -> Callable[..., Awaitable[Any]]:
    """A node's ``perform_request`` that notes when each search request (``bm25``, ``knn``, ``fetch``) is handed
    to it (``kind>``) and when its answer is back (``kind<``), in ``seen``."""

    async def perform_request(method: str, target: str, body: bytes | None = None, *args: Any, **kw: Any) -> Any:
        kind = _kind(body)
        seen[f"{kind}>"] = time.perf_counter()
        try:
            return await perform(method, target, body, *args, **kw)
        finally:
            seen[f"{kind}<"] = time.perf_counter()

    return perform_request


async def record_answers(
    es: AsyncElasticsearch, index: str, query: str, vector: Vector, window: int, candidates: int, *, highlight: bool
) -> dict[str, Any]:
    """One query's three real answers (the BM25 leg, the kNN leg, the fetch of a page of the legs' top five
    each), as :class:`CannedNode` replays them."""
    bm25 = await es.search(index=index, **bm25_request(query, size=window))
    knn = await es.search(index=index, **knn_request(vector, k=window, num_candidates=candidates))
    page = [h["_id"] for h in bm25["hits"]["hits"][:5]] + [h["_id"] for h in knn["hits"]["hits"][:5]]
    fetched = await es.search(index=index, **fetch_request(query, page, highlight=highlight))
    return {"bm25": bm25.body, "knn": knn.body, "fetch": fetched.body}


async def canned(
    es: AsyncElasticsearch,
    queries: list[str],
    vectors: dict[str, Vector],
    by_clean: dict[str, Vector],
    settings: SearchSettings,
    args: argparse.Namespace,
) -> None:
    """Ours vs raw on recorded answers (one query's three real responses), best of three rounds."""
    q = queries[0]
    window, cands = args.window, settings.num_candidates
    recorded = await record_answers(es, "bench-profile", q, vectors[q], window, cands, highlight=args.highlight)
    CannedNode.answers = {kind: orjson.dumps(body) for kind, body in recorded.items()}
    fake = AsyncElasticsearch("http://canned:9200", node_class=CannedNode, serializer=OrjsonSerializer())
    embedder = Precomputed({x: vectors[q] for x in by_clean} | by_clean, "m", len(vectors[q]))
    client = SearchClient(fake, embedder, settings, owns_clients=False)

    async def ours() -> None:
        await client.search(q, limit=10, highlight=args.highlight)

    async def raw() -> None:
        await two_phase(
            fake,
            "bench-profile",
            q,
            vectors[q],
            window=window,
            candidates=cands,
            k=settings.rrf_k,
            highlight=args.highlight,
        )

    n, best = 2000, {"raw, two phases (our requests)": 1e9, "ours": 1e9}
    for _ in range(3):
        for name, call in (("raw, two phases (our requests)", raw), ("ours", ours)):
            c0 = time.process_time()
            for _ in range(n):
                await call()
            best[name] = min(best[name], (time.process_time() - c0) * 1000 / n)
    print("canned answers (no server; best of 3 x 2,000 searches):")
    for name, ms in best.items():
        print(f"  {name:<31} client CPU {ms:6.3f} ms/search")
    print(f"  ours - raw: {best['ours'] - best['raw, two phases (our requests)']:+.3f} ms per search")
    if not args.cprofile:
        await fake.close()
        return
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(n):
        await ours()
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    for key in args.sort:
        stats.sort_stats(key).print_stats(args.top)
    print(out.getvalue())
    await fake.close()


async def critical_path(
    client: SearchClient,
    es: AsyncElasticsearch,
    queries: list[str],
    vectors: dict[str, Vector],
    args: argparse.Namespace,
    *,
    k: int,
    candidates: int,
    rounds: int = 3,
) -> None:
    """One caller, paired query by query (ours then raw two-phase, the order alternating): the wall time of a
    search, of its slower leg and of its fetch (each as the client measures it), and the rest — the client's
    own time on the critical path; then when each request was handed to the node and came back (ms into the
    search), and the client's time between the later leg's answer and the fetch, and after the fetch."""
    walls: dict[str, list[float]] = {"ours": [], "raw": []}
    legs: dict[str, list[float]] = {"ours": [], "raw": []}
    fetches: dict[str, list[float]] = {"ours": [], "raw": []}
    marks: dict[str, list[dict[str, float]]] = {"ours": [], "raw": []}
    seen: dict[str, float] = {}
    for node in es.transport.node_pool.all():  # (shared by the client's options() copies: both clients' requests)
        node.perform_request = _clocked(node.perform_request, seen)  # type: ignore[method-assign,assignment,arg-type]
    for turn in range(rounds):
        for i, q in enumerate(queries):
            for who in ("ours", "raw") if (i + turn) % 2 == 0 else ("raw", "ours"):
                seen.clear()
                t0 = time.perf_counter()
                if who == "ours":
                    res = await client.search(q, limit=10, highlight=args.highlight)
                    slower, fetch = max(leg.latency_ms for leg in res.legs.values()), res.fetch_ms or 0.0
                else:
                    timings: dict[str, float] = {}
                    await two_phase(
                        es, "bench-profile", q, vectors[q], window=args.window, candidates=candidates, k=k,
                        highlight=args.highlight, timings=timings,
                    )  # fmt: skip
                    slower, fetch = max(timings["bm25"], timings["knn"]), timings["fetch"]
                walls[who].append((time.perf_counter() - t0) * 1000)
                legs[who].append(slower)
                fetches[who].append(fetch)
                marks[who].append({k: (t - t0) * 1000 for k, t in seen.items()} | {"end": walls[who][-1]})
    med = statistics.median
    print(f"critical path at one caller, paired query by query ({rounds} x {len(queries)} searches each; medians, ms):")
    for who in ("ours", "raw"):
        rest = [w - s - f for w, s, f in zip(walls[who], legs[who], fetches[who], strict=True)]
        print(
            f"  {who:<5} wall {med(walls[who]):6.2f}   slower leg {med(legs[who]):6.2f}   fetch"
            f" {med(fetches[who]):5.2f}   the client's own {med(rest):5.2f}"
        )
    print(f"  ours / raw (wall, median): {med(walls['raw']) / med(walls['ours']):.3f}")
    print("  ms into a search (medians): request handed to the node (>) and back (<)")
    for who in ("ours", "raw"):
        m = marks[who]
        kinds = ("bm25>", "knn>", "bm25<", "knn<", "fetch>", "fetch<")
        times = "  ".join(f"{k} {med(x[k] for x in m):6.2f}" for k in kinds)
        fusion = med(x["fetch>"] - max(x["bm25<"], x["knn<"]) for x in m)
        after = med(x["end"] - x["fetch<"] for x in m)
        slower = sum(x["knn<"] > x["bm25<"] for x in m) / len(m)
        print(f"  {who:<5} {times}   later leg back -> fetch out {fusion:4.2f}   fetch back -> returned {after:4.2f}")
        print(f"        the kNN leg answered last in {slower:.0%} of searches")


async def run(url: str, args: argparse.Namespace) -> None:
    data = load_beir(args.beir)
    docs = data.documents[: args.docs]
    queries = list(data.queries.values())[: args.queries]
    cached = CachedEmbedder(LocalEmbedder(), ROOT / ".cache" / "embeddings")
    settings = SearchSettings(url=url, index="bench-profile", window=args.window, passages=False)
    if args.leg_budget is not None:  # (default: the settings' default, as users run it)
        settings = settings.model_copy(update={"leg_timeout_s": args.leg_budget})
    async with SearchClient.from_settings(settings, embedder=cached) as loader:
        await loader.indices.delete()
        await loader.ensure_index()
        report = await loader.index_documents(docs, refresh=True)
        assert report.ok, report.failed[:3]
        vectors = {q: await cached.embed_query(q) for q in queries}
    # The client embeds the cleaned query text (whitespace normalised, control characters dropped).
    by_clean = {query_key(q): v for q, v in vectors.items()}
    embedder = Precomputed(by_clean, cached.model_id, cached.dimensions)
    client = SearchClient.from_settings(settings, embedder=embedder)
    es, k, cands = client.elasticsearch, settings.rrf_k, settings.num_candidates
    try:
        if args.canned_only:
            await canned(es, queries, vectors, by_clean, settings, args)
            return

        async def ours(q: str) -> None:
            await client.search(q, limit=10, highlight=args.highlight)

        def raw(shape: Callable[..., Awaitable[Any]]) -> Callable[[str], Awaitable[Any]]:
            async def call(q: str) -> None:
                await shape(
                    es,
                    "bench-profile",
                    q,
                    vectors[q],
                    window=args.window,
                    candidates=cands,
                    k=k,
                    highlight=args.highlight,
                )

            return call

        raw_one, raw_two = raw(one_phase), raw(two_phase)

        calls = {"raw, one phase": raw_one, "raw, two phases (our requests)": raw_two, "ours": ours}
        for q in queries[:30]:  # warm-up: connections, caches, the server's
            for call in calls.values():
                await call(q)
        figures = {}
        for name, call in list(calls.items()) * 2:
            figures[name] = await cpu_per_call(call, queries)  # the second round is kept (warmer)
        print(f"{len(docs)} documents, {len(queries)} queries, window {args.window}, highlight={args.highlight}")
        for name, f in figures.items():
            print(
                f"  {name:<31} client CPU {f['user'] + f['sys']:6.2f} ms/search (user {f['user']:5.2f}, system"
                f" {f['sys']:5.2f})   wall {f['wall']:6.2f} ms   {f['switches']:4.1f} context switches/search"
            )
        ours_cpu = figures["ours"]["user"] + figures["ours"]["sys"]
        ref = figures["raw, two phases (our requests)"]
        raw_cpu = ref["user"] + ref["sys"]
        print(f"  ours - raw (same requests): {ours_cpu - raw_cpu:+.2f} ms of client CPU per search")
        await critical_path(client, es, queries, vectors, args, k=k, candidates=cands)
        await canned(es, queries, vectors, by_clean, settings, args)
        if args.throughput:
            print(f"throughput, queries/s at 1 / 8 / 32 callers ({args.throughput:g} s each, interleaved rounds):")
            qps = {c: await interleaved_throughput(calls, queries, c, args.throughput) for c in (1, 8, 32)}
            for name in calls:
                print(f"  {name:<31} " + " / ".join(f"{qps[c][name]:.1f}" for c in (1, 8, 32)))

        if not args.cprofile:
            return
        profiler = cProfile.Profile()
        profiler.enable()
        for q in queries:
            await ours(q)
        profiler.disable()
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out)
        for key in args.sort:
            stats.sort_stats(key).print_stats(args.top)
        if args.callers:
            stats.print_callers(args.callers)
        print(out.getvalue())
    finally:
        await client.indices.delete()
        await client.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--beir", type=Path, default=ROOT.parent / "shared/data/beir/scifact")
    parser.add_argument("--docs", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--window", type=int, default=50)
    parser.add_argument("--highlight", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--leg-budget", type=float, help="leg_timeout_s (default: the settings' default)")
    parser.add_argument("--sort", nargs="+", default=["tottime", "cumulative"], help="pstats sort keys")
    parser.add_argument(
        "--cprofile",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="profile our searches with cProfile (--no-cprofile: figures only, e.g. under py-spy)",
    )
    parser.add_argument("--callers", help="also print the callers of functions matching this regex")
    parser.add_argument("--canned-only", action="store_true", help="only the canned-answer comparison")
    parser.add_argument("--throughput", type=float, default=0, help="also: queries/s at 1, 8, 32 callers, N s each")
    args = parser.parse_args()
    with url_or_local("profile") as url:
        asyncio.run(run(url, args))


if __name__ == "__main__":
    main()
