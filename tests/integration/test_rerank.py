"""The rerank stage end to end: the real Elasticsearch, a real rerank server on 127.0.0.1 (Cohere / TEI JSON,
scoring by BM25 over the candidates), its fallbacks; and the per-request state of the pipeline."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator

import pytest

from embeddings import HashingEmbedder, HttpReranker
from storage import ConfigurationError, DependencyUnavailable, Document, InvalidQuery, SearchClient, SearchSettings
from storage._observability.log import query_hash
from storage._search.rerank import rerank_text
from storage.agent import SearchTool

from .._rerank_server import RerankServer, bm25_scores
from .._scripted import _free_port

DOCS = [
    Document(id=f"n{i}", title=f"note {i}", text=f"apple revenue report {i} " + "filler words " * (i % 5))
    for i in range(30)
] + [
    Document(id="guidance", title="Apple guidance", text="Apple cut its revenue guidance for the quarter."),
    Document(id="weather", title="Weather", text="Rain and mild temperatures in April."),
]
QUERY = "apple revenue guidance quarter"


@pytest.fixture
async def loaded(client: SearchClient) -> SearchClient:
    await client.ensure_index()
    assert (await client.index_documents(DOCS, refresh=True)).ok
    return client


@pytest.fixture
async def reranking(
    loaded: SearchClient, settings: SearchSettings, rerank_server: RerankServer
) -> AsyncIterator[SearchClient]:
    reranker = HttpReranker(rerank_server.url, api="cohere-v2", model="bm25-test")
    s = settings.model_copy(update={"rerank_timeout_s": 1.0})
    async with SearchClient(
        loaded.elasticsearch, HashingEmbedder(dimensions=64), s, owns_clients=False, reranker=reranker
    ) as c:
        yield c
    await reranker.aclose()


@pytest.mark.smoke
async def test_rerank_orders_the_page_by_the_rerankers_score_and_keeps_fused_provenance(
    reranking: SearchClient, rerank_server: RerankServer
) -> None:
    fused = await reranking.search(QUERY, limit=50)
    res = await reranking.search(QUERY, rerank=True, limit=5)
    assert res.ordered_by == "rerank"
    assert res.rerank is not None
    assert res.rerank.ok
    assert res.rerank.candidates == min(50, fused.total_fused)
    assert not res.degraded
    (request,) = rerank_server.requests
    texts = request["body"]["documents"]
    assert texts == [rerank_text(h.source) for h in fused.hits][: len(texts)]  # the fused top, in fused order
    expected = dict(zip([h.id for h in fused.hits], bm25_scores(QUERY, texts), strict=False))
    assert len(res.hits) == 5
    assert [h.rerank_score for h in res.hits] == sorted((h.rerank_score or 0.0 for h in res.hits), reverse=True)
    by_fused = {h.id: h for h in fused.hits}
    for hit in res.hits:
        assert hit.rerank_score == pytest.approx(expected[hit.id])
        assert hit.score == hit.rerank_score
        assert hit.fused_score == pytest.approx(by_fused[hit.id].score)
        assert hit.ranks == by_fused[hit.id].ranks
        assert hit.highlights  # the enrich stage still runs on the reranked page
    assert res.hits[0].id == "guidance"  # the only document with every query term
    assert fused.ordered_by == "fusion"
    assert fused.rerank is None
    assert all(h.rerank_score is None and h.fused_score == h.score for h in fused.hits)


async def test_a_reranker_that_is_down_returns_the_fused_order_degraded_with_one_warning(
    loaded: SearchClient, settings: SearchSettings, caplog: pytest.LogCaptureFixture
) -> None:
    dead = HttpReranker(f"http://127.0.0.1:{_free_port()}", api="tei")
    async with SearchClient(
        loaded.elasticsearch, HashingEmbedder(dimensions=64), settings, owns_clients=False, reranker=dead
    ) as c:
        caplog.set_level(logging.INFO, logger="storage")
        fused = await c.search(QUERY)
        res = await c.search(QUERY, rerank=True)
        assert res.ids == fused.ids
        assert res.degraded
        assert res.degradation is not None
        assert res.degradation.legs_failed == []
        assert res.degradation.reason == "rerank_connection_error"
        assert res.ordered_by == "fusion"
        assert res.rerank is not None
        assert not res.rerank.ok
        warnings = [r for r in caplog.records if getattr(r, "event.action", None) == "search.rerank_failed"]
        assert len(warnings) == 1
        assert warnings[0].levelno == logging.WARNING
        (event,) = [
            r for r in caplog.records if getattr(r, "event.action", None) == "search" and r.levelno == logging.WARNING
        ]
        assert getattr(event, "search.rerank.reason") == "connection_error"
        with pytest.raises(DependencyUnavailable) as info:
            await c.search(QUERY, rerank=True, strict=True)
        assert info.value.dependency == "reranker"
        assert c.breakers["elasticsearch"].state == "closed"
    await dead.aclose()


async def test_a_slow_reranker_costs_at_most_its_budget(reranking: SearchClient, rerank_server: RerankServer) -> None:
    rerank_server.delay_s = 3.0
    started = time.perf_counter()
    res = await reranking.search(QUERY, rerank=True)
    elapsed = time.perf_counter() - started
    assert res.degradation.reason == "rerank_timeout"
    assert res.hits
    assert elapsed < 1.0 + 1.0  # the 1 s rerank budget plus the legs; never the reranker's 3 s
    print(f"\nreranker 3 s slow vs a 1 s budget: fused order after {elapsed:.2f} s")


async def test_a_reranker_answering_garbage_is_not_retried_and_a_503_is(
    reranking: SearchClient, rerank_server: RerankServer
) -> None:
    def nan(answer: dict[str, list[dict[str, float]]]) -> object:
        answer["results"][0]["relevance_score"] = float("nan")
        return answer

    rerank_server.garble(nan)
    res = await reranking.search(QUERY, rerank=True)
    assert res.degradation.reason == "rerank_bad_response"
    assert len(rerank_server.requests) == 1
    rerank_server.fail(503, {"message": "busy"})
    res = await reranking.search(QUERY, rerank=True)
    assert res.ordered_by == "rerank"
    assert not res.degraded
    assert len(rerank_server.requests) == 3  # the 503, then its retry


async def test_a_dead_reranker_opens_its_own_breaker_and_never_elasticsearchs(
    loaded: SearchClient, settings: SearchSettings
) -> None:
    dead = HttpReranker(f"http://127.0.0.1:{_free_port()}", api="tei")
    async with SearchClient(
        loaded.elasticsearch, HashingEmbedder(dimensions=64), settings, owns_clients=False, reranker=dead
    ) as c:
        reasons = [(await c.search(QUERY, rerank=True)).degradation.reason for _ in range(4)]
        assert c.breakers["reranker"].state == "open"
        assert c.breakers["elasticsearch"].state == "closed"
        assert reasons[-1] == "rerank_circuit_open"
        assert (await c.search(QUERY)).hits
    await dead.aclose()


async def test_rerank_arguments_are_checked_before_anything_is_sent(
    loaded: SearchClient, reranking: SearchClient
) -> None:
    with pytest.raises(ConfigurationError, match="no reranker is configured"):
        await loaded.search(QUERY, rerank=True)
    with pytest.raises(InvalidQuery, match="rerank_candidates"):
        await reranking.search(QUERY, rerank=True, rerank_candidates=5, limit=10)
    res = await reranking.search(QUERY, rerank=True, rerank_candidates=8, limit=3)
    assert res.rerank is not None
    assert res.rerank.candidates == 8


async def test_rerank_as_a_settings_default_and_as_the_agent_tools_host_policy(
    loaded: SearchClient, settings: SearchSettings, rerank_server: RerankServer
) -> None:
    reranker = HttpReranker(rerank_server.url, api="tei")
    s = settings.model_copy(update={"rerank": True})
    async with SearchClient(
        loaded.elasticsearch, HashingEmbedder(dimensions=64), s, owns_clients=False, reranker=reranker
    ) as c:
        assert (await c.search(QUERY)).ordered_by == "rerank"
        assert (await c.search(QUERY, rerank=False)).ordered_by == "fusion"
        text = await SearchTool(c).run({"query": QUERY})
        assert text.splitlines()[1].startswith("1. [#guidance]")
        assert len(rerank_server.requests) == 2
        assert "rerank" not in SearchTool(c).definition()["function"]["parameters"]["properties"]
        await SearchTool(c, rerank=False).run({"query": QUERY})
        assert len(rerank_server.requests) == 2
    await reranker.aclose()


async def test_concurrent_searches_each_log_their_own_legs(
    loaded: SearchClient, caplog: pytest.LogCaptureFixture
) -> None:
    """Per-request state: a failing search's event carries its own legs, never a concurrent search's."""
    caplog.set_level(logging.INFO, logger="storage")
    failing, succeeding = "missing index words", "apple revenue"

    async def fail() -> None:
        with pytest.raises(Exception):  # noqa: B017, PT011 - IndexNotFound; the log event is what is checked
            await loaded.search(failing, index="no-such-index-here")

    await asyncio.gather(*[c for _ in range(10) for c in (fail(), loaded.search(succeeding))])
    events = [r for r in caplog.records if getattr(r, "event.action", None) == "search"]
    bad = [r for r in events if getattr(r, "search.query_hash") == query_hash(failing)]
    good = [r for r in events if getattr(r, "search.query_hash") == query_hash(succeeding)]
    assert len(bad) == len(good) == 10
    for r in bad:
        assert getattr(r, "event.outcome") == "failure"
        assert getattr(r, "search.legs.bm25.hits") == 0
        assert getattr(r, "search.legs.bm25.reason") == "index_not_found"
    for r in good:
        assert getattr(r, "event.outcome") == "success"
        assert getattr(r, "search.legs.bm25.hits") > 0
        assert not hasattr(r, "search.legs.bm25.reason")
