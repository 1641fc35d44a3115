"""Local embedding speed, per catalogue model, against a raw onnxruntime loop on the same model file; and
ingest through the product with the default model. Prints figures; not a test. Run it on an idle machine.

For each model (each in a process of its own, so that peak RSS is its own):
- load time (files cached), single-query p50 / p95 (distinct SciFact queries, no query cache);
- documents/s through ``LocalEmbedder.embed_documents`` in calls of 64 (what ingest hands it);
- the raw loop: onnxruntime + tokenizers on the same files, the same truncation and pooling, batch sizes
  1, 4, 16, 32 with the texts sorted by length and 8 unsorted, each with 1 and 2 parallel calls, the best
  reported (peak RSS is read before it);
then, for the default model, SciFact documents indexed through ``index_documents`` into a local
Elasticsearch (embedding and bulk overlapping, as a user's ingest; after a warm-up ingest of 200, so that
the JVM's compilation is not counted), with the process's peak RSS.

    .venv/bin/python bench/embeddings_speed.py [--docs 1000] [--model NAME ...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from embeddings import DEFAULT_LOCAL_MODEL, LOCAL_MODELS, LocalEmbedder, find_model, locate_model

ROOT = Path(__file__).resolve().parents[1]
SCIFACT = ROOT.parent / "shared" / "data" / "beir" / "scifact"


def texts(n: int) -> list[str]:
    docs = [json.loads(line) for line in (SCIFACT / "corpus.jsonl").read_text().splitlines()[:n]]
    return [f"{d['title']}\n{d['text']}".strip() for d in docs]


def queries(n: int) -> list[str]:
    return [json.loads(line)["text"] for line in (SCIFACT / "queries.jsonl").read_text().splitlines()[:n]]


def raw_model(name: str, docs: list[str]) -> tuple[list[list[int]], Callable[[list[list[int]]], None]]:
    """A plain onnxruntime loop over the model's files: ``docs`` tokenised as the model reads them (its
    document prefix, its truncation), and a function embedding a batch of them (padding, pooling, norm)."""
    import onnxruntime as ort
    from tokenizers import Tokenizer

    spec = find_model(name)
    files = locate_model(spec)
    tokenizer = Tokenizer.from_file(str(files.tokenizer))
    tokenizer.enable_truncation(max_length=spec.max_tokens)
    prefix = spec.document_prefix
    encoded = [e.ids for e in tokenizer.encode_batch([prefix + t for t in docs])]
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(str(files.model), options, providers=["CPUExecutionProvider"])

    def run(batch: list[list[int]]) -> None:
        longest = max(len(x) for x in batch)
        ids = np.zeros((len(batch), longest), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, tokens in enumerate(batch):
            ids[row, : len(tokens)] = tokens
            mask[row, : len(tokens)] = 1
        (hidden,) = session.run(
            ["last_hidden_state"], {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        )
        pooled = hidden[:, 0] if spec.pooling == "cls" else (hidden * mask[:, :, None]).sum(1) / mask.sum(1)[:, None]
        _ = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)

    return encoded, run


def raw_loop(name: str, docs: list[str]) -> dict[str, Any]:
    """The best docs/s of a plain onnxruntime loop over the model's files."""
    encoded, run = raw_model(name, docs)
    results = []
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
    # Sorted by length at every size; unsorted only at 8 (the embedder's old batches: unsorted batches of 16-32
    # long texts pad to 512 tokens, take minutes and gigabytes, and never win).
    for size, sort in ((1, True), (4, True), (8, False), (16, True), (32, True)):
        positions = order if sort else list(range(len(encoded)))
        batches = [[encoded[i] for i in positions[s : s + size]] for s in range(0, len(positions), size)]
        for calls in (1, 2):
            started = time.perf_counter()
            with ThreadPoolExecutor(calls) as pool:
                list(pool.map(run, batches))
            rate = len(encoded) / (time.perf_counter() - started)
            results.append({"batch": size, "sorted": sort, "parallel_calls": calls, "docs_per_s": round(rate, 1)})
    return max(results, key=lambda r: r["docs_per_s"]) | {"configurations": len(results)}


async def product(name: str, docs: list[str]) -> dict[str, Any]:
    embedder = LocalEmbedder(name, query_cache_size=0)
    started = time.perf_counter()
    await embedder.load()
    load_s = time.perf_counter() - started
    await embedder.embed_documents(docs[:8])  # warm-up
    started = time.perf_counter()
    for start in range(0, len(docs), 64):
        await embedder.embed_documents(docs[start : start + 64])
    rate = len(docs) / (time.perf_counter() - started)
    timings = []
    for text in queries(100):
        t0 = time.perf_counter()
        await embedder.embed_query(text)
        timings.append((time.perf_counter() - t0) * 1000)
    await embedder.aclose()
    timings.sort()
    return {
        "load_s": round(load_s, 2),
        "docs_per_s": round(rate, 1),
        "query_p50_ms": round(statistics.median(timings), 1),
        "query_p95_ms": round(timings[94], 1),
        "threads": embedder.threads,
    }


def one(name: str, n: int) -> dict[str, Any]:
    docs = texts(n)
    out: dict[str, Any] = {"model": name, "documents": n, "product": asyncio.run(product(name, docs))}
    out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)  # before the raw loop
    out["raw"] = raw_loop(name, docs)
    out["product_over_raw"] = round(out["product"]["docs_per_s"] / out["raw"]["docs_per_s"], 3)
    return out


def ingest(n: int) -> dict[str, Any]:
    from storage import Document, SearchClient, SearchSettings
    from storage.local_es import url_or_local

    records = [json.loads(line) for line in (SCIFACT / "corpus.jsonl").read_text().splitlines()[:n]]
    docs = [Document(id=r["_id"], title=r.get("title", ""), text=r["text"]) for r in records]

    async def go(url: str) -> dict[str, Any]:
        settings = SearchSettings(url=url, index="embed-speed-ingest", bulk_chunk_size=100)
        async with SearchClient.from_settings(settings, embedder=LocalEmbedder()) as client:
            await client.indices.delete()
            await client.ensure_index()
            # Warm up the JVM (its JIT compiles the indexing and HNSW code on the same two cores) and the model.
            await client.index_documents(docs[:200], refresh=True)
            await client.indices.delete()
            await client.ensure_index()
            report = await client.index_documents(docs, refresh=True)
            await client.indices.delete()
        return {
            "documents": len(report.indexed),
            "seconds": round(report.seconds, 1),
            "docs_per_s": round(len(report.indexed) / report.seconds, 1),
        }

    with url_or_local("embed-speed", heap="512m") as url:
        out = asyncio.run(go(url))
    out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--model", action="append")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--ingest", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.docs)))
        return
    if args.ingest:
        print(json.dumps(ingest(args.docs)))
        return
    results = []
    for name in args.model or list(LOCAL_MODELS):
        done = subprocess.run(
            [sys.executable, __file__, "--one", name, "--docs", str(args.docs)],
            capture_output=True,
            text=True,
            check=True,
        )
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    done = subprocess.run(
        [sys.executable, __file__, "--ingest", "--docs", str(args.docs)], capture_output=True, text=True, check=True
    )
    ingested = json.loads(done.stdout.strip().splitlines()[-1])
    raw_default = next((r["raw"]["docs_per_s"] for r in results if r["model"] == DEFAULT_LOCAL_MODEL), None)
    print(
        "| model | load s | query p50 / p95 ms | embed_documents docs/s | raw loop best docs/s (config) | ratio "
        "| peak RSS MB |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in results:
        p, raw = r["product"], r["raw"]
        config = f"batch {raw['batch']}, {'sorted' if raw['sorted'] else 'unsorted'}, {raw['parallel_calls']} calls"
        print(
            f"| {r['model']} | {p['load_s']} | {p['query_p50_ms']} / {p['query_p95_ms']} | {p['docs_per_s']} | "
            f"{raw['docs_per_s']} ({config}) | {r['product_over_raw']} | {r['peak_rss_mb']} |"
        )
    ratio = f" = {ingested['docs_per_s'] / raw_default:.2f}x the raw loop" if raw_default else ""
    print(
        f"\ningest through the product ({DEFAULT_LOCAL_MODEL}, {ingested['documents']} SciFact documents into a local "
        f"Elasticsearch): {ingested['docs_per_s']} docs/s{ratio}, peak RSS {ingested['peak_rss_mb']} MB"
    )


if __name__ == "__main__":
    main()
