"""Ingest streams: a generator of small documents, read as it is written, with flat memory.

    .venv/bin/python bench/ingest_stream.py [--documents 1000000]

A generator yields ``--documents`` small documents (an id, a title, a sentence); ``index_documents`` reads it
in bounded groups with the feature-hashing test embedder (so that the model is not what is measured) into an
index of its own on a local Elasticsearch (started here unless ES_URL is set; deleted at the end). Prints the
process's RSS before, every ``--every`` documents, and at the end, the throughput, and what the report holds;
not a test.

What grows with the number of documents, on purpose: the report (``report.indexed`` lists every id, as the
API promises every id an outcome) and the set of ids read (to report an id given twice). Everything else — the
documents, their vectors, the bulk requests — is bounded by the batch size and the queue between the embedder
and the writer.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import time
from collections.abc import Iterator
from pathlib import Path

from embeddings import HashingEmbedder
from storage import Document, SearchClient, SearchSettings
from storage.local_es import url_or_local
from storage.types import IndexProgress


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def documents(n: int) -> Iterator[Document]:
    for i in range(n):
        yield Document(id=f"s{i:07d}", title=f"note {i % 997}", text=f"a small streamed document number {i}")


async def run(url: str, n: int, every: int) -> dict[str, object]:
    settings = SearchSettings(url=url, index="bench-ingest-stream", passages=False)
    samples: list[tuple[int, float]] = []
    next_sample = [every]

    def progress(p: IndexProgress) -> None:
        if p.indexed_count >= next_sample[0]:
            next_sample[0] += every
            samples.append((p.indexed_count, round(rss_mb(), 1)))
            print(json.dumps({"indexed": p.indexed_count, "rss_mb": samples[-1][1]}), flush=True)

    async with SearchClient.from_settings(settings, embedder=HashingEmbedder(dimensions=64)) as client:
        await client.indices.delete()
        await client.ensure_index()
        gc.collect()
        before = rss_mb()
        started = time.perf_counter()
        report = await client.index_documents(documents(n), progress=progress)
        seconds = time.perf_counter() - started
        after = rss_mb()
        await client.indices.refresh()
        count = await client.documents.count()
        await client.indices.delete()
    return {
        "documents": n,
        "indexed": len(report.indexed),
        "failed": len(report.failed),
        "count_in_index": count,
        "seconds": round(seconds, 1),
        "documents_per_s": round(n / seconds),
        "rss_before_mb": round(before, 1),
        "rss_after_mb": round(after, 1),
        "rss_growth_mb": round(after - before, 1),
        "rss_samples": samples,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--documents", type=int, default=1_000_000)
    parser.add_argument("--every", type=int, default=100_000)
    args = parser.parse_args()
    with url_or_local("ingest-stream") as url:
        print(json.dumps(asyncio.run(run(url, args.documents, args.every)), indent=2))


if __name__ == "__main__":
    main()
