"""What a document costs at scale, and how search time grows: one node, ``--sizes`` documents (default 100,000
and 1,000,000), each vector layout the server offers (``int8_hnsw``; ``int4_hnsw`` from 8.15; ``bbq_hnsw``
with ``rescore_vector`` on 8.19 and from 9.1).

**The documents.** Real texts: every sentence of the given collections' documents (SciFact, NPL, LISA, CACM)
and every paragraph of the Linux manual's pages (bench/man_pages.py), deduplicated, shuffled (seeded), the
first ``--base`` (default 50,000) embedded with the default local model (cached in .cache/embeddings). The
collection is extended to a size by copies of them: copy ``c`` of text ``t`` has the vector of ``t`` plus
Gaussian noise of its own (σ ``--noise`` per dimension, seeded; 0.02 moves a 384-dim unit vector by about
0.39, a cosine of ~0.93 to its original) renormalised, and the text of ``t`` with ``[copy c]`` appended, so
BM25 and kNN both see a million distinct documents with real text statistics. The index is the product's
(``storage._dsl.mapping.index_body``, vectors out of ``_source``), written with raw bulk requests (the cost
measured is the server's), loaded as a bulk load does (refresh off but every 5,000 documents), then
force-merged once the retention lease has moved past the writes.

**The figures**, per size and layout: index time (bulk writes, then merge); bytes per document on disk; the
vectors' bytes on disk (``_disk_usage``: what the HNSW search keeps in memory is the quantized vectors and the
graph, ``knn_vectors``); kNN and hybrid p50 / p99 through the product at 1 and 8 callers (300 real queries of
the given collections, vectors precomputed); recall@10 of the kNN leg against exact search (NumPy over every
vector). Quality through the product on SciFact is ``bench/layouts.py``'s.

    .venv/bin/python bench/scale.py --sizes 100000 1000000

Starts a local Elasticsearch (``--heap``, default 1 GiB) unless ES_URL is set; ``--nodes 3``: a local cluster
of three (each node that heap; one primary shard per node, each with a replica). Prints a table; JSON in
bench/results/scale.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from elasticsearch import AsyncElasticsearch
from elasticsearch.helpers import async_streaming_bulk
from layouts import embedder
from long_documents import SHARED
from man_pages import build as man_pages
from output import save
from raw_client import Precomputed

from storage import SearchClient, SearchSettings
from storage._dsl.mapping import index_body  # (the product's mapping, written with raw requests)
from storage._transport.compat import server_version
from storage.evaluation import load_beir
from storage.local_es import LocalCluster, url_or_local

ROOT = Path(__file__).resolve().parents[1]
GIVEN = [SHARED / "beir" / "scifact", SHARED / "ir" / "npl", SHARED / "ir" / "lisa", SHARED / "ir" / "cacm"]
SEED = 5


def base_texts(n: int) -> list[str]:
    """``n`` real texts: sentences of the given collections' documents, paragraphs of the manual's pages."""
    seen: set[str] = set()
    texts: list[str] = []
    for folder in [*GIVEN, man_pages()]:
        for doc in load_beir(folder).documents:
            parts = doc.text.split("\n\n") if folder.name == "manpages" else re.split(r"(?<=[.!?])\s+", doc.text)
            for part in parts:
                part = " ".join(part.split())
                if len(part.split()) >= 6 and part not in seen:
                    seen.add(part)
                    texts.append(part)
    random.Random(SEED).shuffle(texts)
    if len(texts) < n:
        raise SystemExit(f"only {len(texts)} distinct texts for --base {n}")
    return texts[:n]


def queries() -> list[str]:
    out: list[str] = []
    for folder in GIVEN:
        data = load_beir(folder)
        asked = [data.queries[q] for q in sorted(data.qrels) if q in data.queries]
        out += [q for q in asked if len(q.split()) <= 40][:75]  # (a longer one is cut before it is embedded)
    return out


def extended(vectors: np.ndarray, size: int, noise: float) -> np.ndarray:
    """``size`` unit vectors: the base ones, then copies of them, each with its own noise (seeded)."""
    out = np.resize(vectors, (size, vectors.shape[1])).astype(np.float32)
    rng = np.random.default_rng(SEED)
    base = vectors.shape[0]
    for start in range(base, size, 100_000):  # (in chunks: a million rows of noise at once is 1.5 GB)
        stop = min(start + 100_000, size)
        out[start:stop] += noise * rng.standard_normal((stop - start, vectors.shape[1]), dtype=np.float32)
        out[start:stop] /= np.linalg.norm(out[start:stop], axis=1, keepdims=True)
    return out


def layouts_for(server: tuple[int, int]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {"int8_hnsw": {"type": "int8_hnsw"}}
    if server >= (8, 15):
        out["int4_hnsw"] = {"type": "int4_hnsw"}
    if (8, 19) <= server < (9, 0) or server >= (9, 1):  # (the servers whose mapping takes rescore_vector)
        out["bbq_hnsw"] = {"type": "bbq_hnsw", "rescore_vector": {"oversample": 3.0}}
    return out


async def build(
    es: AsyncElasticsearch,
    index: str,
    options: dict[str, Any],
    all_vectors: np.ndarray,
    texts: list[str],
    model: str,
    shards: int = 1,
) -> tuple[float, float]:
    """Write every document with raw bulk requests (refresh off), then merge once the lease moved on."""
    dims = all_vectors.shape[1]
    body = index_body(
        vector_index=options["type"],
        dimensions=dims,
        normalized=True,
        model_id=model,
        analyzer="english_folded",
        shards=shards,
    )
    body["mappings"]["properties"]["embedding"]["index_options"] |= {k: v for k, v in options.items() if k != "type"}
    body["settings"]["index"]["refresh_interval"] = "-1"
    await es.options(ignore_status=404).indices.delete(index=index)
    await es.indices.create(index=index, **body)
    t0 = time.perf_counter()
    actions = (
        {"_index": index, "_id": str(i), "_source": {"text": t, "embedding": v}}
        for i, (t, v) in enumerate(_stream(all_vectors, texts))
    )
    written = 0
    async for _ok, _item in async_streaming_bulk(es, actions, chunk_size=1000, max_retries=3):
        written += 1
        if written % 5000 == 0:  # (as a bulk load does: a segment per 5,000 documents)
            await es.indices.refresh(index=index)
    writes_s = time.perf_counter() - t0
    await es.indices.put_settings(index=index, settings={"index": {"refresh_interval": "1s"}})
    await es.indices.refresh(index=index)
    await es.indices.flush(index=index)
    await _lease_moved(es, index)
    t1 = time.perf_counter()
    await es.options(request_timeout=7200).indices.forcemerge(index=index, max_num_segments=1)
    merge_s = time.perf_counter() - t1
    await es.indices.refresh(index=index)
    return writes_s, merge_s


def _stream(all_vectors: np.ndarray, texts: list[str]) -> Iterator[tuple[str, list[float]]]:
    for i in range(all_vectors.shape[0]):
        copy, t = divmod(i, len(texts))
        yield (texts[t] if copy == 0 else f"{texts[t]} [copy {copy}]"), all_vectors[i].tolist()


async def _lease_moved(es: AsyncElasticsearch, index: str) -> None:
    for _ in range(120):
        shards = (await es.indices.stats(index=index, level="shards", metric="docs")).body["indices"][index]["shards"]
        copies = [c for s in shards.values() for c in s]
        leases = [(lease, c) for c in copies for lease in c["retention_leases"]["leases"]]
        if all(lease["retaining_seq_no"] > c["seq_no"]["max_seq_no"] for lease, c in leases):
            return
        await asyncio.sleep(1)


async def latencies(client: SearchClient, qs: list[str], mode: str, callers: int) -> tuple[float, float]:
    times: list[float] = []
    work = list(qs) * 2

    async def caller(offset: int) -> None:
        for q in work[offset::callers]:
            t0 = time.perf_counter()
            await client.search(q, mode=mode, limit=10, highlight=False)
            times.append((time.perf_counter() - t0) * 1000)

    await asyncio.gather(*(caller(i) for i in range(callers)))
    times.sort()
    return round(statistics.median(times), 2), round(times[int(0.99 * (len(times) - 1))], 2)


async def recall(client: SearchClient, qs: list[str], qv: dict[str, list[float]], all_vectors: np.ndarray) -> float:
    found = []
    for q in qs:
        exact = np.argsort(-(all_vectors @ np.asarray(qv[q], dtype=np.float32)))[:10]
        hits = (await client.leg_rankings(q, mode="knn", window=10))["knn"]
        found.append(len({int(h.id) for h in hits} & {int(i) for i in exact}) / 10)
    return round(statistics.fmean(found), 4)


async def measure(
    url: str, sizes: list[int], base: int, noise: float, only: list[str] | None = None, nodes: int = 1
) -> list[dict[str, Any]]:
    texts = base_texts(base)
    cached = embedder()
    vectors = np.asarray(await cached.embed_documents(texts), dtype=np.float32)
    qs = queries()
    qv = {q: list(await cached.embed_query(q)) for q in qs}
    es = AsyncElasticsearch(url, request_timeout=600)
    server = server_version((await es.info()).body) or (8, 0)
    rows = []
    try:
        for size in sizes:
            all_vectors = extended(vectors, size, noise)
            for name, options in layouts_for(server).items():
                if only and name not in only:
                    continue
                index = f"bench-scale-{size}-{name}"
                writes_s, merge_s = await build(es, index, options, all_vectors, texts, cached.model_id, nodes)
                stats = (await es.indices.stats(index=index, metric="store,docs")).body["_all"]["primaries"]
                usage = (await es.indices.disk_usage(index=index, run_expensive_tasks=True)).body[index]
                vec = usage["fields"].get("embedding", {})
                settings = SearchSettings(url=url, index=index, passages=False, leg_timeout_s=60, window=100)
                looked_up = Precomputed(qv, cached.model_id, cached.dimensions)
                client = SearchClient(es, looked_up, settings, owns_clients=False)
                row: dict[str, Any] = {
                    "size": size,
                    "nodes": nodes,
                    "layout": name,
                    "writes_s": round(writes_s, 1),
                    "merge_s": round(merge_s, 1),
                    "docs": stats["docs"]["count"],
                    "bytes_per_doc": round(stats["store"]["size_in_bytes"] / size, 1),
                    "vector_bytes_per_doc": round(vec.get("knn_vectors_in_bytes", 0) / size, 1),
                    "recall_at_10": await recall(client, qs[:100], qv, all_vectors),
                }
                for mode in ("knn", "hybrid"):
                    await latencies(client, qs[:50], mode, 1)  # (warm)
                    for callers in (1, 8):
                        row[f"{mode}_c{callers}_p50_p99_ms"] = await latencies(client, qs, mode, callers)
                rows.append(row)
                print(json.dumps(row), flush=True)
                await es.indices.delete(index=index)
            del all_vectors
    finally:
        await es.close()
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| docs | layout | writes s | merge s | bytes/doc (vectors) | recall@10 | kNN p50/p99 c1 | c8 "
        "| hybrid p50/p99 c1 | c8 |",
        "|---:|---|---:|---:|---|---:|---|---|---|---|",
    ]
    for r in rows:
        knn1, knn8 = r["knn_c1_p50_p99_ms"], r["knn_c8_p50_p99_ms"]
        h1, h8 = r["hybrid_c1_p50_p99_ms"], r["hybrid_c8_p50_p99_ms"]
        nodes = f" ({r['nodes']} nodes)" if r.get("nodes", 1) > 1 else ""
        lines.append(
            f"| {r['size']:,}{nodes} | {r['layout']} | {r['writes_s']} | {r['merge_s']} | {r['bytes_per_doc']} "
            f"({r['vector_bytes_per_doc']}) | {r['recall_at_10']} | {knn1[0]} / {knn1[1]} | {knn8[0]} / {knn8[1]} "
            f"| {h1[0]} / {h1[1]} | {h8[0]} / {h8[1]} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[100_000, 1_000_000])
    parser.add_argument("--base", type=int, default=50_000)
    parser.add_argument("--noise", type=float, default=0.02)
    parser.add_argument("--heap", default="1g")
    parser.add_argument("--layouts", nargs="+", help="only these (int8_hnsw, int4_hnsw, bbq_hnsw)")
    parser.add_argument("--results", default="scale.json", help="file name in bench/results")
    parser.add_argument(
        "--nodes", type=int, default=1, help="a local cluster of this many nodes (one primary shard each, a replica)"
    )
    args = parser.parse_args()
    if args.nodes > 1:
        with LocalCluster(size=args.nodes, name="bench-scale", heap=args.heap) as cluster:
            cluster.wait_green()
            rows = asyncio.run(measure(cluster.urls[0], args.sizes, args.base, args.noise, args.layouts, args.nodes))
    else:
        with url_or_local("bench-scale", heap=args.heap) as url:
            rows = asyncio.run(measure(url, args.sizes, args.base, args.noise, args.layouts))
    save(rows, args.results, table)


if __name__ == "__main__":
    main()
