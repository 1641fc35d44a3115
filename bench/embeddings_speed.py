"""Load time, throughput and peak memory of the default local embedder. Prints figures; not a test.

.venv/bin/python bench/embeddings_speed.py [--scifact ../shared/data/beir/scifact]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import time
from pathlib import Path

from embeddings import LocalEmbedder

SHORT = [f"Short sentence number {i} about quarterly revenue and guidance." for i in range(400)]


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scifact", type=Path, default=Path(__file__).parents[2] / "shared/data/beir/scifact")
    parser.add_argument("--abstracts", type=int, default=200)
    args = parser.parse_args()
    emb = LocalEmbedder()
    t0 = time.perf_counter()
    await emb.load()
    load_s = time.perf_counter() - t0
    await emb.embed_documents(SHORT[:8])  # warm-up
    t0 = time.perf_counter()
    await emb.embed_documents(SHORT)
    short_rate = len(SHORT) / (time.perf_counter() - t0)
    abstracts = [
        f"{d['title']}\n{d['text']}"
        for d in map(json.loads, (args.scifact / "corpus.jsonl").read_text().splitlines()[: args.abstracts])
    ]
    t0 = time.perf_counter()
    await emb.embed_documents(abstracts)
    abstract_rate = len(abstracts) / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    for i in range(50):
        await emb.embed_query(f"what causes revenue guidance cuts {i}")
    query_ms = (time.perf_counter() - t0) / 50 * 1000
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    await emb.aclose()
    print(
        json.dumps(
            {
                "model": emb.model_id,
                "load_s": round(load_s, 3),
                "short_sentences_per_s": round(short_rate, 1),
                "scifact_abstracts_per_s": round(abstract_rate, 1),
                "query_ms": round(query_ms, 1),
                "peak_rss_mb": round(peak_mb),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    asyncio.run(main())
