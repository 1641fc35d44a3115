"""A bulk load (storage._indexing.bulk_load): refresh off while it writes, restored however it ends, the index
merged; by default only for an initial load, never behind a live index's back."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import warnings
from collections.abc import AsyncIterator, Iterator

import pytest
from elasticsearch import AsyncElasticsearch

from embeddings import HashingEmbedder
from storage import Document, IngestInterrupted, SearchClient, SearchSettings
from storage.fusion import FusionSetting


def _docs(n: int, prefix: str = "d") -> Iterator[Document]:
    for i in range(n):
        yield Document(id=f"{prefix}{i}", title=f"report {i}", text=f"bulk loaded document number {i} " * 3)


@pytest.fixture
async def small(settings: SearchSettings) -> AsyncIterator[SearchClient]:
    """Small bulk requests, so a load without a bulk load would leave many segments."""
    tuned = settings.model_copy(update={"embed_batch_size": 16, "bulk_chunk_size": 16})
    async with SearchClient.from_settings(tuned, embedder=HashingEmbedder(dimensions=64)) as c:
        await c.ensure_index()
        yield c


async def _write_index(es: AsyncElasticsearch, alias: str) -> str:
    return next(iter((await es.indices.get_alias(name=alias)).body))


async def _refresh_interval(es: AsyncElasticsearch, index: str) -> str | None:
    settings = (await es.indices.get_settings(index=index)).body[index]["settings"]["index"]
    value = settings.get("refresh_interval")
    return str(value) if value is not None else None


@contextlib.asynccontextmanager
async def _watching(es: AsyncElasticsearch, index: str) -> AsyncIterator[set[str | None]]:
    """Every refresh interval the index had while the block ran (read as often as the server answers)."""
    seen: set[str | None] = set()

    async def watch() -> None:
        while True:
            seen.add(await _refresh_interval(es, index))
            await asyncio.sleep(0.01)

    task = asyncio.create_task(watch())
    try:
        yield seen
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _segments(es: AsyncElasticsearch, index: str) -> int:
    shards = (await es.indices.segments(index=index)).body["indices"][index]["shards"]
    return sum(len(copy["segments"]) for copies in shards.values() for copy in copies if copy["routing"]["primary"])


async def _meta(es: AsyncElasticsearch, index: str) -> dict[str, object]:
    return dict((await es.indices.get_mapping(index=index)).body[index]["mappings"].get("_meta", {}))


async def test_an_initial_load_turns_refresh_off_while_it_writes_then_restores_it(
    small: SearchClient, es: AsyncElasticsearch
) -> None:
    index = await _write_index(es, small.index)
    before = await _refresh_interval(es, index)
    async with _watching(es, index) as seen:
        report = await small.index_documents(_docs(400))
    assert report.ok
    assert report.bulk_load
    assert "-1" in seen  # off while it wrote
    assert await _refresh_interval(es, index) == before == "1s"  # restored as it was
    assert "bulk_load" not in await _meta(es, index)
    # (the first bulk request's segment, then one per indexing thread; 400 documents are not merged)
    assert await _segments(es, index) <= 3
    assert await small.documents.count() == 400  # searchable on return, without refresh=True


async def test_a_load_into_an_index_written_before_leaves_its_refresh_alone_and_one_asked_for_ends_merged(
    small: SearchClient, es: AsyncElasticsearch
) -> None:
    index = await _write_index(es, small.index)
    first = await small.index_documents(_docs(40), bulk_load=False)
    assert not first.bulk_load  # (asked not to, on an empty index)
    async with _watching(es, index) as seen:
        later = await small.index_documents(_docs(200, "later"))
    assert not later.bulk_load
    assert seen == {"1s"}  # a live index: never touched
    # Far fewer than SEGMENT_DOCUMENTS: the refresh after its first bulk request gives the merge a second
    # segment (a lone one is never rewritten, and would keep the recovery copies).
    asked = await small.index_documents(_docs(200, "asked"), bulk_load=True)
    assert asked.bulk_load
    assert await _refresh_interval(es, index) == "1s"
    assert await _segments(es, index) == 1  # asked for: merged (once the retention lease moved past the load)
    with warnings.catch_warnings():  # (the disk-usage API is a technical preview: elasticsearch-py warns)
        warnings.simplefilter("ignore")
        usage = (await es.indices.disk_usage(index=index, run_expensive_tasks=True)).body[index]["fields"]
    assert usage.get("_recovery_source", {}).get("total_in_bytes", 0) == 0  # the recovery copies merged away
    assert await small.documents.count() == 440


async def test_a_small_load_asked_for_on_an_empty_index_ends_without_the_recovery_copies(
    small: SearchClient, es: AsyncElasticsearch
) -> None:
    index = await _write_index(es, small.index)
    report = await small.index_documents(_docs(120), bulk_load=True)  # (fewer than one segment's worth)
    assert report.bulk_load
    assert await _segments(es, index) == 1
    with warnings.catch_warnings():  # (the disk-usage API is a technical preview: elasticsearch-py warns)
        warnings.simplefilter("ignore")
        usage = (await es.indices.disk_usage(index=index, run_expensive_tasks=True)).body[index]["fields"]
    assert usage.get("_recovery_source", {}).get("total_in_bytes", 0) == 0
    assert await small.documents.count() == 120


async def test_a_load_that_fails_part_way_still_restores_the_refresh(
    small: SearchClient, es: AsyncElasticsearch
) -> None:
    index = await _write_index(es, small.index)

    def documents() -> Iterator[Document]:
        yield from _docs(100)
        raise OSError("the source went away")

    with pytest.raises(IngestInterrupted) as info:
        await small.index_documents(documents())
    assert info.value.report.bulk_load
    assert len(info.value.report.indexed) == 100
    assert await _refresh_interval(es, index) == "1s"
    assert "bulk_load" not in await _meta(es, index)
    assert await small.documents.count() == 100


async def test_a_load_left_unfinished_by_a_killed_process_is_reported_and_ended_on_request(
    settings: SearchSettings, small: SearchClient, es: AsyncElasticsearch, caplog: pytest.LogCaptureFixture
) -> None:
    index = await _write_index(es, small.index)
    # What a process killed during a bulk load leaves: its record, and the refresh off.
    meta = await _meta(es, index) | {"bulk_load": {"refresh_interval": "1s", "started": "2026-11-28T00:00:00Z"}}
    await es.indices.put_mapping(index=index, meta=meta)
    await es.indices.put_settings(index=index, settings={"index": {"refresh_interval": "-1"}})
    with caplog.at_level(logging.WARNING, logger="storage"):
        async with SearchClient.from_settings(settings, embedder=HashingEmbedder(dimensions=64)) as other:
            await other.ensure_index()
            report = await other.index_documents(_docs(20), bulk_load=True)
    assert any("end_bulk_load()" in r.getMessage() for r in caplog.records)
    assert not report.bulk_load  # another load's record: this one leaves the settings to it
    assert await _refresh_interval(es, index) == "-1"
    assert await small.indices.end_bulk_load()
    assert await _refresh_interval(es, index) == "1s"
    assert "bulk_load" not in await _meta(es, index)
    assert not await small.indices.end_bulk_load()  # nothing left to end
    assert await small.documents.count() == 20


async def test_bulk_requests_over_a_mebibyte_are_written_with_no_warning_even_under_debug_logging(
    settings: SearchSettings, caplog: pytest.LogCaptureFixture
) -> None:
    # aiohttp warns (ResourceWarning) on a request body over 1 MiB handed to it whole; this suite runs with
    # warnings as errors, as many users' do, where that warning failed the request as "cannot reach".
    roomy = settings.model_copy(update={"bulk_max_bytes": 8_000_000, "bulk_chunk_size": 1_000, "embed_batch_size": 400})
    docs = [Document(id=f"big{i}", text=f"document {i} " + "long body words " * 400) for i in range(400)]
    assert sum(len(d.text) for d in docs) > 2 * 2**20  # one bulk request of more than 2 MiB
    caplog.set_level(logging.DEBUG, logger="elastic_transport.node")  # (the debug log reads the body)
    async with SearchClient.from_settings(roomy, embedder=HashingEmbedder(dimensions=64)) as client:
        await client.ensure_index()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            report = await client.index_documents(docs, refresh=True)
        assert report.ok, report.failed
        assert len(report.indexed) == 400
        assert await client.documents.count() == 400
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)]
    assert any("long body words" in r.getMessage() for r in caplog.records)  # the large body was logged


async def test_a_fusion_stored_while_bulk_loads_begin_and_end_is_kept_and_one_load_holds_the_index(
    small: SearchClient, es: AsyncElasticsearch
) -> None:
    # Elasticsearch replaces an index's _meta as a whole: every writer reads, edits and puts it. Stored fusion
    # settings, the bulk loads' records and their removal, all at once, lose nothing and leave no record.
    index = await _write_index(es, small.index)
    setting = FusionSetting(k=17, bm25_weight=2.0)
    stored, *reports = await asyncio.gather(
        small.indices.store_fusion(setting, by="the race test"),
        *(small.index_documents(_docs(50, f"l{n}-")) for n in range(3)),  # (initial loads: bulk loads, unmerged)
    )
    assert stored == index
    assert all(r.ok for r in reports)
    assert sum(r.bulk_load for r in reports) == 1  # one load held the index; the others wrote as usual
    meta = await _meta(es, index)
    assert meta["fusion"] == setting.to_meta() | {"tuned": {"by": "the race test"}}
    assert "bulk_load" not in meta
    assert "embedding" in meta  # (the model's record kept too)
    assert await _refresh_interval(es, index) == "1s"
    assert await small.documents.count() == 150
