"""Where a passages index's kNN search spends its time: the requests themselves, raw, interleaved.

On one collection's ``head`` and ``passages`` indices (built as ``bench/layouts.py`` builds them: cached
vectors, settled, force-merged), for each judged query (vector cached): the head-only ``knn`` section; the
heads' kNN query alone; the heads' and the passages' kNN queries under a ``dis_max`` with and without the
passages' ``inner_hits``; the passages' nested query alone. Then the fetch of the first ten hits plain and
with the shown hits' passages found among their own (a nested kNN query filtered to their ids), and whether
those passages are the ones the leg's inner hits named.

    .venv/bin/python bench/passage_requests.py [--set scifact] [--rounds 3]

Starts a local Elasticsearch (1 GiB heap) unless ES_URL is set. Prints p50 per request.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from elasticsearch import AsyncElasticsearch
from layouts import build_in, embedder, folder, index_name

from storage.evaluation import load_beir
from storage.local_es import url_or_local

K = 100
SHOWN = 3
OFFSETS = ["passages.start", "passages.end"]
EXCLUDES = ["embedding", "passages.vector", "passages.text"]


def _knn(field: str, vector: list[float], **more: Any) -> dict[str, Any]:
    return {"knn": {"field": field, "query_vector": vector, "num_candidates": K, **more}}


def _nested(vector: list[float], *, inner: bool) -> dict[str, Any]:
    nested: dict[str, Any] = {"path": "passages", "score_mode": "max", "query": _knn("passages.vector", vector)}
    if inner:
        nested["inner_hits"] = {"size": SHOWN, "_source": False, "docvalue_fields": OFFSETS}
    return {"nested": nested}


def variants(head: str, passages: str, v: list[float]) -> dict[str, tuple[str, dict[str, Any]]]:
    section = {"knn": {"field": "embedding", "query_vector": v, "k": K, "num_candidates": K}}
    return {
        "head: knn section": (head, section),
        "passages: heads' knn query": (passages, {"query": _knn("embedding", v)}),
        "passages: dis_max, no inner hits": (
            passages,
            {"query": {"dis_max": {"queries": [_knn("embedding", v), _nested(v, inner=False)]}}},
        ),
        "passages: dis_max + inner hits": (
            passages,
            {"query": {"dis_max": {"queries": [_knn("embedding", v), _nested(v, inner=True)]}}},
        ),
        "passages: nested alone + inner hits": (passages, {"query": _nested(v, inner=True)}),
    }


def _inner(hit: dict[str, Any]) -> list[int]:
    inner = hit.get("inner_hits", {}).get("passages", {}).get("hits", {}).get("hits", [])
    return [p["fields"]["passages.start"][0] for p in inner]


async def measure(url: str, name: str, rounds: int) -> None:
    data = load_beir(folder(name))
    cached = embedder()
    queries = [data.queries[q] for q in sorted(data.qrels) if q in data.queries]
    vectors = [list(await cached.embed_query(q)) for q in queries]
    head, passages = index_name(name, "head"), index_name(name, "passages")
    es = AsyncElasticsearch(url, request_timeout=60)
    spent: dict[str, list[float]] = {}
    differ = 0
    try:
        for r in range(rounds):
            for n, v in enumerate(vectors):
                todo = list(variants(head, passages, v).items())
                shift = (n + r) % len(todo)
                for label, (index, body) in todo[shift:] + todo[:shift]:
                    t0 = time.perf_counter()
                    await es.search(index=index, size=K, source=False, **body)
                    spent.setdefault(label, []).append(time.perf_counter() - t0)
                leg = (
                    await es.search(
                        index=passages,
                        size=K,
                        source=False,
                        **variants(head, passages, v)["passages: dis_max + inner hits"][1],
                    )
                ).body["hits"]["hits"]
                ids = [h["_id"] for h in leg[:10]]
                page: dict[str, Any] = {"bool": {"filter": [{"ids": {"values": ids}}]}}
                found = _knn(
                    "passages.vector", v, filter=[{"ids": {"values": ids}}, {"exists": {"field": "embedding"}}]
                )
                found["knn"]["num_candidates"] = len(ids)
                nested = {"path": "passages", "score_mode": "max", "query": found}
                nested["inner_hits"] = {"size": SHOWN, "_source": False, "docvalue_fields": OFFSETS}
                with_passages = {"bool": {**page["bool"], "should": [{"nested": nested}]}}
                for label, query in (("fetch of 10", page), ("fetch of 10 + their passages", with_passages)):
                    t0 = time.perf_counter()
                    resp = await es.search(index=passages, size=10, source={"excludes": EXCLUDES}, query=query)
                    spent.setdefault(label, []).append(time.perf_counter() - t0)
                if r == 0:
                    fetched = {h["_id"]: _inner(h) for h in resp.body["hits"]["hits"]}
                    differ += sum(1 for h in leg[:10] if _inner(h) and _inner(h) != fetched.get(h["_id"]))
    finally:
        found = (await es.indices.get(index=f"{head}-*,{passages}-*")).body  # (deletes need concrete names)
        await es.indices.delete(index=",".join(found))
        await es.close()
    base = statistics.median(spent["head: knn section"])
    for label, times in spent.items():
        p50 = statistics.median(times)
        print(f"{label:40s} p50 {p50 * 1000:6.2f} ms  {p50 / base:.2f}x the head-only section")
    print(f"hits whose passages differ between the leg's inner hits and the fetch's: {differ}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--set", default="scifact")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with url_or_local("bench-passage-requests", heap="1g") as url:
        for layout in ("head", "passages"):
            build_in(None, url, args.set, layout, 0)
        asyncio.run(measure(url, args.set, args.rounds))


if __name__ == "__main__":
    main()
