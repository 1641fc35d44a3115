"""The production-like local node: English stemming by default, `GET /`, and which client/server majors talk.

The local launcher installs two plugins built from the distribution's own jars (storage.local_es._plugins);
these tests run on such a node, so they prove both the plugins and what the library does with them.
"""

from __future__ import annotations

import logging
import uuid

import elasticsearch
import pytest
from elasticsearch import AsyncElasticsearch

from embeddings import HashingEmbedder
from storage import (
    AnalyzerUnavailable,
    ConfigurationError,
    Document,
    IncompatibleServer,
    IndexNotFound,
    InvalidQuery,
    SearchClient,
    SearchSettings,
)
from storage._transport.translate import map_es_error
from storage.local_es import VERSION_8, LocalElasticsearch

CLIENT_MAJOR = int(elasticsearch.__versionstr__.split(".")[0])
DOCS = [
    Document(id="a", title="Runners", text="The runners were running through the hills"),
    Document(id="b", title="Studies", text="Studies of mice and of a mouse"),
    Document(id="c", title="Other", text="Nothing related here at all"),
]


def _client(settings: SearchSettings, **changes: object) -> SearchClient:
    return SearchClient.from_settings(settings.model_copy(update=changes), embedder=HashingEmbedder(dimensions=64))


ACCENTED = [
    Document(id="cafe", title="Café naïve résumé", text="Nestlé and Société Générale met Søren at the café."),
    Document(id="plain", title="Cafe naive resume", text="Nestle and Societe Generale met Soren at the cafe."),
]


@pytest.mark.smoke
async def test_the_default_analyzer_stems_english_and_folds_accents(
    settings: SearchSettings, es: AsyncElasticsearch
) -> None:
    assert SearchSettings.model_fields["analyzer"].default == "english_folded"
    async with _client(settings) as c:
        index = await c.ensure_index()
        await c.index_documents([*DOCS, *ACCENTED], refresh=True)
        mapping = await es.indices.get_mapping(index=index)
        assert mapping[index]["mappings"]["properties"]["text"]["analyzer"] == "english_folded"
        assert [h.id for h in (await c.search("run", mode="bm25")).hits] == ["a"]
        assert [h.id for h in (await c.search("study", mode="bm25")).hits] == ["b"]
        assert (await c.search("the", mode="bm25")).hits == []  # a stopword matches nothing
        for query in ("cafe naive resume", "Café naïve résumé", "Nestle", "Société Générale", "soren"):
            assert sorted((await c.search(query, mode="bm25")).ids) == ["cafe", "plain"], query


async def test_an_index_analysed_without_folding_keeps_it_until_reembed_rebuilds_it(settings: SearchSettings) -> None:
    async with _client(settings, analyzer="english") as old:
        await old.ensure_index()
        await old.index_documents(ACCENTED, refresh=True)
        assert (await old.search("cafe naive", mode="bm25")).ids == ["plain"]  # "café" is not "cafe" there
    async with _client(settings) as c:  # configured with the default (english_folded) now
        await c.ensure_index()
        assert (await c.search("cafe naive", mode="bm25")).ids == ["plain"]  # the index keeps its analyzer
        report = await c.indices.reembed(delete_old=True)
        assert report.promoted, report
        assert sorted((await c.search("cafe naive", mode="bm25")).ids) == ["cafe", "plain"]
        assert (await c.indices.reembed()).target is None  # the same model, the configured analyzer: nothing to do


async def test_an_analyzer_the_server_lacks_is_a_typed_error_and_creates_nothing(
    settings: SearchSettings, es: AsyncElasticsearch
) -> None:
    async with _client(settings, analyzer="klingon") as c:
        with pytest.raises(AnalyzerUnavailable) as info:
            await c.ensure_index()
        assert "ES_ANALYZER=standard" in str(info.value)
        assert "analysis-common" in str(info.value)
        with pytest.raises(AnalyzerUnavailable):
            await c.indices.create_version()
    assert not (await es.indices.get(index=f"{settings.index}*", expand_wildcards="all")).body


async def test_an_existing_index_keeps_its_analyzer_until_a_new_version_is_promoted(
    settings: SearchSettings, caplog: pytest.LogCaptureFixture
) -> None:
    async with _client(settings, analyzer="standard") as old:
        await old.ensure_index()
        await old.index_documents(DOCS, refresh=True)
        assert (await old.search("run", mode="bm25")).hits == []  # unstemmed: "run" is not "running"
    caplog.set_level(logging.WARNING, logger="storage")
    async with _client(settings) as c:  # now configured with the default (english)
        await c.ensure_index()
        assert any(getattr(r, "event.action", None) == "index.analyzer_differs" for r in caplog.records)
        assert (await c.search("run", mode="bm25")).hits == []  # the existing index kept its analyzer
        new = await c.indices.create_version()
        await c.index_documents(DOCS, index=new, refresh=True)
        await c.indices.promote(new, delete_old=True)
        assert [h.id for h in (await c.search("run", mode="bm25")).hits] == ["a"]


async def test_only_a_version_of_the_alias_is_promoted_and_a_lost_alias_is_named(
    settings: SearchSettings, es: AsyncElasticsearch
) -> None:
    other = settings.model_copy(update={"index": f"{settings.index}-another"})
    foreign = f"{settings.index}-plain"
    async with _client(settings) as c, _client(other) as o:
        mine = await c.ensure_index()
        theirs = await o.ensure_index()
        await c.index_documents(DOCS, refresh=True)
        await es.indices.create(index=foreign)
        try:
            # Another alias's version, a plain index, a name that only looks like a version: refused before
            # anything moves (the alias pointed at another collection, and delete_old deleted this one's).
            for name in (theirs, foreign, f"{mine}0", f"x{mine}"):
                with pytest.raises(InvalidQuery, match=f"not a version of the alias '{settings.index}'"):
                    await c.indices.promote(name, delete_old=True)
            assert list((await es.indices.get_alias(name=settings.index)).body) == [mine]
            assert await c.documents.count() == len(DOCS)
            # The alias removed by hand: ensure_index() says so and how to put it back (was "vanished").
            await es.indices.delete_alias(index=mine, name=settings.index)
            with pytest.raises(ConfigurationError, match=r"exists but the alias .* does not point at it"):
                await c.ensure_index()
        finally:
            await es.options(ignore_status=404).indices.delete(index=f"{foreign},{mine}")
            await o.indices.delete()


async def test_a_write_to_an_index_this_library_did_not_make_or_to_none_is_refused_and_creates_nothing(
    settings: SearchSettings, es: AsyncElasticsearch
) -> None:
    plain, missing = f"{settings.index}-plain", f"{settings.index}-missing"
    async with _client(settings) as c:
        await c.ensure_index()
        await es.indices.create(index=plain)
        try:
            # Both were "indexed": Elasticsearch created the missing index and mapped the vectors as floats.
            with pytest.raises(ConfigurationError, match="not made by this library"):
                await c.index_documents(DOCS, index=plain)
            with pytest.raises(IndexNotFound, match="does not exist"):
                await c.index_documents(DOCS, index=missing)
            assert (await es.indices.get_mapping(index=plain)).body[plain]["mappings"] == {}  # untouched
            assert not (await es.indices.exists(index=missing)).body
            assert (await c.index_documents(DOCS, index=await c.indices.create_version())).ok  # a version: written
        finally:
            await es.options(ignore_status=404).indices.delete(index=f"{plain},{missing}")


@pytest.mark.smoke
async def test_get_root_answers_like_a_full_distribution(es: AsyncElasticsearch) -> None:
    info = await es.info()
    assert info["version"]["number"]
    assert info["cluster_uuid"]
    assert info["tagline"] == "You Know, for Search"
    assert info.meta.headers["x-elastic-product"] == "Elasticsearch"
    assert await es.ping()


@pytest.mark.smoke
async def test_an_api_version_the_server_rejects_is_incompatible_server(es: AsyncElasticsearch, es_url: str) -> None:
    """What the 9.x client sends on every request (`compatible-with=9`): an 8.x server rejects it, and the
    rejection maps to IncompatibleServer with the fix; a 9.x server accepts it. (A plain client: the ``es``
    fixture's CompatibleTransport would answer the refusal by resending with compatible-with=8.)"""
    server_major = int((await es.info())["version"]["number"].split(".")[0])
    compat9 = "application/vnd.elasticsearch+json; compatible-with=9"
    plain = AsyncElasticsearch(es_url, request_timeout=30)
    try:
        await plain.perform_request("GET", "/_cluster/health", headers={"accept": compat9})
    except elasticsearch.ApiError as exc:
        assert server_major == 8
        mapped = map_es_error(exc)
        assert isinstance(mapped, IncompatibleServer)
        assert "elasticsearch[async]>=8.14,<9" in str(mapped)
    else:
        assert server_major >= 9
    finally:
        await plain.close()


@pytest.mark.client9
def test_the_9x_client_talks_to_an_8x_server_and_a_client_built_without_the_transport_says_how() -> None:
    """Runs in the 9.x-client pass (deselected when the 8.x client is installed): a real 8.19 node. A client
    from_settings() builds learns the server's major and sends the compatibility it accepts; one built by
    hand without CompatibleTransport is IncompatibleServer, saying how to fix it."""
    import asyncio

    async def check(url: str) -> None:
        settings = SearchSettings(url=url, index=f"test-{uuid.uuid4().hex[:8]}")
        async with _client(settings) as c:
            await c.ensure_index()
            report = await c.index_documents([Document(id="d1", title="Revenue", text="guidance cut")], refresh=True)
            assert report.ok
            assert (await c.search("revenue guidance")).ids == ["d1"]
            await c.indices.delete()
        raw = AsyncElasticsearch(url)
        async with SearchClient(raw, HashingEmbedder(dimensions=64), settings, owns_clients=True) as c:
            with pytest.raises(IncompatibleServer, match=r"transport_class=storage\.CompatibleTransport"):
                await c.ensure_index()

    assert CLIENT_MAJOR >= 9
    with LocalElasticsearch(version=VERSION_8, name=f"compat-{uuid.uuid4().hex[:6]}", ephemeral=True) as node:
        asyncio.run(check(node.url))
