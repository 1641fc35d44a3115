"""A bulk load against a load written as usual: the same documents into two indices, one with
``index_documents(bulk_load=False)`` (refresh every second while it writes, as a live index), one with
``bulk_load=True`` (refresh off, restored, merged to one segment per shard). For each: the load's wall time,
the segments it leaves, the store, and kNN / hybrid p50 over the judged queries (the two indices taken in turn
for each query, the order rotated, ``--rounds`` times; query vectors cached).

    .venv/bin/python bench/bulk_load.py --sets scifact scifact-x10

Starts a local Elasticsearch (1 GiB heap) unless ES_URL is set. Prints a table; JSON in
bench/results/bulk_load.json.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path
from typing import Any

from layouts import embedder, folder
from output import each_set, save

from storage import SearchClient, SearchSettings
from storage.evaluation import load_beir
from storage.local_es import url_or_local

ROOT = Path(__file__).resolve().parents[1]
WAYS = {"as usual": False, "bulk load": True}


async def segments_and_store(client: SearchClient) -> tuple[int, float]:
    es = client.elasticsearch
    shards = (await es.indices.segments(index=client.index)).body["indices"]
    count = sum(
        len(copy["segments"])
        for index in shards.values()
        for copies in index["shards"].values()
        for copy in copies
        if copy["routing"]["primary"]
    )
    stats = (await es.indices.stats(index=client.index, metric="store")).body["_all"]
    return count, round(stats["primaries"]["store"]["size_in_bytes"] / 1e6, 2)


async def measure(url: str, name: str, rounds: int) -> dict[str, Any]:
    data = load_beir(folder(name))
    cached = embedder()
    queries = [data.queries[q] for q in sorted(data.qrels) if q in data.queries]
    for text in queries:
        await cached.embed_query(text)
    clients = {
        way: SearchClient.from_settings(
            SearchSettings(url=url, index=f"bench-bulk-{name}-{'bulk' if bulk else 'usual'}", leg_timeout_s=60),
            embedder=cached,
        )
        for way, bulk in WAYS.items()
    }
    out: dict[str, Any] = {"set": name, "documents": len(data.documents), "ways": {}}
    try:
        for client in clients.values():
            await client.__aenter__()
        warm = clients["as usual"]  # (a first load fills the embedding cache: both timed loads write alone)
        await warm.indices.delete()
        await warm.index_documents(data.documents)
        for way, client in clients.items():
            await client.indices.delete()
            await client.ensure_index()
            t0 = time.perf_counter()
            report = await client.index_documents(data.documents, bulk_load=WAYS[way])
            seconds = time.perf_counter() - t0
            assert report.ok, report.failed[:3]
            await client.indices.refresh()
            segs, store = await segments_and_store(client)
            out["ways"][way] = {"load_s": round(seconds, 1), "segments": segs, "store_mb": store}
        times: dict[str, dict[str, list[float]]] = {w: {"knn": [], "hybrid": []} for w in WAYS}
        order = list(WAYS)
        for r in range(rounds + 1):  # (round 0 warms both)
            for i, q in enumerate(queries):
                for way in order[(i + r) % 2 :] + order[: (i + r) % 2]:
                    for mode in ("knn", "hybrid"):
                        t0 = time.perf_counter()
                        await clients[way].search(q, mode=mode, limit=10, highlight=False)
                        if r:
                            times[way][mode].append((time.perf_counter() - t0) * 1000)
        for way in WAYS:
            out["ways"][way]["p50_ms"] = {m: round(statistics.median(v), 2) for m, v in times[way].items()}
        for client in clients.values():
            await client.indices.delete()
    finally:
        for client in clients.values():
            await client.__aexit__(None, None, None)
    return out


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| set | load | seconds | segments | store MB | p50 ms kNN / hybrid | vs as usual: kNN, hybrid |",
        "|---|---|---:|---:|---:|---|---|",
    ]
    for row in rows:
        base = row["ways"]["as usual"]["p50_ms"]
        for way, r in row["ways"].items():
            p = r["p50_ms"]
            rel = f"{p['knn'] / base['knn']:.2f}×, {p['hybrid'] / base['hybrid']:.2f}×"
            lines.append(
                f"| {row['set']} ({row['documents']}) | {way} | {r['load_s']} | {r['segments']} | {r['store_mb']} "
                f"| {p['knn']} / {p['hybrid']} | {rel} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", nargs="+", default=["scifact", "scifact-x10"])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    with url_or_local("bench-bulk-load", heap="1g") as url:
        rows = each_set(args.sets, lambda name: asyncio.run(measure(url, name, args.rounds)))
    save(rows, "bulk_load.json", table)


if __name__ == "__main__":
    main()
