"""SearchClient against the real Elasticsearch, with the fast deterministic HashingEmbedder.

(The same behaviour with the real local model: test_client_local_model.py.)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from datetime import datetime

import pytest
from elasticsearch import AsyncElasticsearch

from embeddings import HashingEmbedder
from storage import (
    DimensionMismatch,
    Document,
    IndexNotFound,
    IngestInterrupted,
    InvalidDocument,
    InvalidQuery,
    SearchClient,
    SearchSettings,
)
from storage.filters import AllOf, AnyOf, Exists, Not, Term, Terms
from storage.fusion import FusionSetting

CORPUS = [
    Document(
        id="aapl-1",
        title="Apple cuts revenue guidance",
        text="Apple lowered its revenue guidance for the quarter citing weak iPhone demand in China.",
        ticker="AAPL",
        doc_type="news",
        published_at="2024-02-01",
    ),
    Document(
        id="aapl-2",
        title="Apple annual report",
        text="Services revenue grew while hardware margins held steady across the fiscal year.",
        ticker="AAPL",
        doc_type="filing",
        published_at="2023-11-03",
    ),
    Document(
        id="msft-1",
        title="Microsoft raises guidance",
        text="Microsoft raised its revenue guidance on strong cloud demand.",
        ticker="MSFT",
        doc_type="news",
        published_at="2024-01-25",
    ),
    Document(
        id="msft-2",
        title="Microsoft cloud growth",
        text="Azure cloud revenue grew thirty percent.",
        ticker="MSFT",
        doc_type="news",
        published_at="2024-04-25",
        metadata={"region": "us"},
    ),
    Document(
        id="weather-1",
        title="Spring weather",
        text="Rain and mild temperatures expected in April.",
        doc_type="blog",
        source="weather-desk",
    ),
]


async def _load(client: SearchClient) -> None:
    await client.ensure_index()
    report = await client.index_documents(CORPUS, refresh=True)
    assert report.failed == []


@pytest.mark.smoke
async def test_each_mode_returns_the_expected_documents(client: SearchClient) -> None:
    await _load(client)
    for mode in ("bm25", "knn", "hybrid"):
        res = await client.search("revenue guidance cut", mode=mode, limit=3)
        assert res.hits, mode
        # The hashing embedder scores aapl-1 and msft-1 close (0.47 vs 0.43) and int8 HNSW quantisation on a
        # five-document segment can swap them: kNN must rank aapl-1 in its top two, the others first.
        if mode == "knn":
            assert "aapl-1" in res.ids[:2], (mode, res.ids)
        else:
            assert res.hits[0].id == "aapl-1", (mode, res.ids)
        assert "weather-1" not in res.ids[:3]
        assert set(res.legs) == ({"bm25", "knn"} if mode == "hybrid" else {mode})


async def test_hybrid_hits_carry_provenance_and_the_response_its_parameters(client: SearchClient) -> None:
    await _load(client)
    res = await client.search("revenue guidance", limit=5)
    top = res.hits[0]
    assert set(top.ranks) == {"bm25", "knn"}
    assert set(top.leg_scores) == {"bm25", "knn"}
    assert 0 < top.normalized_score <= 1
    assert top.score == pytest.approx(1 / (10 + top.ranks["bm25"]) + 1 / (10 + top.ranks["knn"]))
    assert any("<em>" in frag for frags in top.highlights.values() for frag in frags)
    assert "embedding" not in top.source
    assert res.fusion == FusionSetting(method="rrf", k=10, bm25_weight=1.0, knn_weight=1.0, window=50)
    assert res.legs["knn"].num_candidates == 100
    assert res.legs["bm25"].num_candidates is None
    assert res.legs["bm25"].ok
    assert res.legs["knn"].ok
    assert res.legs["knn"].embed_ms is not None
    assert res.overlap >= 1
    assert res.degraded is False
    assert res.degradation is None


@pytest.mark.smoke
async def test_explain_gives_the_bm25_legs_own_score_and_none_for_a_document_it_does_not_match(
    client: SearchClient,
) -> None:
    await _load(client)
    bm25 = {h.id: h.score for h in (await client.leg_rankings("revenue guidance", mode="bm25"))["bm25"]}
    why = await client.documents.explain("msft-1", "revenue guidance")
    assert why is not None
    assert why.value == pytest.approx(bm25["msft-1"], rel=1e-5)
    assert why.details  # the terms' parts
    assert "weight(text:guidanc" in str(why.model_dump())  # each term's weight, as analyzed (stemmed)
    assert await client.documents.explain("weather-1", "revenue guidance") is None  # no term matches
    assert await client.documents.explain("no-such-id", "revenue guidance") is None
    # The leg's filters apply: a document the filter excludes does not match.
    assert await client.documents.explain("msft-1", "revenue guidance", filters={"ticker": "AAPL"}) is None


async def test_filters_restrict_both_legs(client: SearchClient) -> None:
    await _load(client)
    # Unfiltered, the kNN leg alone ranks the AAPL documents first for this text...
    unfiltered = await client.search("Apple lowered its revenue guidance", mode="knn", limit=5)
    assert unfiltered.ids[0] == "aapl-1"
    # ...filtered to MSFT, neither leg may return an AAPL document.
    res = await client.search("Apple lowered its revenue guidance", filters={"ticker": "MSFT"}, limit=10)
    assert res.ids
    assert set(res.ids) <= {"msft-1", "msft-2"}
    assert res.legs["knn"].hits == 2
    assert res.legs["bm25"].hits >= 1
    dated = await client.search("revenue", filters={"published_at": {"gte": "2024-01-01"}, "doc_type": "news"})
    assert set(dated.ids) == {"aapl-1", "msft-1", "msft-2"}
    meta = await client.search("cloud", filters={"metadata.region": "us"})
    assert meta.ids == ["msft-2"]
    missing = await client.search("weather", filters={"ticker": {"exists": False}})
    assert missing.ids == ["weather-1"]


async def test_combined_filters_and_metadata_compared_by_the_type_the_filter_gives(client: SearchClient) -> None:
    pages = [("p9", "9", "1969-07-21T20:17:40"), ("p10", "10", "1972-12-11"), ("p100", "100", "not a date")]
    docs = [Document(id=i, text=f"page {p} of the report", metadata={"page": p, "day": d}) for i, p, d in pages]
    await client.ensure_index()
    await client.index_documents(docs, refresh=True)
    numbers = await client.search("report", filters={"metadata.page": {"gte": 10}})
    assert set(numbers.ids) == {"p10", "p100"}  # as numbers: "9" < 10 (as keywords "9" > "10")
    as_keywords = await client.search("report", filters={"metadata.page": {"gt": "10"}})
    assert set(as_keywords.ids) == {"p100", "p9"}  # a string compares as a keyword
    dates = await client.search("report", filters={"metadata.day": {"lt": datetime(1970, 1, 1)}})
    assert dates.ids == ["p9"]  # (a value that is not a date is left out of the date comparison, not an error)
    either = [AnyOf((Term("metadata.page", 9), Not((Terms("id", ("p9", "p10")),))))]
    assert set((await client.search("report", filters=either)).ids) == {"p9", "p100"}
    assert await client.documents.count(filters=[AllOf((Term("metadata.page", 10.0), Exists("metadata.day")))]) == 1
    assert set(await client.documents.matching_ids(filters=[Not((Term("metadata.page", "9"),))])) == {"p10", "p100"}


async def test_an_index_made_before_typed_metadata_gets_it_for_keys_it_has_not_seen(
    client: SearchClient, es: AsyncElasticsearch, settings: SearchSettings
) -> None:
    name = await client.ensure_index()
    before = [{"metadata_keywords": {"path_match": "metadata.*", "mapping": {"type": "keyword", "ignore_above": 1024}}}]
    await es.indices.put_mapping(index=name, dynamic_templates=before)  # (the template of earlier versions)
    async with SearchClient.from_settings(settings, embedder=HashingEmbedder(dimensions=64)) as again:
        await again.ensure_index()
        await again.index_documents([Document(id="d", text="a page", metadata={"page": "12"})], refresh=True)
        assert await again.documents.count(filters={"metadata.page": {"gt": 9}}) == 1


async def test_tenant_filter_isolates_tenants(client: SearchClient) -> None:
    await client.ensure_index()
    docs = [Document(id=f"{t}-1", text="shared words about revenue", tenant_id=t) for t in ("t1", "t2")]
    await client.index_documents(docs, refresh=True)
    res = await client.search("revenue", tenant_id="t2")
    assert res.ids == ["t2-1"]


async def test_unknown_filter_field_is_rejected_before_any_request(client: SearchClient) -> None:
    with pytest.raises(InvalidQuery, match="unknown filter field 'price'"):
        await client.search("x", filters={"price": 3})


async def test_reindexing_the_same_documents_creates_no_duplicates(client: SearchClient) -> None:
    await _load(client)
    report = await client.index_documents(CORPUS, refresh=True)
    assert sorted(report.indexed) == sorted(d.id for d in CORPUS)
    assert await client.documents.count() == len(CORPUS)
    derived = [{"title": "No id", "text": "an id is derived from the content"}] * 2
    report = await client.index_documents(derived, refresh=True)
    assert report.duplicates == [Document.model_validate(derived[0]).id]
    assert len(report.indexed) == 1
    await client.index_documents(derived[:1], refresh=True)
    assert await client.documents.count() == len(CORPUS) + 1


async def test_indexed_documents_read_back_as_the_documents_that_were_indexed(client: SearchClient) -> None:
    await _load(client)
    given = next(d for d in CORPUS if d.id == "msft-2")
    stored = await client.documents.get("msft-2")
    assert stored == given  # every field, typed as given (published_at a datetime again)
    assert stored is not None
    assert (stored.ticker, stored.metadata) == ("MSFT", {"region": "us"})
    assert await client.documents.get("nope") is None
    many = await client.documents.get_many(["nope", "msft-2", given.id])
    assert many == {"msft-2": given}


@pytest.mark.smoke
async def test_index_dimension_mismatch_fails_at_startup(settings: SearchSettings, client: SearchClient) -> None:
    await client.ensure_index()
    async with SearchClient.from_settings(settings, embedder=HashingEmbedder(dimensions=32)) as other:
        with pytest.raises(DimensionMismatch, match="64-dim vectors"):
            await other.ensure_index()


async def test_ensure_index_is_idempotent_and_safe_concurrently(client: SearchClient, es: AsyncElasticsearch) -> None:
    names = await asyncio.gather(*(client.ensure_index() for _ in range(5)))
    assert set(names) == {f"{client.index}-000001"}
    aliases = await es.indices.get_alias(name=client.index)
    assert list(aliases.body) == [f"{client.index}-000001"]
    mapping = (await es.indices.get_mapping(index=client.index)).body[names[0]]["mappings"]
    assert mapping["dynamic"] == "strict"
    assert mapping["properties"]["embedding"]["similarity"] == "dot_product"
    assert mapping["_meta"]["embedding"] == {"model_id": "hashing-64", "dimensions": 64, "normalized": True}


async def test_new_index_version_swaps_the_alias_without_downtime(client: SearchClient) -> None:
    await _load(client)
    new = await client.indices.create_version()
    assert new == f"{client.index}-000002"
    await client.index_documents(CORPUS[:2], index=new, refresh=True)
    assert await client.documents.count() == len(CORPUS)  # searches still see the old index
    await client.indices.promote(new, delete_old=True)
    assert await client.documents.count() == 2
    assert (await client.search("apple")).ids[0].startswith("aapl")


async def test_paging_inside_the_fused_window(client: SearchClient) -> None:
    await _load(client)
    full = await client.search("revenue cloud guidance", limit=5)
    page = await client.search("revenue cloud guidance", limit=2, offset=2)
    assert page.ids == full.ids[2:4]
    # Past the window: it widens for that call (issue 51/53) — unless the call chose the window itself.
    wide = await client.search("revenue", limit=10, offset=45)
    assert wide.fusion.window == 55
    assert wide.fusion_sources["window"] == "limit"
    with pytest.raises(InvalidQuery, match="fusion window"):
        await client.search("revenue", limit=10, offset=45, window=50)


@pytest.mark.smoke
async def test_hostile_query_text_never_causes_an_elasticsearch_error(client: SearchClient) -> None:
    await _load(client)
    for text in [
        '"revenue guidance',
        "revenue AND (guidance OR",
        "a:b [1 TO ] {~^* \\ / ! && ||",
        "x" * 5000,
        "rev\x00enue\ud800 guid\u200bance",
        "-revenue +guidance",
    ]:
        res = await client.search(text)
        assert res.legs["bm25"].ok, text
    long = await client.search("revenue " * 300)
    assert "truncated" in long.query_adjustments
    with pytest.raises(InvalidQuery):
        await client.search("  \t\n ")


async def test_searching_a_missing_index_is_a_typed_error(settings: SearchSettings) -> None:
    async with SearchClient.from_settings(settings, embedder=HashingEmbedder(dimensions=64)) as c:
        with pytest.raises(IndexNotFound):
            await c.search("anything")


async def test_strict_indexing_rejects_an_invalid_document_before_anything_is_sent(client: SearchClient) -> None:
    await client.ensure_index()
    with pytest.raises(InvalidDocument, match="#1"):
        await client.index_documents([{"id": "ok", "text": "fine"}, {"id": "bad", "text": "  "}], on_invalid="raise")
    assert await client.documents.count() == 0


async def test_an_invalid_document_costs_one_document_and_is_reported_with_its_position(
    client: SearchClient,
) -> None:
    await client.ensure_index()
    submitted: list[object] = [
        {"id": "ok-1", "text": "fine"},
        {"id": "blank", "title": " ", "text": "  "},
        {"id": "title-only", "title": "A title and no text"},
        {"id": "bad-field", "text": "x", "price": 3},
        42,
        {"text": "no id: one is derived"},
    ]
    report = await client.index_documents(submitted, refresh=True)  # type: ignore[arg-type]
    failed = {f.id: f for f in report.failed}
    assert set(failed) == {"blank", "bad-field", "#4"}
    assert {f.reason for f in report.failed} == {"invalid_document"}
    assert (failed["blank"].position, failed["bad-field"].position, failed["#4"].position) == (1, 3, 4)
    assert "title or a text" in failed["blank"].detail
    assert "price" in failed["bad-field"].detail
    assert len(report.indexed) == 3
    assert len(report.indexed) + len(report.failed) == len(submitted)
    assert await client.documents.count() == 3
    res = await client.search("title", limit=3)
    assert res.ids[0] == "title-only"  # a title-only document is embedded and searched by its title


async def test_progress_is_reported_and_every_id_is_accounted_for(client: SearchClient) -> None:
    await client.ensure_index()
    seen = []
    docs = [Document(id=f"d{i}", text=f"document number {i} about revenue") for i in range(250)]
    report = await client.index_documents(docs, progress=seen.append, refresh=True)
    assert len(report.indexed) == 250
    assert report.failed == []
    assert seen[-1].indexed_count == 250
    assert seen[-1].embedded_count == 250
    assert await client.documents.count() == 250


async def test_search_tool_keeps_the_seed_call_shape(client: SearchClient) -> None:
    await _load(client)
    res = await client.search_tool("revenue guidance", search_type="bm25", ticker="MSFT", limit=3)
    assert res.mode == "bm25"
    assert set(res.ids) <= {"msft-1", "msft-2"}


async def test_one_structured_event_per_search(client: SearchClient, caplog: pytest.LogCaptureFixture) -> None:
    await _load(client)
    caplog.set_level(logging.INFO, logger="storage")
    await client.search("secret revenue words")
    records = [r for r in caplog.records if getattr(r, "event.action", None) == "search"]
    assert len(records) == 1
    r = records[0]
    assert getattr(r, "search.mode") == "hybrid"
    assert len(getattr(r, "search.query_hash")) == 16
    assert getattr(r, "search.legs.knn.hits") > 0
    assert getattr(r, "search.fusion.k") == 10
    assert "secret" not in r.getMessage()
    assert all("secret" not in str(v) for v in r.__dict__.values())


async def test_closed_client_raises_a_typed_error(settings: SearchSettings) -> None:
    from storage import ClientClosed

    c = SearchClient.from_settings(settings, embedder=HashingEmbedder(dimensions=64))
    await c.aclose()
    with pytest.raises(ClientClosed):
        await c.search("x")


class _Counting(HashingEmbedder):
    """The hashing model, counting how often it is closed."""

    closed = 0

    async def aclose(self) -> None:
        self.closed += 1


async def test_a_client_closes_what_it_was_lent_only_when_told_and_a_factory_owns_what_it_is_given(
    settings: SearchSettings,
) -> None:
    """The caller's Elasticsearch client and embedder outlive the SearchClient they were lent to; with
    owns_clients=True the client closes them; from_settings() owns what it makes and what it is given."""
    es = AsyncElasticsearch(settings.url, request_timeout=10)
    try:
        mine = _Counting(dimensions=64)
        async with SearchClient(es, mine, settings) as lent:
            await lent.ensure_index()
        assert (await es.info()).body  # still the caller's, still open
        assert mine.closed == 0
        async with SearchClient.from_settings(settings, embedder=mine) as made:
            await made.ensure_index()
        assert mine.closed == 1
        owner = SearchClient(es, mine, settings, owns_clients=True)
        await owner.aclose()
        assert mine.closed == 2
    finally:
        await es.close()


async def test_a_generator_is_read_in_bounded_groups_as_the_writes_go(settings: SearchSettings) -> None:
    """index_documents reads a generator as it writes: never more than a few batches ahead of what is
    indexed (flat memory for any number of documents); every document is reported once."""
    small = settings.model_copy(update={"embed_batch_size": 16})
    indexed = [0]
    furthest = [0]

    def documents() -> Iterator[Document]:
        for i in range(2000):
            furthest[0] = max(furthest[0], i - indexed[0])
            yield Document(id=f"g{i}", text=f"streamed document {i}")

    async with SearchClient.from_settings(small, embedder=HashingEmbedder(dimensions=64)) as c:
        report = await c.index_documents(
            documents(), progress=lambda p: indexed.__setitem__(0, p.indexed_count), refresh=True
        )
        assert report.ok
        assert len(report.indexed) == 2000
        assert await c.documents.count() == 2000
    assert furthest[0] <= 16 * 8  # read at most a few batches ahead of the writes


async def test_an_input_that_raises_part_way_ends_the_ingest_with_a_report_for_every_document_read(
    client: SearchClient,
) -> None:
    await client.ensure_index()

    def documents() -> Iterator[Document | dict[str, str]]:
        for i in range(150):
            yield Document(id=f"r{i}", text=f"read before the failure {i}")
        yield {"id": "bad", "title": ""}  # (an invalid one among them)
        raise OSError("the source file went away")

    with pytest.raises(IngestInterrupted) as info:
        await client.index_documents(documents(), refresh=True)
    report = info.value.report
    assert isinstance(info.value.__cause__, OSError)
    assert set(report.indexed) == {f"r{i}" for i in range(150)}
    assert [f.id for f in report.failed] == ["bad"]
    assert await client.documents.count() == 150
    again = await client.index_documents(Document(id=f"r{i}", text=f"again {i}") for i in range(150))
    assert again.ok  # re-sending is safe
