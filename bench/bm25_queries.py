"""Which BM25 query? The same index (the library's mapping and analyzer), several query shapes, four sets.

Indexes each collection once with the library (vectors from the embedding cache), then runs every judged
query through each candidate BM25 body with the raw client (depth 100) and prints nDCG@10 / Recall@100 per
shape and set. Not a test; chooses the BM25 leg's query on evidence from all four collections.

    .venv/bin/python bench/bm25_queries.py [--beir DIR ...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from elasticsearch import AsyncElasticsearch

from embeddings import CachedEmbedder, LocalEmbedder
from storage import SearchClient, SearchSettings
from storage.evaluation import load_beir
from storage.local_es import url_or_local

sys.path.insert(0, str(Path(__file__).parent))
from quality import DEFAULT_SETS, DEPTH, ROOT, ndcg10


def _sqs(fields: list[str]) -> Any:
    return lambda q: {
        "simple_query_string": {
            "query": q,
            "fields": fields,
            "default_operator": "or",
            "flags": "PHRASE|WHITESPACE",
            "lenient": True,
        }
    }


def _mm(kind: str, fields: list[str], **extra: Any) -> Any:
    return lambda q: {"multi_match": {"query": q, "type": kind, "fields": fields, "lenient": True, **extra}}


SHAPES: dict[str, Any] = {
    "sqs title^2,text (current)": _sqs(["title^2", "text"]),
    "sqs title,text": _sqs(["title", "text"]),
    "best_fields title,text tb0.5 (BEIR)": _mm("best_fields", ["title", "text"], tie_breaker=0.5),
    "best_fields title^2,text tb0.5": _mm("best_fields", ["title^2", "text"], tie_breaker=0.5),
    "best_fields title,text tb0.3": _mm("best_fields", ["title", "text"], tie_breaker=0.3),
    "most_fields title,text": _mm("most_fields", ["title", "text"]),
    "cross_fields title,text": _mm("cross_fields", ["title", "text"]),
    "combined_fields title,text": lambda q: {"combined_fields": {"query": q, "fields": ["title", "text"]}},
    # best_fields is a dis_max of one query per field: the same with the product's simple_query_string
    # per field keeps its "exact phrase" syntax.
    "dis_max of sqs per field tb0.5": lambda q: {
        "dis_max": {"queries": [_sqs(["title"])(q), _sqs(["text"])(q)], "tie_breaker": 0.5}
    },
}


async def evaluate(url: str, folder: Path, cache_dir: Path) -> dict[str, Any]:
    data = load_beir(folder)
    settings = SearchSettings(url=url, index=f"bm25q-{folder.name.lower()}", leg_timeout_s=60, bulk_chunk_size=100)
    out: dict[str, Any] = {"dataset": data.name, "queries": len(data.queries)}
    async with SearchClient.from_settings(settings, embedder=CachedEmbedder(LocalEmbedder(), cache_dir)) as client:
        await client.indices.delete()
        await client.ensure_index()
        await client.index_documents(data.documents, refresh=True)
        es = AsyncElasticsearch(url, request_timeout=60)
        try:
            for name, shape in SHAPES.items():
                run = {}
                for qid, text in data.queries.items():
                    resp = await es.search(index=settings.index, query=shape(text), size=DEPTH, source=False)
                    run[qid] = [h["_id"] for h in resp["hits"]["hits"]]
                out[name] = ndcg10(data.qrels, run)
                print(f"{data.name:8} {name:40} {out[name]}", file=sys.stderr, flush=True)
        finally:
            await es.close()
            await client.indices.delete()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--beir", type=Path, action="append")
    args = parser.parse_args()
    results = []
    with url_or_local("bm25q", heap="1g") as url:
        for folder in args.beir or DEFAULT_SETS:
            results.append(asyncio.run(evaluate(url, folder, ROOT / ".cache" / "embeddings")))
    out = ROOT / "bench" / "results" / "bm25_queries.json"
    out.write_text(json.dumps(results, indent=1) + "\n")
    names = [r["dataset"] for r in results]
    print(f"| query | {' | '.join(names)} | mean |")
    print("|---" * (len(names) + 2) + "|")
    for shape in SHAPES:
        scores = [r[shape][0] for r in results]
        print(f"| {shape} | " + " | ".join(f"{s:.4f}" for s in scores) + f" | {sum(scores) / len(scores):.4f} |")


if __name__ == "__main__":
    main()
