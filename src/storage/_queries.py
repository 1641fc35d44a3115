"""Pure request builders for the two legs. Both receive the same filter clauses."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["BM25_FIELDS", "bm25_request", "knn_request"]

#: A title match counts twice a body match.
BM25_FIELDS: tuple[str, ...] = ("title^2", "text")
_SOURCE = {"excludes": ["embedding"]}


def bm25_request(
    text: str,
    *,
    filters: Sequence[dict[str, Any]],
    size: int,
    fields: Sequence[str] = BM25_FIELDS,
    highlight: bool = True,
) -> dict[str, Any]:
    """Keyword arguments for ``AsyncElasticsearch.search``: BM25 over ``fields`` inside ``bool.filter``.

    ``simple_query_string`` with only PHRASE and WHITESPACE: ``"exact phrase"`` works, every other
    character is literal, and no user text can cause a parse error.
    """
    query: dict[str, Any] = {
        "bool": {
            "must": [
                {
                    "simple_query_string": {
                        "query": text,
                        "fields": list(fields),
                        "default_operator": "or",
                        "flags": "PHRASE|WHITESPACE",
                        "lenient": True,
                    }
                }
            ],
            "filter": list(filters),
        }
    }
    body: dict[str, Any] = {"query": query, "size": size, "source": _SOURCE, "track_total_hits": False}
    if highlight:
        body["highlight"] = {
            "fields": {
                "title": {"number_of_fragments": 0},
                "text": {"fragment_size": 160, "number_of_fragments": 2},
            },
        }
    return body


def knn_request(
    vector: Sequence[float],
    *,
    filters: Sequence[dict[str, Any]],
    k: int,
    num_candidates: int,
    similarity: float | None = None,
) -> dict[str, Any]:
    """Keyword arguments for ``AsyncElasticsearch.search``: approximate kNN, filters applied *during* the
    HNSW search (pre-filtering), so it returns ``k`` matching documents when that many exist."""
    knn: dict[str, Any] = {
        "field": "embedding",
        "query_vector": list(vector),
        "k": k,
        "num_candidates": max(num_candidates, k),
    }
    if filters:
        knn["filter"] = list(filters)
    if similarity is not None:
        knn["similarity"] = similarity
    return {"knn": knn, "size": k, "source": _SOURCE, "track_total_hits": False}
