"""Facets over the hybrid match set, one hit per group, diverse results (MMR) — against a real Elasticsearch."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from elasticsearch import AsyncElasticsearch

from embeddings import HashingEmbedder, ProviderUnavailable, Vector
from storage import Document, InvalidQuery, SearchClient, SearchSettings
from storage.agent import SearchTool

pytestmark = pytest.mark.smoke

TICKERS = ["AAPL", "MSFT", "NVDA", "AMZN"]
SOURCES = ["reuters", "bloomberg", "ft"]
DOCS = [
    Document(
        id=f"doc-{i}",
        title=f"{TICKERS[i % 4]} quarterly note {i}",
        text=f"{TICKERS[i % 4]} revenue and margins in quarter {i % 5}; "
        + ("guidance raised" if i % 3 == 0 else "supply chain update")
        + f" number {i}",
        ticker=TICKERS[i % 4],
        source=SOURCES[i % 3],
        published_at=f"{2022 + i % 3}-0{1 + i % 9}-15",
        metadata={"region": ["us", "eu"][i % 2]},
    )
    for i in range(24)
] + [Document(id="weather", title="Weather", text="Rain tomorrow and sun on sunday", ticker="ZZZ", source="ft")]


@pytest.fixture
async def loaded(settings: SearchSettings) -> AsyncIterator[SearchClient]:
    async with SearchClient.from_settings(settings, embedder=HashingEmbedder(dimensions=256)) as client:
        await client.ensure_index()
        assert (await client.index_documents(DOCS, refresh=True)).ok
        yield client


async def _match_set(client: SearchClient, query: str) -> set[str]:
    """The hybrid match set computed another way: every BM25 match, and the kNN leg's window."""
    legs = await client.leg_rankings(query, window=100)
    return {h.id for h in legs["bm25"]} | {h.id for h in legs["knn"]}


async def test_facets_equal_a_direct_count_over_the_union_of_both_legs_matches(loaded: SearchClient) -> None:
    res = await loaded.search("guidance raised", facets=["ticker", "source:2", "published_at:year", "metadata.region"])
    assert res.facets is not None
    assert res.facets.over == ["bm25", "knn"]
    assert not res.facets.partial
    matched = [d for d in DOCS if d.id in await _match_set(loaded, "guidance raised")]
    expected = Counter(d.ticker for d in matched)
    assert {b.value: b.count for b in res.facets.counts["ticker"].buckets} == dict(expected)
    sources = Counter(d.source for d in matched)
    top2 = sorted(sources.items(), key=lambda kv: (-kv[1], kv[0]))[:2]  # most frequent, ties by value
    assert [(b.value, b.count) for b in res.facets.counts["source"].buckets] == top2
    years = Counter(str(d.published_at)[:4] for d in matched if d.published_at)
    assert {b.value[:4]: b.count for b in res.facets.counts["published_at"].buckets} == dict(years)
    regions = Counter(str((d.metadata or {}).get("region")) for d in matched if d.metadata)
    assert {b.value: b.count for b in res.facets.counts["metadata.region"].buckets} == dict(regions)
    assert res.facets.counts["metadata.region"].kind == "terms"


async def test_facets_respect_filters_and_never_change_the_hits(loaded: SearchClient) -> None:
    plain = await loaded.search("revenue margins", filters={"source": "reuters"})
    faceted = await loaded.search("revenue margins", filters={"source": "reuters"}, facets=["source", "ticker"])
    assert faceted.ids == plain.ids
    assert faceted.facets is not None
    assert [(b.value, b.count > 0) for b in faceted.facets.counts["source"].buckets] == [("reuters", True)]


async def test_bm25_facets_count_every_keyword_match_and_date_ranges_bucket_them(loaded: SearchClient) -> None:
    res = await loaded.search("supply chain", mode="bm25", facets=["published_at:2023..2024,2024.."])
    assert res.facets is not None
    assert res.facets.over == ["bm25"]
    matched = [d for d in DOCS if "supply chain" in d.text]
    in_2023 = sum(1 for d in matched if str(d.published_at).startswith("2023"))
    later = sum(1 for d in matched if str(d.published_at) >= "2024")
    assert [b.count for b in res.facets.counts["published_at"].buckets] == [in_2023, later]


class _NoQueries(HashingEmbedder):
    """Embeds documents, fails every query: the kNN leg is down, BM25 answers."""

    async def embed_query(self, text: str) -> Vector:
        raise ProviderUnavailable("embedding service down")


async def test_a_degraded_search_still_counts_what_answered_and_says_so(
    loaded: SearchClient, settings: SearchSettings
) -> None:
    async with SearchClient.from_settings(settings, embedder=_NoQueries(dimensions=256)) as broken:
        res = await broken.search("guidance raised", facets=["ticker"])
    assert res.degraded
    assert res.degradation.legs_failed == ["knn"]
    assert res.facets is not None
    assert res.facets.over == ["bm25"]
    assert res.facets.partial
    bm25 = [d for d in DOCS if "guidance raised" in d.text]
    assert sum(b.count for b in res.facets.counts["ticker"].buckets) == len(bm25)


@pytest.mark.parametrize("arrange", [{"group_by": "ticker"}, {"diversity": 0.5}])
async def test_a_degraded_search_still_groups_and_diversifies_what_answered(
    loaded: SearchClient, settings: SearchSettings, arrange: dict[str, Any]
) -> None:
    async with SearchClient.from_settings(settings, embedder=_NoQueries(dimensions=256)) as broken:
        res = await broken.search("guidance raised", limit=3, **arrange)
    assert res.degradation is not None
    assert res.degradation.legs_failed == ["knn"]
    assert res.hits
    assert all("bm25" in h.ranks for h in res.hits)


async def test_an_unmapped_or_unaggregatable_facet_is_invalid_query(loaded: SearchClient) -> None:
    with pytest.raises(InvalidQuery, match="unmapped"):
        await loaded.search("revenue", facets=["metadata.nosuch"])
    with pytest.raises(InvalidQuery, match="full text cannot be counted"):
        await loaded.search("revenue", facets=["text"])
    with pytest.raises(InvalidQuery, match="ranges need a number, and it is mapped as keyword"):
        await loaded.search("revenue", facets=["metadata.region:0..5"])


@pytest.mark.parametrize("mode", ["hybrid", "bm25", "knn"])
async def test_groups_never_repeat_and_page_over_groups(loaded: SearchClient, mode: str) -> None:
    first = await loaded.search("revenue margins quarter", mode=mode, group_by="ticker", per_group=2, limit=2)  # type: ignore[arg-type]
    second = await loaded.search(
        "revenue margins quarter",
        mode=mode,
        group_by="ticker",
        per_group=2,
        limit=2,
        offset=2,  # type: ignore[arg-type]
    )
    assert first.groups is not None
    assert second.groups is not None
    values = [g.value for g in first.groups + second.groups]
    assert len(values) == len(set(values)) == 4  # four tickers, never one twice, across pages
    tickers = {d.id: d.ticker for d in DOCS}
    for group in first.groups:
        assert 1 <= len(group.ids) <= 2
        assert {tickers[i] for i in group.ids} == {group.value}
        assert group.known_matches >= len(group.ids)
    assert first.ids == [i for g in first.groups for i in g.ids]  # hits in group order


WALK_DOCS = [
    Document(
        id=f"w-{i:02d}",
        title=f"Filing {i}",
        text="revenue " * (1 + i % 7) + f"outlook note {i}",
        ticker=None if i % 9 == 0 else f"T{i % 11}",
    )
    for i in range(60)
]


async def _walk_groups(client: SearchClient, page_size: int) -> list[tuple[str | None, list[str]]]:
    out: list[tuple[str | None, list[str]]] = []
    cursor: str | None = None
    while True:
        page = await client.search_page(
            "revenue outlook", group_by="ticker", per_group=2, window=4, limit=page_size, cursor=cursor
        )
        assert page.groups is not None
        assert len(page.groups) <= page_size
        assert page.ids == [i for g in page.groups for i in g.ids]  # hits in group order
        out += [(g.value, g.ids) for g in page.groups]
        cursor = page.next_cursor
        if cursor is None:
            return out


async def test_a_grouped_walk_reaches_every_group_once_with_stable_pages(settings: SearchSettings) -> None:
    async with SearchClient.from_settings(settings, embedder=HashingEmbedder(dimensions=256)) as client:
        await client.ensure_index()
        assert (await client.index_documents(WALK_DOCS, refresh=True)).ok
        walked = await _walk_groups(client, page_size=3)
        assert walked == await _walk_groups(client, page_size=1)  # the same order whatever the page size
        values = [v for v, _ in walked if v is not None]
        assert len(values) == len(set(values)) == 11  # every ticker, once: head (depth 4) and tail
        ids = [i for _, group in walked for i in group]
        assert len(ids) == len(set(ids))
        tickers = {d.id: d.ticker for d in WALK_DOCS}
        for value, group in walked:
            assert 1 <= len(group) <= (2 if value is not None else 1)
            assert {tickers[i] for i in group} == {value}
        loose = sorted(i for v, group in walked if v is None for i in group)
        assert loose == sorted(d.id for d in WALK_DOCS if d.ticker is None)  # each a group of its own
        # A group with no hit in the head (each leg's top 4) holds its best BM25 matches.
        head = await client.leg_rankings("revenue outlook", window=4)
        head_values = {tickers[h.id] for hits in head.values() for h in hits}
        scores = {
            h.id: h.score for h in (await client.leg_rankings("revenue outlook", mode="bm25", window=100))["bm25"]
        }
        below = [(v, g) for v, g in walked if v is not None and v not in head_values]
        assert below  # the tail was reached
        for value, group in below:
            others = [scores[d.id] for d in WALK_DOCS if d.ticker == value and d.id not in group]
            assert min(scores[i] for i in group) >= max(others, default=0.0) - 1e-6


async def test_grouping_by_a_metadata_key(loaded: SearchClient) -> None:
    res = await loaded.search("revenue", group_by="metadata.region", limit=5)
    assert res.groups is not None
    assert sorted(g.value for g in res.groups if g.value) == ["eu", "us"]  # (and the one without metadata)


@pytest.mark.parametrize("layout", ["vectors out of _source", "vectors in _source (built before mapping 2)"])
async def test_diversity_zero_is_todays_order_and_exact_duplicates_are_spread_out(
    settings: SearchSettings, layout: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    story = "Chipmaker Zorblax recalls its flagship processor over overheating reports"
    copies = [Document(id=f"copy-{i}", title="Zorblax recall", text=story) for i in range(4)]
    others = [
        Document(id=f"other-{i}", title=f"Zorblax note {i}", text=f"Zorblax {w} news" + " filler" * i)
        for i, w in enumerate(["earnings", "hiring", "factory", "lawsuit"])
    ]
    if layout.startswith("vectors in"):  # as this library built indices before (and does on a server < 8.17)
        monkeypatch.setattr("storage._indexing.indices.vectors_in_source_for", lambda server: True)
    async with SearchClient.from_settings(settings, embedder=HashingEmbedder(dimensions=256)) as client:
        await client.ensure_index()
        await client.index_documents(copies + others, refresh=True)
        # (what the mapping asks the server to keep: a GET shows vectors differently across versions, 9.2+
        # hides them unless asked)
        mapping = (await client.elasticsearch.indices.get_mapping(index=settings.index)).body
        excludes = next(iter(mapping.values()))["mappings"].get("_source", {}).get("excludes", [])
        assert ("embedding" in excludes) == layout.startswith("vectors out")
        query = "Zorblax recalls flagship processor overheating"
        today = await client.search(query, limit=5)
        assert today.ids[:4] == sorted(today.ids[:4])
        assert all(i.startswith("copy-") for i in today.ids[:4])
        assert (await client.search(query, limit=5, diversity=0.0)).ids == today.ids
        diverse = await client.search(query, limit=5, diversity=0.5)
        assert diverse.ids[0] == today.ids[0]
        assert sum(i.startswith("copy-") for i in diverse.ids[:3]) == 1  # one copy, then distinct stories
        assert sorted(diverse.ids) != sorted(today.ids) or diverse.ids != today.ids


async def test_the_agent_tool_counts_matches_when_asked(loaded: SearchClient) -> None:
    tool = SearchTool(loaded, allowed_filters=("ticker",), limit=3)
    text = await tool.run({"query": "guidance raised", "facets": ["ticker"]})
    assert "Counts over all matches — ticker: " in text
    refused = await tool.run({"query": "guidance raised", "facets": ["title"]})
    assert refused.startswith("Error:")


async def test_the_agent_tool_shows_one_result_per_ticker_when_asked(loaded: SearchClient) -> None:
    tool = SearchTool(loaded, limit=4)
    text = await tool.run({"query": "revenue margins quarter", "one_per": "ticker"})
    assert "One result per ticker." in text
    cited = [line.split("]")[0].split("[#")[1] for line in text.splitlines() if "[#" in line and "]" in line][1:]
    tickers = {d.id: d.ticker for d in DOCS}
    assert len(cited) == 4
    assert len({tickers[i] for i in cited}) == 4  # four results, four tickers
    refused = await tool.run({"query": "revenue", "one_per": "title"})
    assert refused.startswith("Error:")
    assert "one_per" not in SearchTool(loaded, groups=False).parameters_schema()["properties"]


def _ids(hits: Sequence[object]) -> list[str]:
    return [str(getattr(h, "id", "")) for h in hits]


async def test_facets_use_the_same_tenant_as_the_hits(settings: SearchSettings, es: AsyncElasticsearch) -> None:
    tenanted = settings.model_copy(update={"multi_tenant": True})
    async with SearchClient.from_settings(tenanted, embedder=HashingEmbedder(dimensions=256)) as client:
        await client.ensure_index()
        await client.index_documents(DOCS[:8], tenant_id="acme", refresh=True)
        await client.index_documents(DOCS[8:], tenant_id="globex", refresh=True)
        res = await client.search("revenue", tenant_id="acme", facets=["ticker"])
    assert res.facets is not None
    assert sum(b.count for b in res.facets.counts["ticker"].buckets) <= 8
    assert set(_ids(res.hits)) <= {d.id for d in DOCS[:8]}
