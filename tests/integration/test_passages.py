"""Long documents read in passages, against the real Elasticsearch: every part of a document searchable by
vector, the passage that matched shown and cited, nothing half-indexed, old indices kept and moved."""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator, Sequence

import pytest
from elasticsearch import AsyncElasticsearch

from embeddings import HashingEmbedder, LocalEmbedder, Vector
from storage import Document, PassagesMismatch, SearchClient, SearchSettings
from storage._dsl.mapping import index_body
from storage.agent import assemble_context
from storage.passages import PassageSetting

pytestmark = pytest.mark.smoke

#: The window the test embedder reads: 40 words (a model reads 512 word pieces; the same thing, smaller).
WINDOW = 40
FILLER = "The weather service expects rain over the northern hills with mild winds in the afternoon. "
TAIL = "Zorblax Corporation raised its quarterly revenue on strong quantum widget sales."


def _long(doc_id: str, tail: str = TAIL, **fields: object) -> Document:
    """A report whose one relevant sentence comes after 30 sentences about something else."""
    return Document(id=doc_id, title="Annual report", text=FILLER * 30 + tail, **fields)  # type: ignore[arg-type]


DOCS = [
    _long("long", ticker="ZRB"),
    Document(id="short", title="Widget news", text="Widget makers expect steady sales.", ticker="WDG"),
    *[Document(id=f"weather-{i}", title="Forecast", text=FILLER * (i + 1), ticker="WX") for i in range(6)],
]


def _embedder() -> HashingEmbedder:
    return HashingEmbedder(dimensions=256, window_tokens=WINDOW)


@pytest.fixture
async def passages(settings: SearchSettings) -> AsyncIterator[SearchClient]:
    s = settings.model_copy(update={"passage_tokens": 24, "passage_overlap": 6})
    async with SearchClient.from_settings(s, embedder=_embedder()) as client:
        await client.ensure_index()
        report = await client.index_documents(DOCS, refresh=True)
        assert report.ok, report.failed
        yield client


async def test_the_knn_leg_finds_a_long_document_by_the_passage_that_matches_and_shows_it(
    passages: SearchClient, es: AsyncElasticsearch, settings: SearchSettings
) -> None:
    res = await passages.search("Zorblax quantum widget revenue", mode="knn", limit=3)
    top = res.hits[0]
    assert top.id == "long"
    best = top.passages[0]
    assert best.leg == "knn"
    assert best.score is not None
    assert "Zorblax" in best.text
    assert top.text[best.start : best.end] == best.text  # positions in the stored text: stored once
    assert top.highlight_source == "passage"
    assert "Zorblax" in top.highlights["text"][0]
    assert "passages" not in top.source  # the offsets come as passages, the vectors never
    # The same collection without passages: the document's one vector is its head, which never gets there.
    async with SearchClient.from_settings(
        settings.model_copy(update={"index": settings.index + "-heads", "passages": False}), embedder=_embedder()
    ) as heads:
        await heads.ensure_index()
        await heads.index_documents(DOCS, refresh=True)
        blind = await heads.search("Zorblax quantum widget revenue", mode="knn", limit=3)
        assert blind.ids[0] == "short"
        assert "long" not in blind.ids[:1]
        await heads.indices.delete()
    # Only a document over the window stores passages (the head first): a short one is stored as without them.
    stored = (await es.get(index=passages.index, id="long")).body["_source"]
    assert stored["passages"][0]["start"] == 0
    assert len(stored["passages"]) > 3
    assert all(set(p) == {"start", "end"} for p in stored["passages"])  # vectors and texts indexed, not stored
    short = (await es.get(index=passages.index, id="short")).body["_source"]
    assert "passages" not in short
    doc = await passages.documents.get("long")  # the document as given: the passages are the index's
    assert doc is not None
    assert doc.text == stored["text"]
    assert "passages" not in doc.model_dump()


QUERY = "Zorblax quantum widget revenue"
#: The query's words, one every few sentences: the same words and length as "long", never together.
SCATTERED = " ".join(f"{word} {FILLER}" for word in QUERY.split()) + FILLER * 26 + "Their outlook is unchanged."


async def test_bm25_ranks_a_long_document_whose_words_meet_in_one_passage_above_one_that_scatters_them(
    passages: SearchClient, es: AsyncElasticsearch
) -> None:
    await passages.index_documents([Document(id="scattered", title="Annual report", text=SCATTERED)], refresh=True)
    res = await passages.search(QUERY, mode="bm25", limit=5)
    assert res.ids[:2] == ["long", "scattered"]  # same words, same length: the one where they meet wins
    # A passage's text is indexed for its words (no positions): a quoted phrase counts as a phrase in the whole
    # text and as its words in a passage, never as a query the passages cannot answer.
    mapping = (await es.indices.get_mapping(index=passages.index)).body
    (fields,) = [m["mappings"]["properties"]["passages"]["properties"] for m in mapping.values()]
    assert fields["text"]["index_options"] == "freqs"
    phrase = await passages.search('"quantum widget" Zorblax', mode="bm25", limit=5)
    assert phrase.ids[0] == "long"
    stored = (await es.get(index=passages.index, id="long")).body["_source"]
    assert all(set(p) == {"start", "end"} for p in stored["passages"])  # passage texts indexed, not stored
    # Whole-text BM25 alone (an index without passages) cannot tell the two apart.
    async with SearchClient.from_settings(
        passages.settings.model_copy(update={"index": passages.index + "-heads", "passages": False}),
        embedder=_embedder(),
    ) as heads:
        await heads.ensure_index()
        both = [d for d in DOCS if d.id == "long"] + [Document(id="scattered", title="Annual report", text=SCATTERED)]
        await heads.index_documents(both, refresh=True)
        flat = {h.id: h.score for h in (await heads.leg_rankings(QUERY, mode="bm25", window=5))["bm25"]}
        assert flat["long"] == pytest.approx(flat["scattered"])
        await heads.indices.delete()
    # The walk's BM25 order is the same query's (its tail pages on with the leg's sort values).
    page = await passages.search_page(QUERY, mode="bm25", limit=2)
    assert page.ids == ["long", "scattered"]


async def test_a_readme_with_a_table_border_is_indexed_in_as_many_passages_as_its_length_needs(
    settings: SearchSettings, es: AsyncElasticsearch
) -> None:
    """The model's tokenizer cuts a ``+-----+`` border into one piece per character, glued: a word longer than a
    passage. It is cut inside, and the passages move on by about a passage each (they used to move on by one
    piece: thousands of passages, a bulk request Elasticsearch refused with a 413)."""
    border = "+" + "-" * 1500 + "+"
    text = "Connection parameters for the client follow in a table.\n" + f"{border}\n| host | the server |\n" * 3
    async with SearchClient.from_settings(settings, embedder=LocalEmbedder()) as client:
        await client.ensure_index()
        report = await client.index_documents([Document(id="readme", title="connector", text=text)], refresh=True)
        assert report.ok, report.failed
        stored = (await es.get(index=client.index, id="readme")).body["_source"]["passages"]
        # ~4,500 word pieces at 192 a passage, 48 shared: about 32 passages (one per piece would be ~4,500)
        assert 15 < len(stored) < 70
        res = await client.search("host server connection parameters", limit=1)
        assert res.ids == ["readme"]


class _Recording(HashingEmbedder):
    """The test embedder, keeping every document text it was asked to embed."""

    def __init__(self) -> None:
        super().__init__(dimensions=256, window_tokens=WINDOW)
        self.embedded: list[str] = []

    async def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        self.embedded += texts
        return await super().embed_documents(texts)


async def test_a_document_with_more_passages_than_its_index_allows_is_refused_before_it_is_embedded(
    settings: SearchSettings, es: AsyncElasticsearch
) -> None:
    embedder = _Recording()
    s = settings.model_copy(update={"passage_tokens": 24, "passage_overlap": 6})
    async with SearchClient.from_settings(s, embedder=embedder) as client:
        index = await client.ensure_index()
        await es.indices.put_settings(index=index, settings={"index.mapping.nested_objects.limit": 6})
        docs = [
            _long("huge", tail="Quibblefrotz appears in the huge report only."),  # ~25 passages
            Document(id="two", title="Annual report", text=FILLER * 4 + TAIL),  # a few passages: fits
            Document(id="short", title="Widget news", text="Widget makers expect steady sales."),
        ]
        report = await client.index_documents(docs, refresh=True)
    assert sorted(report.indexed) == ["short", "two"]
    (failed,) = report.failed
    assert (failed.id, failed.reason) == ("huge", "too_large")
    assert "index.mapping.nested_objects.limit" in failed.detail
    assert "6 nested objects" in failed.detail
    assert embedder.embedded
    assert not any("Quibblefrotz" in text for text in embedder.embedded)
    assert not (await es.exists(index=index, id="huge")).body
    stored = (await es.get(index=index, id="two")).body["_source"]
    assert 1 < len(stored["passages"]) <= 6
    # The bound is the server's own: exactly as many nested objects as the limit is a document it takes.
    count = len(stored["passages"])
    async with SearchClient.from_settings(s, embedder=embedder) as client:
        for limit, reasons in ((count, []), (count - 1, ["too_large"])):
            await es.indices.put_settings(index=index, settings={"index.mapping.nested_objects.limit": limit})
            again = await client.index_documents([docs[1].model_copy(update={"id": f"two-{limit}"})])
            assert [f.reason for f in again.failed] == reasons, limit


@pytest.mark.parametrize("version", [2, 3])
async def test_an_index_read_in_passages_the_old_way_keeps_working_until_reembed_moves_it(
    settings: SearchSettings, es: AsyncElasticsearch, version: int
) -> None:
    """An index made before heads were indexed flat (every vector nested, the head's ``embedding`` not
    indexed, passages left out of ``_source``; version 2: without the passages' text, 3: with their title and
    text): searched and written as it was (the nested kNN; version 2: whole-text BM25), until reembed
    rebuilds it in today's layout."""
    s = settings.model_copy(update={"passage_tokens": 24, "passage_overlap": 6})
    embedder = _embedder()
    body = index_body(
        dimensions=embedder.dimensions,
        normalized=embedder.normalized,
        model_id=embedder.model_id,
        analyzer=s.analyzer,
        passages=s.passage_setting(),
    )
    props = body["mappings"]["properties"]["passages"]["properties"]
    if version == 2:
        del props["text"]
    else:
        props["title"] = props["text"]
    body["mappings"]["properties"]["embedding"] = {"type": "dense_vector", "dims": embedder.dimensions, "index": False}
    body["mappings"]["_source"] = {"excludes": ["passages.vector", "passages.title", "passages.text"]}
    await es.indices.create(index=s.index + "-000001", aliases={s.index: {"is_write_index": True}}, **body)
    async with SearchClient.from_settings(s, embedder=embedder) as client:
        await client.ensure_index()
        report = await client.index_documents(DOCS, refresh=True)
        assert report.ok, report.failed
        res = await client.search(QUERY, limit=3)
        assert res.ids[0] == "long"
        assert res.hits[0].passages
        old = (await es.search(index=client.index, query={"match_all": {}}, size=10)).body["hits"]["hits"]
        assert all(h["_source"].get("passages") for h in old)  # a short document too: its head, nested
        moved = await client.indices.reembed(delete_old=True)  # the same model and setting: rebuilt in today's layout
        assert moved.promoted
        assert moved.embedded == len(DOCS)
        mapping = (await es.indices.get_mapping(index=client.index)).body
        assert all("text" in m["mappings"]["properties"]["passages"]["properties"] for m in mapping.values())
        assert all(m["mappings"]["properties"]["embedding"]["index"] for m in mapping.values())
        new = (await es.search(index=client.index, query={"match_all": {}}, size=10)).body["hits"]["hits"]
        nested = {h["_id"] for h in new if h["_source"].get("passages")}
        assert "long" in nested  # only a document over the window is nested
        assert "short" not in nested
        again_res = await client.search(QUERY, limit=3)
        assert again_res.ids[0] == "long"
        assert again_res.hits[0].passages
        again = await client.indices.reembed()
        assert again.target is None  # now nothing to do


async def test_a_passages_index_of_short_documents_searches_as_one_without_until_a_long_one_arrives(
    settings: SearchSettings,
) -> None:
    s = settings.model_copy(update={"passage_tokens": 24, "passage_overlap": 6})
    short = [d for d in DOCS if d.id in ("short", "weather-0")]
    async with SearchClient.from_settings(s, embedder=_embedder()) as writer:
        await writer.ensure_index()
        assert (await writer.health()).index.searches_passages is False  # a new index: nothing long
        assert (await writer.index_documents(short, refresh=True)).ok
        async with SearchClient.from_settings(s, embedder=_embedder()) as reader:
            assert (await reader.health()).index.searches_passages is False
            res = await reader.search("Zorblax quantum widget revenue", limit=2)
            assert res.ids[0] == "short"
            assert all(not h.passages for h in res.hits)
            assert (await writer.index_documents([DOCS[0]], refresh=True)).ok
            # The writer searches the passages at once; a reader at its next look (once a minute: now here).
            found = await writer.search("Zorblax quantum widget revenue", mode="knn", limit=1)
            assert found.ids == ["long"]
            assert "Zorblax" in found.hits[0].passages[0].text
            assert (await reader.health()).index.searches_passages is True
            seen = await reader.search("Zorblax quantum widget revenue", mode="knn", limit=1)
            assert seen.ids == ["long"]


async def test_a_document_stays_one_hit_with_its_filters_tenant_paging_and_walk(passages: SearchClient) -> None:
    res = await passages.search("rain widget revenue Zorblax", limit=8)
    assert len(res.ids) == len(set(res.ids))  # one hit per document, however many passages matched
    filtered = await passages.search("rain widget revenue Zorblax", filters={"ticker": "ZRB"}, limit=5)
    assert filtered.ids == ["long"]
    assert filtered.hits[0].passages
    keyword = await passages.search("Zorblax", mode="bm25", limit=1)
    (found,) = keyword.hits[0].passages  # the BM25 leg's: the stored passage that holds its fragment
    assert found.leg == "bm25"
    assert "Zorblax" in found.text
    walked: list[str] = []
    async with contextlib.aclosing(passages.walk("Zorblax rain", limit=3, window=4)) as pages:
        async for page in pages:
            walked += page.ids
            for hit in page.hits:
                if hit.id == "long" and "knn" in hit.ranks:
                    assert hit.passages
    assert "long" in walked
    assert len(walked) == len(set(walked))  # every document once
    legs = await passages.leg_rankings("Zorblax quantum widget revenue", mode="knn")
    assert legs["knn"][0].id == "long"


async def test_a_tight_context_keeps_the_passage_that_matched_even_when_weaker_ones_come_first_in_the_text(
    passages: SearchClient, es: AsyncElasticsearch
) -> None:
    res = await passages.search("Zorblax quantum widget revenue", mode="hybrid", limit=3)
    top = res.hits[0]
    assert top.id == "long"
    version = tuple(int(p) for p in (await es.info()).body["version"]["number"].split(".")[:2])
    if version < (8, 13):  # 8.12's nested kNN returns one inner hit per document (README: Versions)
        (best,) = top.passages
        assert "Zorblax" in best.text
        return
    assert len(top.passages) > 1
    assert "Zorblax" in top.passages[0].text  # the best passage: the last part of the text
    earlier = [p for p in top.passages if p.start < top.passages[0].start]
    assert earlier  # weaker passages the text reads first
    tight = len(top.passages[0].text) + 120  # room for the header and one passage
    context = assemble_context([top], max_context_chars=tight)
    assert "Zorblax" in context.text
    assert context.spans["long"] == [(top.passages[0].start, top.passages[0].end)]
    roomy = assemble_context([top], max_context_chars=100_000)
    assert [s for s, _ in roomy.spans["long"]] == sorted(s for s, _ in roomy.spans["long"])  # read in text order
    assert roomy.text.index("weather") < roomy.text.index("Zorblax")


class _Poisoned(HashingEmbedder):
    """Fails (a NaN vector) for any text with POISON in it: a passage the embedder cannot embed."""

    async def _embed_batch(self, texts: Sequence[str], kind: str) -> list[Vector]:  # type: ignore[override]
        vectors = await super()._embed_batch(texts, kind)  # type: ignore[arg-type]
        return [[math.nan] * len(v) if "POISON" in t else v for v, t in zip(vectors, texts, strict=True)]


async def test_a_document_one_of_whose_passages_fails_is_reported_and_not_written(settings: SearchSettings) -> None:
    poisoned = _long("poisoned", tail="POISON " + TAIL)
    async with SearchClient.from_settings(
        settings.model_copy(update={"passage_tokens": 24, "passage_overlap": 6}),
        embedder=_Poisoned(dimensions=64, window_tokens=WINDOW),
    ) as client:
        await client.ensure_index()
        report = await client.index_documents([poisoned, DOCS[1], DOCS[2]], refresh=True)
        assert [(f.id, f.reason) for f in report.failed] == [("poisoned", "embedding_failed")]
        assert sorted(report.indexed) == ["short", "weather-0"]
        assert len(report.indexed) + len(report.failed) == 3
        assert await client.documents.get("poisoned") is None  # never written with some passages missing


async def test_an_index_without_passages_keeps_working_and_reembed_moves_it(settings: SearchSettings) -> None:
    async with SearchClient.from_settings(settings.model_copy(update={"passages": False}), embedder=_embedder()) as old:
        await old.ensure_index()
        await old.index_documents(DOCS, refresh=True)
    async with SearchClient.from_settings(settings, embedder=_embedder()) as default:  # passages not set: follows
        await default.ensure_index()
        res = await default.search("Zorblax quantum widget revenue", mode="knn", limit=3)
        assert res.ids[0] == "short"  # as it was: heads only
        assert all(not h.passages for h in res.hits)
    explicit = settings.model_copy(update={"passages": True, "passage_tokens": 24, "passage_overlap": 6})
    async with SearchClient.from_settings(explicit, embedder=_embedder()) as mover:
        with pytest.raises(PassagesMismatch, match="reembed"):
            await mover.ensure_index()
        report = await mover.indices.reembed(delete_old=True)
        assert report.promoted
        assert report.embedded == len(DOCS)
        await mover.ensure_index()  # now it fits
        res = await mover.search("Zorblax quantum widget revenue", mode="knn", limit=3)
        assert res.ids[0] == "long"
        assert "Zorblax" in res.hits[0].passages[0].text


def test_a_passage_setting_round_trips_through_the_settings() -> None:
    s = SearchSettings(passage_tokens=100, passage_overlap=20)
    assert s.passage_setting() == PassageSetting(100, 20)
    assert s.passages_explicit()
    assert SearchSettings(passages=False).passage_setting() is None
    assert not SearchSettings().passages_explicit()
