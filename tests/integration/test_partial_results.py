"""Partial results are reported, never silent: a shard really unavailable on the real Elasticsearch (an
index behind the alias whose only shard can be allocated nowhere), and a shard really timing out."""

from __future__ import annotations

import logging
import uuid

import pytest
from elasticsearch import AsyncElasticsearch

from embeddings import HashingEmbedder
from storage import Document, PartialResults, SearchClient, SearchFailed, SearchSettings
from storage._dsl.mapping import index_body
from storage.agent import SearchTool, error_message
from storage.local_es import LocalElasticsearch

DOCS = [Document(id=f"doc-{i}", title=f"note {i}", text=f"revenue guidance number {i}") for i in range(20)]


@pytest.fixture
async def half_red(client: SearchClient, es: AsyncElasticsearch) -> SearchClient:
    """The alias holds a healthy index and one whose only shard cannot be allocated: half the data is
    unavailable, as when a node holding a primary is gone."""
    await client.ensure_index()
    assert (await client.index_documents(DOCS, refresh=True)).ok
    red = f"{client.index}-red"
    body = index_body(dimensions=64, normalized=True, model_id="hashing-64", analyzer="standard", replicas=0)
    body["settings"]["index"]["routing.allocation.require._name"] = "no-such-node"
    await es.indices.create(index=red, wait_for_active_shards="0", **body)
    await es.indices.update_aliases(actions=[{"add": {"index": red, "alias": client.index}}])
    return client


@pytest.mark.smoke
async def test_a_search_with_an_unavailable_shard_says_it_is_partial(
    half_red: SearchClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="storage")
    res = await half_red.search("revenue guidance")
    assert res.hits
    assert res.partial
    # The legs and the fetch of the page's documents all met the missing shard.
    assert res.completeness.partial_legs == ["bm25", "knn", "fetch"]
    assert not res.completeness.highlights_complete
    assert not res.degraded  # every leg answered; not all of the index did
    for leg in ("bm25", "knn"):
        shards = res.legs[leg].shards
        assert shards is not None
        assert (shards.total, shards.successful, shards.failed) == (2, 1, 1)
        assert shards.failure is not None
        assert "no_shard_available" in shards.failure
        assert res.legs[leg].partial
    (event,) = [r for r in caplog.records if getattr(r, "event.action", None) == "search"]
    assert getattr(event, "search.partial") is True
    assert getattr(event, "search.legs.bm25.shards_failed") == 1
    text = await SearchTool(half_red).run({"query": "revenue guidance"})
    assert "results may be incomplete" in text
    msearch = await half_red.search("revenue guidance", round_trip="msearch")
    assert msearch.completeness.partial_legs == ["bm25", "knn", "fetch"]


async def test_strict_searches_and_walks_refuse_partial_results(half_red: SearchClient) -> None:
    with pytest.raises(PartialResults) as info:
        await half_red.search("revenue guidance", strict=True)
    assert set(info.value.shards) == {"bm25", "knn"}
    assert "1 of 2 shards" in str(info.value)
    assert "did not answer" in error_message(info.value)
    with pytest.raises(PartialResults):  # a page from some shards would reorder the walk
        await half_red.search_page("revenue guidance", mode="bm25")


async def test_when_partial_results_are_not_allowed_elasticsearch_refuses_and_the_error_is_typed(
    half_red: SearchClient, settings: SearchSettings
) -> None:
    s = settings.model_copy(update={"allow_partial_search_results": False})
    async with SearchClient(half_red.elasticsearch, HashingEmbedder(dimensions=64), s, owns_clients=False) as c:
        with pytest.raises(SearchFailed) as info:
            await c.search("revenue guidance")
        assert {e.reason for e in info.value.leg_errors.values()} == {"shards_unavailable"}
        with pytest.raises(SearchFailed) as info:
            await c.search("revenue guidance", round_trip="msearch")
        assert {e.reason for e in info.value.leg_errors.values()} == {"shards_unavailable"}
        # A refusal about the data: not retried, and the breaker stays closed for searches that can answer.
        assert c.breakers["elasticsearch"].retries == 0
        assert c.breakers["elasticsearch"].state == "closed"
        assert c.breakers["elasticsearch"].failures == 0


async def test_every_leg_carries_a_server_side_timeout_and_a_shard_that_times_out_is_reported() -> None:
    """A node whose clock is read on every check (``thread_pool.estimated_time_interval: 0``; by default
    Elasticsearch's timeout clock ticks every 200 ms, too coarse for a small index) and a server timeout
    of one microsecond: the kNN leg's shard stops early and says so."""
    node = LocalElasticsearch(
        name=f"timeout-{uuid.uuid4().hex[:8]}", ephemeral=True, settings={"thread_pool.estimated_time_interval": "0"}
    )
    url = node.start()
    try:
        settings = SearchSettings(url=url, index="timeouts", search_timeout_s=1e-6)
        async with SearchClient.from_settings(settings, embedder=HashingEmbedder(dimensions=64)) as c:
            await c.ensure_index()
            docs = [Document(id=f"t{i}", text=f"revenue note {i % 97} guidance {i}") for i in range(3000)]
            assert (await c.index_documents(docs, refresh=True)).ok
            res = await c.search("revenue guidance", mode="knn", num_candidates=3000, window=100)
            shards = res.legs["knn"].shards
            assert shards is not None
            assert shards.timed_out
            assert res.partial
            assert res.completeness.partial_legs == ["knn"]
            with pytest.raises(PartialResults):
                await c.search("revenue guidance", mode="knn", num_candidates=3000, window=100, strict=True)
    finally:
        node.stop()
