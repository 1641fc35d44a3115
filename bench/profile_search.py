"""Where a hybrid search spends the client's CPU: client CPU per search (ours vs raw elasticsearch-py doing
the same work) and a cProfile of our searches. Prints figures; nothing is asserted.

    .venv/bin/python bench/profile_search.py                 # 2,000 SciFact documents, 300 queries
    .venv/bin/python bench/profile_search.py --top 40 --window 50

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
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from embeddings import CachedEmbedder, LocalEmbedder, Vector
from storage import SearchClient, SearchSettings
from storage._eval import load_beir
from storage._queries import bm25_request, knn_request
from storage._text import clean_query
from storage.local_es import url_or_local

ROOT = Path(__file__).resolve().parents[1]


class Precomputed:
    """An embedder that looks vectors up (what the raw client is given): no model time in the figures."""

    def __init__(self, vectors: dict[str, Vector], model_id: str, dimensions: int) -> None:
        self._vectors, self.model_id, self.dimensions, self.normalized = vectors, model_id, dimensions, True

    async def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        return [self._vectors[t] for t in texts]

    async def embed_query(self, text: str) -> Vector:
        return self._vectors[text]

    async def probe(self) -> None:
        return None

    async def aclose(self) -> None:
        return None


def inline_rrf(lists: list[list[str]], k: int) -> list[str]:
    scores: dict[str, float] = {}
    for ids in lists:
        for rank, doc_id in enumerate(ids, start=1):
            scores[doc_id] = scores.get(doc_id, 0.0) + 1.0 / (k + rank)
    return sorted(scores, key=lambda d: -scores[d])


async def cpu_per_call(call: Callable[[str], Awaitable[Any]], queries: list[str]) -> tuple[float, float]:
    """(client CPU ms, wall ms) per call, sequential calls."""
    c0, w0 = time.process_time(), time.perf_counter()
    for q in queries:
        await call(q)
    n = len(queries)
    return (time.process_time() - c0) * 1000 / n, (time.perf_counter() - w0) * 1000 / n


async def run(url: str, args: argparse.Namespace) -> None:
    data = load_beir(args.beir)
    docs = data.documents[: args.docs]
    queries = list(data.queries.values())[: args.queries]
    cached = CachedEmbedder(LocalEmbedder(), ROOT / ".cache" / "embeddings")
    settings = SearchSettings(url=url, index="bench-profile", window=args.window, leg_timeout_s=30)
    async with SearchClient.from_settings(settings, embedder=cached) as loader:
        await loader.delete_index()
        await loader.ensure_index()
        report = await loader.index_documents(docs, refresh=True)
        assert report.ok, report.failed[:3]
        vectors = {q: await cached.embed_query(q) for q in queries}
    # The client embeds the cleaned query text (whitespace normalised, control characters dropped).
    by_clean = {clean_query(q).text: v for q, v in vectors.items()}
    embedder = Precomputed(by_clean, cached.model_id, cached.dimensions)
    client = SearchClient.from_settings(settings, embedder=embedder)
    raw = client._es
    k = settings.rrf_k
    try:

        async def ours(q: str) -> None:
            await client.search(q, limit=10, highlight=args.highlight)

        async def raw_hybrid(q: str) -> None:
            b = bm25_request(q, filters=[], size=args.window, highlight=args.highlight)
            v = knn_request(vectors[q], filters=[], k=args.window, num_candidates=settings.num_candidates)
            r1, r2 = await asyncio.gather(
                raw.search(index="bench-profile", **b), raw.search(index="bench-profile", **v)
            )
            inline_rrf([[h["_id"] for h in r["hits"]["hits"]] for r in (r1, r2)], k)[:10]

        for q in queries[:30]:  # warm-up: connections, JIT-less caches, the server's
            await ours(q)
            await raw_hybrid(q)
        figures = {}
        for name, call in (("raw elasticsearch-py", raw_hybrid), ("ours", ours)) * 2:
            figures[name] = await cpu_per_call(call, queries)  # the second round is kept (warmer)
        print(f"{len(docs)} documents, {len(queries)} queries, window {args.window}, highlight={args.highlight}")
        for name, (cpu, wall) in figures.items():
            print(f"  {name:<22} client CPU {cpu:6.2f} ms/search   wall {wall:6.2f} ms/search")
        ours_cpu, raw_cpu = figures["ours"][0], figures["raw elasticsearch-py"][0]
        print(f"  ours - raw: {ours_cpu - raw_cpu:+.2f} ms of client CPU per search")

        profiler = cProfile.Profile()
        profiler.enable()
        for q in queries:
            await ours(q)
        profiler.disable()
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out)
        for key in ("tottime", "cumulative"):
            stats.sort_stats(key).print_stats(args.top)
        if args.callers:
            stats.print_callers(args.callers)
        print(out.getvalue())
    finally:
        await client.delete_index()
        await client.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--beir", type=Path, default=ROOT.parent / "shared/data/beir/scifact")
    parser.add_argument("--docs", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--window", type=int, default=50)
    parser.add_argument("--highlight", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--callers", help="also print the callers of functions matching this regex")
    args = parser.parse_args()
    with url_or_local("profile") as url:
        asyncio.run(run(url, args))


if __name__ == "__main__":
    main()
