"""The references the benchmarks hold our client to: the same hybrid search hand-written with raw
elasticsearch-py (vectors precomputed, RRF inline, no resilience, no logging, no models).

- :func:`one_phase` is what a user would write first: both legs return their documents (and the BM25 leg
  its highlights), fused, the first ``limit`` kept.
- :func:`two_phase` sends exactly our requests: ids-only legs, then one fetch of the page's documents (and
  highlights) — the same bodies as :class:`storage.SearchClient`, written out here by hand (as a user of
  elasticsearch-py would), so the difference is the client alone. (In the order a user writes them, BM25
  first; ours starts the kNN leg first, the longer path.)
- :func:`typed_response` adds one thing to :func:`two_phase`'s result: the :class:`storage.SearchResponse`
  our client returns, validated once (no provenance, resilience, logging or tracing) — the least any client
  that returns a typed response pays, for the overhead table.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from elasticsearch import AsyncElasticsearch

from embeddings import Vector
from storage import SearchResponse

_SOURCE = {"excludes": ["embedding"]}
_HIGHLIGHT = {"fields": {"title": {"number_of_fragments": 0}, "text": {"fragment_size": 160, "number_of_fragments": 2}}}


def keywords(text: str) -> dict[str, Any]:
    """BEIR's Elasticsearch BM25: the better of title and text, plus half the other."""
    per_field = [
        {
            "simple_query_string": {
                "query": text,
                "fields": [field],
                "default_operator": "or",
                "flags": "PHRASE|WHITESPACE",
                "lenient": True,
            }
        }
        for field in ("title", "text")
    ]
    return {"dis_max": {"queries": per_field, "tie_breaker": 0.5}}


def bm25_request(text: str, *, size: int) -> dict[str, Any]:
    """The BM25 leg: ids and scores only."""
    query = {"bool": {"must": [keywords(text)], "filter": []}}
    return {"query": query, "size": size, "source": False, "track_total_hits": False}


def knn_request(vector: Sequence[float], *, k: int, num_candidates: int) -> dict[str, Any]:
    """The kNN leg: ids and scores only."""
    knn = {"field": "embedding", "query_vector": list(vector), "k": k, "num_candidates": max(num_candidates, k)}
    return {"knn": knn, "size": k, "source": False, "track_total_hits": False}


def fetch_request(text: str, ids: Sequence[str], *, highlight: bool) -> dict[str, Any]:
    """The page's documents by id (and their highlights)."""
    query: dict[str, Any] = {"bool": {"filter": [{"ids": {"values": list(ids)}}]}}
    body: dict[str, Any] = {"query": query, "size": len(ids), "source": _SOURCE, "track_total_hits": False}
    if highlight:
        query["bool"]["should"] = [keywords(text)]
        spec = {"fields": {"title": {"number_of_fragments": 0}, "text": dict(_HIGHLIGHT["fields"]["text"])}}
        spec["fields"]["text"]["no_match_size"] = 160
        body["highlight"] = spec
    return body


def inline_rrf(lists: list[list[str]], k: int) -> list[str]:
    scores: dict[str, float] = {}
    for ids in lists:
        for rank, doc_id in enumerate(ids, start=1):
            scores[doc_id] = scores.get(doc_id, 0.0) + 1.0 / (k + rank)
    return sorted(scores, key=lambda d: -scores[d])


async def one_phase(
    es: AsyncElasticsearch,
    index: str,
    text: str,
    vector: Sequence[float],
    *,
    window: int,
    candidates: int,
    k: int,
    limit: int = 10,
    highlight: bool = False,
) -> list[dict[str, Any]]:
    bm25 = {**bm25_request(text, size=window), "source": _SOURCE}
    if highlight:
        bm25["highlight"] = _HIGHLIGHT
    knn = {**knn_request(vector, k=window, num_candidates=candidates), "source": _SOURCE}
    r1, r2 = await asyncio.gather(es.search(index=index, **bm25), es.search(index=index, **knn))
    hits = {h["_id"]: h for r in (r2, r1) for h in r["hits"]["hits"]}
    order = inline_rrf([[h["_id"] for h in r["hits"]["hits"]] for r in (r1, r2)], k)[:limit]
    return [hits[doc_id] for doc_id in order]


async def two_phase(
    es: AsyncElasticsearch,
    index: str,
    text: str,
    vector: Sequence[float] | Callable[[str], Awaitable[Sequence[float]]],
    *,
    window: int,
    candidates: int,
    k: int,
    limit: int = 10,
    highlight: bool = False,
    legs: tuple[str, ...] = ("bm25", "knn"),
    timings: dict[str, float] | None = None,
    server_timeout: str | None = None,
) -> list[dict[str, Any]]:
    """``vector`` may be an embedding function: then the BM25 request is on the wire while it runs.
    ``timings`` (if given) receives each leg's and the fetch's wall time in ms, measured as our client
    measures its own (``LegReport.latency_ms``, ``fetch_ms``), for the overhead reference. ``server_timeout``: the
    legs' server-side ``timeout`` (ours sends one, so Elasticsearch stops work the client has given up on)."""
    clock = time.perf_counter
    server = {"timeout": server_timeout} if server_timeout is not None else {}

    async def bm25() -> list[str]:
        t0 = clock()
        resp = await es.search(index=index, **bm25_request(text, size=window), **server)
        ids = [h["_id"] for h in resp["hits"]["hits"]]
        if timings is not None:
            timings["bm25"] = (clock() - t0) * 1000
        return ids

    async def knn() -> list[str]:
        t0 = clock()
        v = vector if isinstance(vector, Sequence) else await vector(text)
        resp = await es.search(index=index, **knn_request(v, k=window, num_candidates=candidates), **server)
        ids = [h["_id"] for h in resp["hits"]["hits"]]
        if timings is not None:
            timings["knn"] = (clock() - t0) * 1000
        return ids

    runs = {"bm25": bm25, "knn": knn}
    lists = await asyncio.gather(*(runs[leg]() for leg in legs))
    order = inline_rrf(list(lists), k)[:limit]
    t0 = clock()
    fetched = await es.search(index=index, **fetch_request(text, order, highlight=highlight))
    if timings is not None:
        timings["fetch"] = (clock() - t0) * 1000
    by_id = {h["_id"]: h for h in fetched["hits"]["hits"]}
    return [by_id[doc_id] for doc_id in order if doc_id in by_id]


def typed_response(text: str, hits: list[dict[str, Any]], *, window: int, k: int) -> SearchResponse:
    """:func:`two_phase`'s page as our response model, validated once, as our client validates its own: the
    same fields for each hit (the RRF score of its position stands in for its fused score; no provenance)."""
    return SearchResponse.model_validate(
        {
            "query": text,
            "mode": "hybrid",
            "hits": [
                {
                    "id": h["_id"],
                    "score": 1.0 / (k + position),
                    "normalized_score": (k + 1) / (k + position),
                    "fused_score": 1.0 / (k + position),
                    "rerank_score": None,
                    "ranks": {},
                    "leg_scores": {},
                    "source": h.get("_source") or {},
                    "highlights": {},
                    "highlight_source": None,
                    "position": None,
                }
                for position, h in enumerate(hits, start=1)
            ],
            "total_fused": len(hits),
            "offset": 0,
            "limit": len(hits),
            "legs": {leg: {"leg": leg, "ok": True} for leg in ("bm25", "knn")},
            "overlap": 0,
            "fusion": {"method": "rrf", "k": k, "window": window},
        }
    )


async def sequential(
    es: AsyncElasticsearch,
    index: str,
    text: str,
    vector: Sequence[float] | Callable[[str], Awaitable[Sequence[float]]],
    *,
    window: int,
    candidates: int,
    k: int,
) -> None:
    """The "bm25 then knn" reference of the latency table, hand-written: a BM25-only search, then a
    kNN-only search (the query embedded), each with its fetch."""
    for legs in (("bm25",), ("knn",)):
        await two_phase(es, index, text, vector, window=window, candidates=candidates, k=k, legs=legs)


def query_key(text: str) -> str:
    """A query as the client embeds it, for a lookup (the client collapses whitespace and strips it)."""
    return " ".join(text.split())


class Precomputed:
    """An embedder that looks query vectors up (what the raw references are given): in-memory, no model.
    A query is found as given or as the client embeds it (:func:`query_key`)."""

    def __init__(self, vectors: dict[str, Vector], model_id: str, dimensions: int) -> None:
        self._vectors = {query_key(t): v for t, v in vectors.items()} | vectors
        self.model_id, self.dimensions, self.normalized = model_id, dimensions, True

    async def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        return [await self.embed_query(t) for t in texts]

    async def embed_query(self, text: str) -> Vector:
        found = self._vectors.get(text)  # (the cleaned text: one dict lookup, as before the keys were cleaned)
        return found if found is not None else self._vectors[query_key(text)]

    async def probe(self) -> None:
        return None

    async def aclose(self) -> None:
        return None
