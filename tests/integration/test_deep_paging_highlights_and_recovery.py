"""Search depth on the real Elasticsearch: deep paging, highlights for every hit, zero-result recovery and
one round trip."""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest
from elasticsearch import AsyncElasticsearch

from embeddings import HashingEmbedder, OpenAIEmbedder
from storage import CursorExpired, Document, IndexNotFound, InvalidQuery, SearchClient, SearchFailed, SearchSettings

WALK = [
    Document(id=f"w{i:03d}", title=f"report {i}", text=f"common shared words item {i} " + "filler " * (i % 7))
    for i in range(300)
]


async def _open_contexts(es: AsyncElasticsearch) -> int:
    stats = await es.nodes.stats(metric="indices", index_metric="search")
    return sum(n["indices"]["search"]["open_contexts"] for n in stats.body["nodes"].values())


@pytest.mark.smoke
async def test_a_cursor_walk_returns_every_document_exactly_once_while_writes_happen(
    client: SearchClient, es: AsyncElasticsearch
) -> None:
    await client.ensure_index()
    assert (await client.index_documents(WALK, refresh=True)).ok
    depth, page_size = 60, 25  # a small head so that the walk goes well into the BM25 tail

    writes_done = asyncio.Event()

    async def write_meanwhile() -> None:
        for batch in range(5):
            new = [Document(id=f"new-{batch}-{i}", text=f"common words arriving later {i}") for i in range(10)]
            await client.index_documents(new, refresh=True)
            await asyncio.sleep(0.01)
        writes_done.set()

    writer = asyncio.create_task(write_meanwhile())
    walked: list[str] = []
    positions: list[int] = []
    pages = 0
    started = time.perf_counter()
    cursor: str | None = None
    while True:
        page = await client.search_page("common words", cursor=cursor, limit=page_size, window=depth)
        pages += 1
        if pages == 1:
            await writes_done.wait()  # every concurrent write lands before page 2
        walked += page.ids
        positions += [h.position or 0 for h in page.hits]
        assert all(h.source.get("text") for h in page.hits)
        cursor = page.next_cursor
        if cursor is None:
            break
    elapsed = time.perf_counter() - started
    await writer
    assert len(walked) == len(set(walked)) == len(WALK)
    assert set(walked) == {d.id for d in WALK}  # none of the 50 written during the walk
    assert positions == list(range(1, len(WALK) + 1))
    assert await client.documents.count() == len(WALK) + 50
    assert await _open_contexts(es) == 0  # the point-in-time was closed when the walk ended
    print(f"\nwalk: {len(walked)} documents in {pages} pages of {page_size} (depth {depth}), {elapsed:.2f} s")


async def test_a_walk_can_be_ended_early_and_a_closed_cursor_is_expired(
    client: SearchClient, es: AsyncElasticsearch
) -> None:
    await client.ensure_index()
    await client.index_documents(WALK[:40], refresh=True)
    page = await client.search_page("common", limit=10)
    assert page.next_cursor is not None
    assert await _open_contexts(es) >= 1
    await client.close_cursor(page.next_cursor)
    assert await _open_contexts(es) == 0
    with pytest.raises(CursorExpired):
        await client.search_page("common", cursor=page.next_cursor, limit=10)
    await client.close_cursor(page.next_cursor)  # idempotent


async def test_a_cursor_cannot_be_reused_for_another_search(client: SearchClient) -> None:
    await client.ensure_index()
    await client.index_documents(WALK[:40], refresh=True)
    page = await client.search_page("common", filters={"doc_type": "news"}, limit=5, mode="bm25")
    assert page.next_cursor is None  # nothing is news: an empty walk ends at once
    page = await client.search_page("common", limit=5, tenant_id="t1")
    assert page.ids == []
    page = await client.search_page("common", limit=5)
    assert page.next_cursor is not None
    with pytest.raises(InvalidQuery, match="another search"):
        await client.search_page("common", cursor=page.next_cursor, tenant_id="t2", limit=5)
    with pytest.raises(InvalidQuery, match="cursor"):
        await client.search_page("common", cursor="forged", limit=5)
    await client.close_cursor(page.next_cursor)


async def test_walk_closes_its_point_in_time_when_left_early(client: SearchClient, es: AsyncElasticsearch) -> None:
    await client.ensure_index()
    await client.index_documents(WALK[:40], refresh=True)
    async with contextlib.aclosing(client.walk("common", limit=5)) as pages:
        async for page in pages:
            assert page.page == 1
            break
    assert await _open_contexts(es) == 0


async def test_a_first_page_that_fails_closes_the_point_in_time_it_opened(
    settings: SearchSettings, client: SearchClient, es: AsyncElasticsearch
) -> None:
    """The walk opened a point-in-time, then its first page failed (a walk is strict: the kNN leg's embedder is
    down): the caller has no cursor to close it with, so the walk closes it; retries leak nothing."""
    await client.ensure_index()
    await client.index_documents(WALK[:20], refresh=True)
    dead = OpenAIEmbedder(model="m", dimensions=64, base_url="http://127.0.0.1:9/v1", api_key="k", timeout_s=1)
    async with SearchClient(client.elasticsearch, dead, settings, owns_clients=False) as c:
        for _ in range(3):
            with pytest.raises(SearchFailed):
                await c.search_page("common", limit=5)
    await dead.aclose()
    assert await _open_contexts(es) == 0


@pytest.mark.smoke
async def test_a_knn_only_hit_carries_a_highlight_from_one_follow_up(client: SearchClient) -> None:
    await client.ensure_index()
    docs = [
        # BM25's favourite: both terms in the boosted title and the text.
        Document(id="b-keyword", title="alpha beta", text="alpha beta alpha beta and many more words here"),
        # kNN's favourite: exactly the query's tokens (cosine 1 with the hashing embedder).
        Document(id="a-vector", text="alpha beta"),
        Document(id="c-other", text="zeta eta theta"),
    ]
    await client.index_documents(docs, refresh=True)
    one = await client.search("alpha beta", window=1, limit=1)  # each leg returns only its favourite
    (hit,) = one.hits
    assert hit.id == "a-vector"
    assert set(hit.ranks) == {"knn"}
    assert hit.highlight_source == "followup"
    assert "<em>alpha</em>" in " ".join(hit.highlights["text"])

    res = await client.search("alpha beta", window=10, limit=10)
    by_id = {h.id: h for h in res.hits}
    assert by_id["b-keyword"].highlight_source == "bm25"
    assert by_id["c-other"].highlight_source == "snippet"  # no query term in it: the text's start
    assert by_id["c-other"].highlights["text"] == ["zeta eta theta"]
    assert res.completeness.highlights_complete
    plain = await client.search("alpha beta", window=10, limit=10, highlight=False)
    assert all(h.highlights == {} and h.highlight_source is None for h in plain.hits)


async def test_a_text_longer_than_the_highlighter_reads_is_found_and_shown_in_every_mode(client: SearchClient) -> None:
    # Elasticsearch's highlighter reads 1,000,000 characters of a text by default and fails the whole request
    # for a longer one unless told to stop there: one such document would fail every search that shows it.
    await client.ensure_index()
    book = "chapter words fill the pages. " * 36_000 + "the quokka appears at the very end."
    assert len(book) > 1_000_000
    await client.index_documents(
        [
            Document(id="book", title="a long book", text=book),
            Document(id="note", title="quokka note", text="a quokka is a small marsupial"),
        ],
        refresh=True,
    )
    for mode in ("bm25", "knn", "hybrid"):
        res = await client.search("quokka", mode=mode, limit=5)
        assert set(res.ids) >= ({"book", "note"} if mode != "knn" else {"note"}), mode
        assert res.completeness.highlights_complete, mode
        note = next(h for h in res.hits if h.id == "note")
        assert "<em>quokka</em>" in " ".join(note.highlights["text"]), mode
    book_hit = next(h for h in (await client.search("quokka", mode="bm25")).hits if h.id == "book")
    # Its match lies past what the highlighter reads: it shows the text's start, found all the same.
    assert book_hit.highlights["text"][0].startswith("chapter words fill the pages.")


async def test_a_lowered_highlight_limit_of_the_index_is_honoured(
    client: SearchClient, settings: SearchSettings, es: AsyncElasticsearch
) -> None:
    index = await client.ensure_index()
    await es.indices.put_settings(index=index, settings={"index.highlight.max_analyzed_offset": 5_000})
    text = "filler words " * 1_000 + "the quokka hides here."  # the match past 5,000 characters
    await client.index_documents(
        [Document(id="long", text=text), Document(id="short", text="a quokka in plain sight")], refresh=True
    )
    # A client that reads the index now (another process, or this one within a minute) asks for no more.
    async with SearchClient.from_settings(settings, embedder=HashingEmbedder(dimensions=64)) as fresh:
        res = await fresh.search("quokka", limit=5)
    assert set(res.ids) == {"long", "short"}
    by_id = {h.id: h for h in res.hits}
    assert "<em>quokka</em>" in " ".join(by_id["short"].highlights["text"])
    assert "quokka" not in " ".join(by_id["long"].highlights["text"])


async def test_a_misspelt_query_finds_its_document_through_the_fuzzy_retry(client: SearchClient) -> None:
    await client.ensure_index()
    await client.index_documents(
        [
            Document(id="guidance", text="Apple lowered its revenue guidance for the quarter", ticker="AAPL"),
            Document(id="weather", text="Rain and mild temperatures expected", ticker="WX", doc_type="blog"),
        ],
        refresh=True,
    )
    plain = await client.search("revnue guidanse", mode="bm25")
    assert plain.hits == []
    assert plain.recovery == []
    res = await client.search("revnue guidanse", mode="bm25", recover=True)
    assert res.ids == ["guidance"]
    assert res.recovery == ["fuzzy"]
    hybrid = await client.search("revnue guidanse", recover=True)
    assert hybrid.recovery == ["fuzzy"]
    assert hybrid.hits[0].id == "guidance"
    assert "bm25" in hybrid.hits[0].ranks


async def test_a_scope_cascade_widens_filters_step_by_step_and_says_which_tier_served(
    client: SearchClient,
) -> None:
    await client.ensure_index()
    await client.index_documents(
        [
            Document(id="aapl", text="revenue guidance", ticker="AAPL", doc_type="news"),
            Document(id="msft", text="revenue guidance", ticker="MSFT", doc_type="filing"),
        ],
        refresh=True,
    )
    scopes = [{"doc_type": "filing"}, {}]
    res = await client.search("revenue", mode="bm25", filters={"ticker": "ZZZ"}, scopes=scopes)
    assert res.ids == ["msft"]
    assert res.scope_tier == 1
    assert res.recovery == ["scope"]
    served_first = await client.search("revenue", mode="bm25", filters={"ticker": "AAPL"}, scopes=scopes)
    assert served_first.scope_tier == 0
    assert served_first.ids == ["aapl"]
    # A tenant is never widened away.
    none = await client.search("revenue", mode="bm25", filters={"ticker": "ZZZ"}, scopes=scopes, tenant_id="t9")
    assert none.hits == []
    assert none.scope_tier == 2


@pytest.mark.smoke
async def test_msearch_and_parallel_return_identical_fused_results(client: SearchClient) -> None:
    await client.ensure_index()
    await client.index_documents(WALK[:120], refresh=True)
    for query, mode in [("common words", "hybrid"), ("report 7 filler", "hybrid"), ("item", "bm25"), ("x", "knn")]:
        a = await client.search(query, mode=mode, round_trip="parallel", limit=20)  # type: ignore[arg-type]
        b = await client.search(query, mode=mode, round_trip="msearch", limit=20)  # type: ignore[arg-type]
        assert b.round_trip == "msearch"
        assert [(h.id, h.score, h.ranks) for h in a.hits] == [(h.id, h.score, h.ranks) for h in b.hits]
        assert [h.highlights for h in a.hits] == [h.highlights for h in b.hits]


async def test_msearch_degrades_like_parallel_when_a_leg_fails(settings: SearchSettings, client: SearchClient) -> None:
    await client.ensure_index()
    await client.index_documents(WALK[:20], refresh=True)
    dead = OpenAIEmbedder(model="m", dimensions=64, base_url="http://127.0.0.1:9/v1", api_key="k", timeout_s=1)
    async with SearchClient(client.elasticsearch, dead, settings, owns_clients=False) as c:
        res = await c.search("common", round_trip="msearch")
    await dead.aclose()
    assert res.degraded
    assert res.degradation.legs_failed == ["knn"]
    assert res.degradation.reason == "connection_error"
    assert res.hits
    missing = SearchSettings(url=settings.url, index="no-such-index-anywhere")
    async with SearchClient.from_settings(missing, embedder=HashingEmbedder(dimensions=64)) as c:
        with pytest.raises(IndexNotFound):
            await c.search("common", round_trip="msearch")


@pytest.mark.smoke
async def test_the_query_syntax_runs_as_safe_query_dsl_on_both_legs(client: SearchClient) -> None:
    await client.ensure_index()
    await client.index_documents(
        [
            Document(id="aapl-china", text="Apple revenue fell in China", ticker="AAPL", published_at="2024-06-03"),
            Document(id="aapl-us", text="Apple revenue grew in the US", ticker="AAPL", published_at="2024-06-20"),
            Document(id="aapl-old", text="Apple revenue grew in the US", ticker="AAPL", published_at="2023-06-20"),
            Document(id="msft", text="Microsoft cloud revenue grew", ticker="MSFT", doc_type="10-K"),
        ],
        refresh=True,
    )
    res = await client.search("revenue NOT china ticker:AAPL date:2024-06", syntax="boolean", mode="bm25")
    assert res.ids == ["aapl-us"]
    hybrid = await client.search("revenue NOT china ticker:AAPL date:2024-06", syntax="boolean")
    assert set(hybrid.ids) <= {"aapl-us", "aapl-china"}  # kNN honours the prefixes as filters too
    assert hybrid.ids[0] == "aapl-us"
    phrase = await client.search('type:10-K ("cloud revenue" OR china)', syntax="boolean", mode="bm25")
    assert phrase.ids == ["msft"]
    plain = await client.search("revenue NOT china ticker:AAPL", mode="bm25")  # default: plain words
    assert "aapl-china" in plain.ids
    page = await client.search_page("revenue -china ticker:AAPL", syntax="boolean", mode="bm25", limit=5)
    assert set(page.ids) == {"aapl-us", "aapl-old"}
    with pytest.raises(InvalidQuery, match="position 8"):
        await client.search("revenue AND", syntax="boolean")
