"""Dependencies that stop answering: Elasticsearch, the embedding server, the rerank server and the chat server,
each behind the TCP fault proxy on 127.0.0.1, hung four ways — a blackhole (connection accepted, never an
answer), latency above the budget, a slow drip (one byte a second: a per-read timeout never fires), and a
reset in mid-body. For each the caller gets a typed error or a degraded result with its reason, within its
budget; the dependency's breaker opens after ``breaker_fail_max`` such calls, from then on the calls fail
fast without reaching the dependency, and once it answers again one probe closes the breaker.

The figures (how long each call takes, when the breaker opens) are printed by ``bench/hangs.py``; these
tests prove the behaviour with small budgets.
"""

from __future__ import annotations

import asyncio
import json
import urllib.parse
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from embeddings import HashingEmbedder, HttpReranker, OpenAIChat, OpenAIEmbedder
from storage import CircuitOpen, DependencyUnavailable, Document, SearchClient, SearchFailed, SearchSettings

from .._faultproxy import FaultProxy
from .._rerank_server import RerankServer
from .._scripted import ScriptedServer, chat_body, embeddings_body

#: Each leg's (and the rerank stage's) budget in these tests, the breaker's threshold and its reset time.
BUDGET_S = 0.4
FAIL_MAX = 2
RESET_S = 1.0
#: The four ways a dependency hangs, as the fault proxy makes them.
HANGS: dict[str, tuple[str, dict[str, Any]]] = {
    "blackhole": ("blackhole", {}),
    "latency": ("latency", {"latency_s": 5.0}),
    "drip": ("drip", {"drip_bytes": 1, "drip_every_s": 1.0}),
    "reset_mid_body": ("cut_response", {"cut_after": 40, "cut_times": 10**9}),
}
DOCS = [Document(id=f"doc-{i}", title=f"title {i}", text=f"revenue guidance number {i} text") for i in range(12)]


def _settings(url: str, index: str, **extra: Any) -> SearchSettings:
    return SearchSettings(
        url=url,
        index=index,
        leg_timeout_s=BUDGET_S,
        rerank_timeout_s=BUDGET_S,
        answer_timeout_s=2 * BUDGET_S,
        breaker_fail_max=FAIL_MAX,
        breaker_reset_s=RESET_S,
        **extra,
    )


async def _proxy_to(url: str) -> FaultProxy:
    parsed = urllib.parse.urlparse(url)
    return await FaultProxy(parsed.hostname or "127.0.0.1", parsed.port or 80).start()


@pytest.fixture
async def loaded(client: SearchClient) -> SearchClient:
    await client.ensure_index()
    assert (await client.index_documents(DOCS, refresh=True)).ok
    return client


@pytest.fixture
async def proxy(es_url: str) -> AsyncIterator[FaultProxy]:
    p = await _proxy_to(es_url)
    yield p
    await p.stop()


async def _recovers_with_one_probe(proxy: FaultProxy, client: SearchClient, dependency: str, call: Any) -> None:
    """Once the dependency answers again: after the reset time one call goes through and closes the breaker."""
    await proxy.set_mode("pass")
    await asyncio.sleep(RESET_S + 0.05)
    await call()
    assert client.breakers[dependency].state == "closed"


@pytest.mark.parametrize("hang", sorted(HANGS))
async def test_a_hung_elasticsearch_opens_the_breaker_then_searches_fail_fast_and_one_probe_recovers(
    loaded: SearchClient, proxy: FaultProxy, hang: str
) -> None:
    async with SearchClient.from_settings(
        _settings(proxy.url, loaded.index), embedder=HashingEmbedder(dimensions=64)
    ) as c:
        await proxy.set_mode(HANGS[hang][0], **HANGS[hang][1])
        searches = 0
        while c.breakers["elasticsearch"].state != "open":
            searches += 1
            assert searches <= FAIL_MAX, "the breaker never saw the hang"
            with pytest.raises(SearchFailed) as info:
                await c.search(f"revenue {searches}")
            # (a hang that fails fast, a reset, can open the breaker inside the first search: CircuitOpen is a
            # DependencyUnavailable too)
            assert all(isinstance(e, DependencyUnavailable) for e in info.value.leg_errors.values())
        sent = proxy.requests
        for n in range(3):
            with pytest.raises(SearchFailed) as info:
                await c.search(f"revenue fast {n}")
            assert all(isinstance(e, CircuitOpen) for e in info.value.leg_errors.values())
        assert proxy.requests == sent  # failed fast: nothing reached the hung node
        await _recovers_with_one_probe(proxy, c, "elasticsearch", lambda: c.search("revenue", mode="bm25"))
        assert (await c.search("revenue")).hits


@pytest.mark.parametrize("hang", sorted(HANGS))
async def test_a_hung_embedder_degrades_hybrid_to_bm25_and_once_its_breaker_opens_the_leg_is_skipped_at_once(
    loaded: SearchClient, es_url: str, scripted_server: ScriptedServer, hang: str
) -> None:
    def vectors(payload: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        inputs = payload.get("input")
        body = embeddings_body(len(inputs) if isinstance(inputs, list) else 1, 64, 1.0)  # (unit length)
        return 200, {"content-type": "application/json"}, json.dumps(body).encode()

    scripted_server.default = vectors
    proxy = await _proxy_to(scripted_server.url)
    try:
        embedder = OpenAIEmbedder(model="m", dimensions=64, base_url=f"{proxy.url}/v1", api_key="k", timeout_s=30)
        async with SearchClient.from_settings(_settings(es_url, loaded.index), embedder=embedder) as c:
            await proxy.set_mode(HANGS[hang][0], **HANGS[hang][1])
            searches = 0
            while c.breakers["embeddings"].state != "open":
                searches += 1
                assert searches <= FAIL_MAX, "the breaker never saw the hang"
                res = await c.search(f"revenue guidance {uuid.uuid4().hex}")  # (never a cached query vector)
                assert res.degraded
                assert res.degradation.legs_failed == ["knn"]
                assert res.hits
                assert res.degradation.reason in ("timeout", "connection_error", "disconnected", "circuit_open")
            sent = proxy.requests
            res = await c.search(f"revenue guidance {uuid.uuid4().hex}")
            assert res.degraded
            assert res.degradation.reason == "circuit_open"
            assert res.hits
            assert all(set(h.ranks) == {"bm25"} for h in res.hits)
            assert proxy.requests == sent
            # (the probe embeds; its kNN leg then meets an index of the hashing model: a ModelMismatch, not a hang)
            await _recovers_with_one_probe(
                proxy, c, "embeddings", lambda: c.search(f"revenue guidance {uuid.uuid4().hex}")
            )
    finally:
        await proxy.stop()


@pytest.mark.parametrize("hang", sorted(HANGS))
async def test_a_hung_reranker_returns_the_fused_order_and_once_its_breaker_opens_is_skipped_at_once(
    loaded: SearchClient, es_url: str, rerank_server: RerankServer, hang: str
) -> None:
    proxy = await _proxy_to(rerank_server.url)
    try:
        reranker = HttpReranker(proxy.url, api="cohere-v2", model="bm25", timeout_s=30)
        async with SearchClient.from_settings(
            _settings(es_url, loaded.index), embedder=HashingEmbedder(dimensions=64), reranker=reranker
        ) as c:
            fused = [h.id for h in (await c.search("revenue guidance")).hits]
            await proxy.set_mode(HANGS[hang][0], **HANGS[hang][1])
            searches = 0
            while c.breakers["reranker"].state != "open":
                searches += 1
                assert searches <= FAIL_MAX, "the breaker never saw the hang"
                res = await c.search("revenue guidance", rerank=True)
                assert res.degraded
                assert res.degradation.reason in (
                    "rerank_timeout",
                    "rerank_connection_error",
                    "rerank_disconnected",
                    "rerank_circuit_open",
                )
                assert [h.id for h in res.hits] == fused
            sent = proxy.requests
            res = await c.search("revenue guidance", rerank=True)
            assert res.degradation.reason == "rerank_circuit_open"
            assert [h.id for h in res.hits] == fused
            assert proxy.requests == sent
            await _recovers_with_one_probe(proxy, c, "reranker", lambda: c.search("revenue guidance", rerank=True))
    finally:
        await proxy.stop()


@pytest.mark.parametrize("hang", sorted(HANGS))
async def test_a_hung_chat_model_gives_the_entries_without_an_answer_and_once_its_breaker_opens_is_skipped(
    loaded: SearchClient, es_url: str, scripted_server: ScriptedServer, hang: str
) -> None:
    body = json.dumps(chat_body("Revenue guidance is in [doc-1].")).encode()
    scripted_server.default = lambda payload: (200, {"content-type": "application/json"}, body)
    proxy = await _proxy_to(scripted_server.url)
    try:
        llm = OpenAIChat(model="scripted", base_url=proxy.url, timeout_s=30)
        async with SearchClient.from_settings(
            _settings(es_url, loaded.index), embedder=HashingEmbedder(dimensions=64), llm=llm
        ) as c:
            await proxy.set_mode(HANGS[hang][0], **HANGS[hang][1])
            answers = 0
            while c.breakers["llm"].state != "open":
                answers += 1
                assert answers <= FAIL_MAX, "the breaker never saw the hang"
                answer = await c.answer("what is the revenue guidance?")
                assert answer.answer is None
                assert answer.entries
                assert answer.degradation.reason in (
                    "llm_timeout",
                    "llm_unavailable",
                    "llm_disconnected",
                    "llm_circuit_open",
                )
            sent = proxy.requests
            answer = await c.answer("what is the revenue guidance?")
            assert answer.answer is None
            assert answer.degradation.reason == "llm_circuit_open"
            assert answer.entries
            assert proxy.requests == sent
            await _recovers_with_one_probe(proxy, c, "llm", lambda: c.answer("what is the revenue guidance?"))
    finally:
        await proxy.stop()


async def test_a_bulk_write_that_lands_on_a_node_hung_for_writes_fails_over_within_half_its_budget(
    es_url: str,
) -> None:
    """Two hosts (two proxies to one node): one answers everything but its bulk requests, which it never
    answers. A batch goes in one bulk request per document, in turn to each host, so one lands on the hung one:
    the transport times it out with half of ``bulk_timeout_s`` left, marks that host dead and sends the same
    bulk to the other. Every document is written, in less than the budget, and the breaker never opens."""
    hung, good = await _proxy_to(es_url), await _proxy_to(es_url)
    try:
        await hung.set_mode("hang_matching", hang_pattern=b"/_bulk")
        index = f"bulk-hang-{uuid.uuid4().hex[:8]}"
        settings = SearchSettings(url=f"{hung.url},{good.url}", index=index, bulk_timeout_s=4.0, bulk_chunk_size=1)
        async with SearchClient.from_settings(settings, embedder=HashingEmbedder(dimensions=64)) as c:
            await c.ensure_index()
            report = await c.index_documents(DOCS[:4], refresh=True)
            assert report.ok
            assert hung.hung == 1
            assert report.seconds < settings.bulk_timeout_s
            assert await c.documents.count() == 4
            assert c.breakers["elasticsearch"].state == "closed"
            await c.indices.delete()
    finally:
        await hung.stop()
        await good.stop()
