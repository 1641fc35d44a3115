"""Hybrid latency: two parallel requests versus one ``_msearch``, with the default local model.

Prints a JSON result (p50/p95/p99 per variant, and the ratio msearch / parallel); not a test. Indexes the
first ``--docs`` SciFact abstracts, then runs every test query in each variant, interleaved (so that
drift hits all variants alike), after a warm-up. Starts a local Elasticsearch unless ES_URL is set.

    .venv/bin/python bench/round_trip.py [--beir ../shared/data/beir/scifact] [--docs 600] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from pathlib import Path

from embeddings import LocalEmbedder
from storage import Document, SearchClient, SearchSettings
from storage.local_es import url_or_local


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(int(q * len(ordered)), len(ordered) - 1)], 2)


async def measure(url: str, folder: Path, n_docs: int, rounds: int) -> dict[str, object]:
    corpus = [json.loads(line) for line in (folder / "corpus.jsonl").read_text().splitlines()[:n_docs]]
    docs = [Document(id=c["_id"], title=c.get("title") or "", text=c.get("text") or "-") for c in corpus]
    queries = [json.loads(line)["text"] for line in (folder / "queries.jsonl").read_text().splitlines()]
    settings = SearchSettings(url=url, index="bench-round-trip", leg_timeout_s=30)
    variants = {
        "hybrid_parallel": {"mode": "hybrid", "round_trip": "parallel"},
        "hybrid_msearch": {"mode": "hybrid", "round_trip": "msearch"},
        "bm25": {"mode": "bm25"},
        "knn": {"mode": "knn"},
    }
    times: dict[str, list[float]] = {v: [] for v in variants}
    # No query cache: every search embeds its query, as unique user queries do. Parallel overlaps that
    # with the BM25 request; msearch must embed before its single request.
    async with SearchClient.from_settings(settings, embedder=LocalEmbedder(query_cache_size=0)) as client:
        await client.indices.delete()
        await client.ensure_index()
        await client.index_documents(docs, refresh=True)
        for q in queries[:30]:  # warm-up: JIT, Elasticsearch caches, connections
            for opts in variants.values():
                await client.search(q, highlight=False, **opts)  # type: ignore[arg-type]
        for _ in range(rounds):
            for q in queries:
                for name, opts in variants.items():
                    t0 = time.perf_counter()
                    await client.search(q, highlight=False, **opts)  # type: ignore[arg-type]
                    times[name].append((time.perf_counter() - t0) * 1000)
        await client.indices.delete()
    out: dict[str, object] = {"documents": len(docs), "queries": len(queries), "rounds": rounds}
    for name, values in times.items():
        out[name] = {
            "p50_ms": _pct(values, 0.5),
            "p95_ms": _pct(values, 0.95),
            "p99_ms": _pct(values, 0.99),
            "mean_ms": round(statistics.fmean(values), 2),
        }
    p50 = {name: statistics.median(v) for name, v in times.items()}
    out["msearch_over_parallel_p50"] = round(p50["hybrid_msearch"] / p50["hybrid_parallel"], 3)
    out["parallel_over_slower_leg_p50"] = round(p50["hybrid_parallel"] / max(p50["bm25"], p50["knn"]), 3)
    out["note"] = "every search embeds its query (no cache); interleaved variants; one machine, one run"
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--beir", type=Path, default=Path(__file__).parents[2] / "shared/data/beir/scifact")
    parser.add_argument("--docs", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    with url_or_local("bench-rt", heap="1g") as url:
        print(json.dumps(asyncio.run(measure(url, args.beir, args.docs, args.rounds)), indent=2))


if __name__ == "__main__":
    main()
