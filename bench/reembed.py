"""A model change with no downtime, measured: SciFact (5,183 documents) indexed with all-MiniLM-L6-v2, then
moved to the default model (bge-small-en-v1.5) by `SearchClient.reembed`, while a client of the old model
searches every 100 ms. Not a test; prints figures.

    .venv/bin/python bench/reembed.py [--beir ../shared/data/beir/scifact]

The old index is built from cached MiniLM vectors (.cache/embeddings); the new model embeds every document
for real (no cache), as a user's run would.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import time
from pathlib import Path

from embeddings import CachedEmbedder, LocalEmbedder
from storage import SearchClient, SearchSettings
from storage.evaluation import load_beir
from storage.local_es import url_or_local
from storage.types import IndexProgress

ROOT = Path(__file__).resolve().parents[1]


async def ids_of(client: SearchClient) -> list[str]:
    resp = await client.elasticsearch.search(index=client.index, size=10_000, source=False, query={"match_all": {}})
    return sorted(h["_id"] for h in resp.body["hits"]["hits"])


async def run(url: str, folder: Path) -> dict[str, object]:
    data = load_beir(folder)
    queries = list(data.queries.values())
    settings = SearchSettings(url=url, index="reembed-bench", leg_timeout_s=30, bulk_chunk_size=100)
    old_model = CachedEmbedder(LocalEmbedder("all-MiniLM-L6-v2"), ROOT / ".cache" / "embeddings")
    async with SearchClient.from_settings(settings, embedder=old_model) as old:
        await old.indices.delete()
        await old.ensure_index()
        assert (await old.index_documents(data.documents, refresh=True)).ok
        before = await ids_of(old)
        async with SearchClient.from_settings(settings, embedder=LocalEmbedder()) as new:
            seen: list[IndexProgress] = []
            started = time.perf_counter()
            task = asyncio.create_task(new.indices.reembed(progress=seen.append, delete_old=True))
            searches = failed = degraded = 0
            reasons: list[str] = []
            latencies: list[float] = []
            while not task.done():
                t0 = time.perf_counter()
                try:
                    res = await old.search(queries[searches % len(queries)], limit=10, highlight=False)
                    if res.degraded:
                        degraded += 1
                        reasons.append(
                            f"{res.degradation.reason if res.degradation else None} (promoted: {task.done()})"
                        )
                except Exception:
                    failed += 1
                latencies.append((time.perf_counter() - t0) * 1000)
                searches += 1
                await asyncio.sleep(0.1)
            report = await task
            seconds = time.perf_counter() - started
            after = await ids_of(new)
            after_search = await new.search(queries[0], limit=10)
            await new.indices.delete()
    latencies.sort()
    return {
        "documents": report.documents,
        "embedded": report.embedded,
        "promoted": report.promoted,
        "seconds": round(seconds, 1),
        "docs_per_s": round(report.embedded / seconds, 1),
        "searches_during": searches,
        "searches_failed": failed,
        "searches_degraded": degraded,
        "degraded_reasons": reasons,
        "search_p50_ms": round(latencies[len(latencies) // 2], 1),
        "search_p95_ms": round(latencies[int(len(latencies) * 0.95)], 1),
        "ids_equal": before == after,
        "count_before_after": [len(before), len(after)],
        "new_model_search_both_legs": all(leg.ok for leg in after_search.legs.values()),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "progress_events": len(seen),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--beir", type=Path, default=ROOT.parent / "shared" / "data" / "beir" / "scifact")
    args = parser.parse_args()
    with url_or_local("reembed", heap="1g") as url:
        print(json.dumps(asyncio.run(run(url, args.beir)), indent=2))


if __name__ == "__main__":
    main()
