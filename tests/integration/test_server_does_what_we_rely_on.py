"""The real server does what the rest of the project relies on (raw client, no library code)."""

from __future__ import annotations

import pytest
from elasticsearch import AsyncElasticsearch

pytestmark = pytest.mark.smoke


async def _create(es: AsyncElasticsearch, index: str) -> None:
    await es.indices.create(
        index=index,
        mappings={
            "properties": {
                "title": {"type": "text"},
                "vec": {"type": "dense_vector", "dims": 3, "index": True, "similarity": "cosine"},
            }
        },
    )
    docs = {
        "a": ("red apples and green pears", [1.0, 0.0, 0.0]),
        "b": ("quarterly revenue guidance", [0.0, 1.0, 0.0]),
        "c": ("the weather in spring", [0.0, 0.0, 1.0]),
    }
    for doc_id, (title, vec) in docs.items():
        await es.index(index=index, id=doc_id, document={"title": title, "vec": vec})
    await es.indices.refresh(index=index)


async def test_documents_indexed_with_explicit_ids_read_back(es: AsyncElasticsearch, index_name: str) -> None:
    await _create(es, index_name)
    got = await es.get(index=index_name, id="b")
    assert got["_id"] == "b"
    assert got["_source"]["title"] == "quarterly revenue guidance"
    assert (await es.count(index=index_name))["count"] == 3


async def test_bm25_match_query_finds_the_document(es: AsyncElasticsearch, index_name: str) -> None:
    await _create(es, index_name)
    resp = await es.search(index=index_name, query={"match": {"title": "revenue"}})
    assert [h["_id"] for h in resp["hits"]["hits"]] == ["b"]


async def test_dense_vector_knn_returns_the_nearest_document(es: AsyncElasticsearch, index_name: str) -> None:
    await _create(es, index_name)
    resp = await es.search(
        index=index_name, knn={"field": "vec", "query_vector": [0.1, 0.05, 0.9], "k": 1, "num_candidates": 10}
    )
    assert [h["_id"] for h in resp["hits"]["hits"]] == ["c"]


async def test_license_reports_its_type(es: AsyncElasticsearch) -> None:
    resp = await es.options(ignore_status=[404, 405, 500]).license.get()
    license_type = resp.body.get("license", {}).get("type") if resp.meta.status == 200 else None
    print(f"GET _license -> HTTP {resp.meta.status}, type={license_type}")
    # The integ-test distribution and the default Docker image both start on the free Basic license.
    assert license_type == "basic"


async def test_server_refuses_its_own_rrf_retriever(es: AsyncElasticsearch, index_name: str) -> None:
    """Why fusion happens in the client: Elasticsearch's rrf retriever is not available here.

    On the full distribution with a Basic license the refusal is HTTP 403 (license); the minimal integ-test
    distribution does not even ship the module that parses it: HTTP 400 "unknown retriever [rrf]".
    """
    await _create(es, index_name)
    resp = await es.options(ignore_status=[400, 403]).search(
        index=index_name,
        retriever={
            "rrf": {
                "retrievers": [
                    {"standard": {"query": {"match": {"title": "revenue"}}}},
                    {"knn": {"field": "vec", "query_vector": [0.0, 1.0, 0.0], "k": 3, "num_candidates": 10}},
                ]
            }
        },
    )
    error = resp.body.get("error", {})
    reason = error.get("reason") if isinstance(error, dict) else error
    print(f"rrf retriever -> HTTP {resp.meta.status}: {error.get('type') if isinstance(error, dict) else ''}: {reason}")
    assert resp.meta.status in (400, 403)
    if resp.meta.status == 403:
        assert "license" in str(reason).lower()
    else:
        assert "rrf" in str(reason)
