"""nDCG@10 and Recall@100 of bm25 / knn / hybrid on a BEIR folder, with the default local model.
Prints a JSON result; not a test. Starts a local Elasticsearch unless ES_URL is set.

    .venv/bin/python bench/quality.py [--beir ../shared/data/beir/scifact]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from pathlib import Path

import ir_measures
from ir_measures import R, nDCG

from embeddings import LocalEmbedder
from storage import Document, SearchClient, SearchSettings
from storage.local_es import LocalElasticsearch


def load(folder: Path) -> tuple[list[Document], dict[str, str], dict[str, dict[str, int]]]:
    qrels: dict[str, dict[str, int]] = {}
    for line in (folder / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        qid, did, score = line.split("\t")
        qrels.setdefault(qid, {})[did] = int(score)
    docs = [
        Document(id=c["_id"], title=c.get("title") or "", text=c.get("text") or c.get("title") or "-")
        for c in map(json.loads, (folder / "corpus.jsonl").read_text().splitlines())
    ]
    queries = {
        q["_id"]: q["text"]
        for q in map(json.loads, (folder / "queries.jsonl").read_text().splitlines())
        if q["_id"] in qrels
    }
    return docs, queries, qrels


async def evaluate(url: str, folder: Path) -> dict[str, object]:
    docs, queries, qrels = load(folder)
    settings = SearchSettings(url=url, index=f"bench-{folder.name}", leg_timeout_s=60, window=100)
    out: dict[str, object] = {"dataset": folder.name, "documents": len(docs), "queries": len(queries)}
    async with SearchClient.from_settings(settings, embedder=LocalEmbedder()) as client:
        await client.delete_index()
        await client.ensure_index()
        report = await client.index_documents(docs, refresh=True)
        out["index_seconds"] = round(report.seconds, 1)
        out["failed"] = len(report.failed)
        for mode in ("bm25", "knn", "hybrid"):
            run: dict[str, dict[str, float]] = {}
            t0 = time.perf_counter()
            for qid, text in queries.items():
                res = await client.search(text, mode=mode, limit=100, highlight=False)  # type: ignore[arg-type]
                run[qid] = {h.id: h.score for h in res.hits}
            scores = ir_measures.calc_aggregate([nDCG @ 10, R @ 100], qrels, run)
            out[mode] = {
                "nDCG@10": round(scores[nDCG @ 10], 4),
                "Recall@100": round(scores[R @ 100], 4),
                "ms_per_query": round((time.perf_counter() - t0) / len(queries) * 1000, 1),
            }
        out["fusion"] = res.fusion
        await client.delete_index()
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--beir", type=Path, default=Path(__file__).parents[2] / "shared/data/beir/scifact")
    args = parser.parse_args()
    url = os.environ.get("ES_URL")
    node = None
    if not url:
        node = LocalElasticsearch(name=f"bench-{os.getpid()}", ephemeral=True, heap="1g")
        url = node.start()
    try:
        print(json.dumps(asyncio.run(evaluate(url, args.beir)), indent=2))
    finally:
        if node is not None:
            node.stop()


if __name__ == "__main__":
    main()
