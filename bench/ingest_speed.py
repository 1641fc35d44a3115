"""Ingest of long documents against the embedder's own speed: tokens embedded per second through
``index_documents`` (passages, embedding and bulk writes overlapped, into a local Elasticsearch) against a
raw onnxruntime loop over exactly the texts the ingest embedded, on the same machine, one after the other.

- the product: the first ``--reports`` reports of a long collection (``bench/long_documents.py``) indexed
  with the default local model (no embedding cache) into an index read in passages, after a warm-up ingest
  of a few reports (the JVM's compilation and the model's load are not counted); the texts handed to the
  embedder are recorded, and the time spent inside it;
- the raw loop: onnxruntime + tokenizers on the same model files, the same truncation and pooling, the
  recorded texts sorted by length in batches of 16 and 32, one and two parallel calls; the best reported.

    .venv/bin/python bench/ingest_speed.py [--set scifact-x10] [--reports 60]

Starts a local Elasticsearch (1 GiB heap) unless ES_URL is set. Prints JSON lines and a summary.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from embeddings_speed import raw_model
from long_documents import long_collection

from embeddings import DEFAULT_LOCAL_MODEL, LocalEmbedder, Vector
from storage import SearchClient, SearchSettings
from storage.evaluation import load_beir
from storage.local_es import url_or_local


class Recording(LocalEmbedder):
    """The default local model, keeping what it was asked to embed and how long it took."""

    def __init__(self) -> None:
        super().__init__(query_cache_size=0)
        self.texts: list[str] = []
        self.seconds = 0.0

    async def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        started = time.perf_counter()
        try:
            return await super().embed_documents(texts)
        finally:
            self.seconds += time.perf_counter() - started
            self.texts.extend(texts)


def raw_loop(texts: list[str]) -> dict[str, Any]:
    encoded, run = raw_model(DEFAULT_LOCAL_MODEL, texts)
    tokens = sum(len(e) for e in encoded)
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
    best: dict[str, Any] = {}
    for size in (16, 32):
        batches = [[encoded[i] for i in order[s : s + size]] for s in range(0, len(order), size)]
        for calls in (1, 2):
            started = time.perf_counter()
            with ThreadPoolExecutor(calls) as pool:
                list(pool.map(run, batches))
            seconds = time.perf_counter() - started
            row = {
                "batch": size,
                "parallel_calls": calls,
                "seconds": round(seconds, 1),
                "tokens_per_s": round(tokens / seconds),
            }
            print(json.dumps({"raw": row}), flush=True)
            if row["tokens_per_s"] > best.get("tokens_per_s", 0):
                best = row
    return best | {"tokens": tokens, "texts": len(texts)}


async def product(url: str, name: str, reports: int) -> tuple[dict[str, Any], list[str]]:
    data = load_beir(long_collection(name.removesuffix("-x10")))
    docs = list(data.documents)
    embedder = Recording()
    settings = SearchSettings(url=url, index="bench-ingest-speed")
    async with SearchClient.from_settings(settings, embedder=embedder) as client:
        await client.indices.delete()
        await client.ensure_index()
        await client.index_documents(docs[-5:], refresh=True)  # warm-up: the JVM and the model
        await client.indices.delete()
        await client.ensure_index()
        embedder.texts.clear()
        embedder.seconds = 0.0
        started = time.perf_counter()
        report = await client.index_documents(docs[:reports], refresh=True)
        seconds = time.perf_counter() - started
        assert report.ok, report.failed[:3]
        await client.indices.delete()
    row = {
        "documents": reports,
        "texts": len(embedder.texts),
        "seconds": round(seconds, 1),
        "embedding_seconds": round(embedder.seconds, 1),
    }
    return row, list(embedder.texts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--set", default="scifact-x10")
    parser.add_argument("--reports", type=int, default=60)
    args = parser.parse_args()
    with url_or_local("bench-ingest-speed", heap="1g") as url:
        ingest, texts = asyncio.run(product(url, args.set, args.reports))
    raw = raw_loop(texts)  # the same texts, tokenised as the model reads them: their tokens counted once
    ingest["tokens"] = raw["tokens"]
    ingest["tokens_per_s"] = round(raw["tokens"] / ingest["seconds"])
    print(json.dumps({"product": ingest}), flush=True)
    print(json.dumps({"raw_best": raw}), flush=True)
    print(
        f"{args.set}, {ingest['documents']} reports, {ingest['texts']} texts, {ingest['tokens']} tokens: "
        f"index_documents {ingest['tokens_per_s']} tokens/s ({ingest['seconds']} s, of which inside the embedder "
        f"{ingest['embedding_seconds']} s); raw loop {raw['tokens_per_s']} tokens/s (batch {raw['batch']}, "
        f"{raw['parallel_calls']} calls, {raw['seconds']} s): {ingest['tokens_per_s'] / raw['tokens_per_s']:.2f}x"
    )


if __name__ == "__main__":
    main()
