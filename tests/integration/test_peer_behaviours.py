"""The Elasticsearch stores' behaviours a user who swaps the import relies on (issue 62), in our words.

langchain-elasticsearch and llama-index-vector-stores-elasticsearch do not ship their tests; these are the
behaviours their suites pin, each against the real Elasticsearch: the peer's client object, its constructor
arguments (taken where they mean something here, refused by name otherwise), its Elasticsearch-DSL filter list
(translated, never ignored) and its query arguments.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from elasticsearch import AsyncElasticsearch, Elasticsearch
from elasticsearch.helpers.vectorstore import AsyncBM25Strategy
from haystack import Document as HaystackDocument
from haystack.document_stores.types import FilterPolicy
from langchain_core.embeddings import DeterministicFakeEmbedding
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores.types import VectorStoreQuery, VectorStoreQueryMode

from embeddings import HashingEmbedder
from storage import ConfigurationError, InvalidQuery, SearchClient, SearchSettings
from storage.integrations.haystack import HybridSearchDocumentStore, HybridSearchRetriever
from storage.integrations.langchain import HybridSearchStore
from storage.integrations.llama_index import HybridSearchVectorStore

_EMBEDDING = DeterministicFakeEmbedding(size=8)
PAGES = [(f"p{n}", f"Quarterly revenue report, page {n}: guidance and outlook.", {"page": n}) for n in range(1, 7)]


@pytest.fixture
def langchain_store(settings: SearchSettings) -> Iterator[HybridSearchStore]:
    es = Elasticsearch(settings.url)
    store = HybridSearchStore(
        index_name=settings.index, embedding=_EMBEDDING, client=es
    )  # as ElasticsearchStore takes it
    store.add_texts([t for _, t, _ in PAGES], [m for _, _, m in PAGES], ids=[i for i, _, _ in PAGES])
    yield store
    store.close()
    es.close()


def test_langchain_store_takes_an_elasticsearch_client_and_its_filter_clauses(
    langchain_store: HybridSearchStore,
) -> None:
    one = langchain_store.similarity_search("revenue guidance", k=6, filter=[{"term": {"metadata.page": "1"}}])
    assert [d.id for d in one] == ["p1"]
    keyword = [{"terms": {"metadata.page.keyword": ["2", "3"]}}]
    assert sorted(d.id for d in langchain_store.similarity_search("revenue", k=6, filter=keyword)) == ["p2", "p3"]
    ranged = [
        {"bool": {"filter": [{"range": {"metadata.page": {"gte": 4}}}], "must_not": [{"ids": {"values": ["p5"]}}]}}
    ]
    assert sorted(d.id for d in langchain_store.similarity_search("revenue", k=6, filter=ranged)) == ["p4", "p6"]
    assert len(langchain_store.similarity_search("revenue", k=2, fetch_k=50)) == 2  # the peer's kNN candidates
    with pytest.raises(InvalidQuery, match="'match' clause cannot be a filter"):
        langchain_store.similarity_search("revenue", filter=[{"match": {"text": "guidance"}}])
    with pytest.raises(InvalidQuery, match="custom_query is not supported"):
        langchain_store.similarity_search("revenue", custom_query=lambda body, query: body)
    assert [d.id for d in langchain_store.similarity_search_by_vector(_EMBEDDING.embed_query(PAGES[2][1]), k=1)] == [
        "p3"
    ]  # a vector the store's own embedding made: searched (tests/integration/test_query_vector.py)


def test_langchain_store_takes_vectors_its_own_embedding_made_and_refuses_others(
    langchain_store: HybridSearchStore, settings: SearchSettings
) -> None:
    text = "Annual dividend raised by the board."
    ids = langchain_store.add_embeddings([(text, _EMBEDDING.embed_query(text))], [{"page": 9}], ids=["p9"])
    assert ids == ["p9"]
    assert [d.id for d in langchain_store.similarity_search("dividend", k=1, filter={"page": 9})] == ["p9"]
    ours = HybridSearchStore(index_name=settings.index, es_url=settings.url)  # our own embedder
    with pytest.raises(InvalidQuery, match="embeds with its own model"):
        ours.add_embeddings([(text, [0.0] * 8)])
    ours.close()


def test_langchain_store_takes_the_peer_s_constructor_arguments_or_names_what_to_pass_instead(
    settings: SearchSettings,
) -> None:
    store = HybridSearchStore(
        index_name=settings.index,
        embedding=_EMBEDDING,
        es_url=settings.url,
        distance_strategy="COSINE",
        vector_query_field="vector",
        query_field="text",
        user_agent="my-service",
    )
    store.close()
    for argument, message in (
        ({"num_dimensions": 384}, "num_dimensions= is not taken here: the index takes its dimensions"),
        ({"distance_strategy": "EUCLIDEAN_DISTANCE"}, "compares vectors by cosine"),
        ({"vector_query_field": "emb"}, "import_index"),
        ({"es_params": {"timeout": 3}}, "SearchSettings"),
        ({"metadata_mappings": {"page": {"type": "long"}}}, "leave metadata_mappings out"),
    ):
        with pytest.raises(ConfigurationError, match=message):
            HybridSearchStore(index_name=settings.index, embedding=_EMBEDDING, es_url=settings.url, **argument)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="not with es_url"):
        HybridSearchStore(index_name=settings.index, client=Elasticsearch(settings.url), es_url=settings.url)


async def test_llama_index_store_applies_es_filter_and_refuses_custom_query(settings: SearchSettings) -> None:
    es = AsyncElasticsearch(settings.url)
    store = HybridSearchVectorStore(
        index_name=settings.index,
        es_client=es,
        retrieval_strategy=AsyncBM25Strategy(),
        embedder=HashingEmbedder(dimensions=64),
    )
    try:
        await store.async_add([TextNode(id_=i, text=t, metadata=m) for i, t, m in PAGES])
        query = VectorStoreQuery(query_str="revenue guidance", similarity_top_k=6)
        everything = await store.aquery(query)
        assert len(everything.ids or []) == 6
        one = await store.aquery(query, es_filter=[{"term": {"metadata.page": 1}}])
        assert one.ids == ["p1"]  # the condition holds (it was dropped before: six nodes came back)
        two = await store.aquery(
            query, es_filter=[{"terms": {"metadata.page.kw": ["2", "3"]}}], metadata_keyword_suffix=".kw"
        )
        assert sorted(two.ids or []) == ["p2", "p3"]
        # BM25Strategy: the default mode searches the words alone (no vector neighbours fill the list).
        none = await store.aquery(VectorStoreQuery(query_str="zeppelin", similarity_top_k=6))
        assert none.ids == []
        text = VectorStoreQuery(query_str="revenue", similarity_top_k=3, mode=VectorStoreQueryMode.TEXT_SEARCH)
        with pytest.raises(InvalidQuery, match="custom_query is not supported"):
            await store.aquery(text, custom_query=lambda body, query: body)
        with pytest.raises(InvalidQuery, match="unknown query argument"):
            await store.aquery(text, es_filters=[])
    finally:
        await store.aclose()
        await es.close()


def test_llama_index_store_names_what_to_pass_instead_of_the_peer_s_arguments(settings: SearchSettings) -> None:
    with pytest.raises(ConfigurationError, match="pass a SearchClient as client="):
        HybridSearchVectorStore(
            index_name=settings.index,
            es_client=SearchClient.from_settings(settings, embedder=HashingEmbedder(dimensions=64)),
        )
    with pytest.raises(ConfigurationError, match="import_index"):
        HybridSearchVectorStore(index_name=settings.index, es_url=settings.url, text_field="body")
    with pytest.raises(ConfigurationError, match="not both"):
        HybridSearchVectorStore(
            index_name=settings.index, es_url=settings.url, retrieval_strategy=AsyncBM25Strategy(), default_mode="knn"
        )
    store = HybridSearchVectorStore(
        index_name=settings.index, es_url=settings.url, text_field="content", distance_strategy="COSINE", batch_size=50
    )
    store.close()


def test_haystack_store_retriever_takes_the_peer_retrievers_filter_policy_scale_score_and_fuzziness(
    settings: SearchSettings,
) -> None:
    store = HybridSearchDocumentStore(hosts=settings.url, index=settings.index, embedder=HashingEmbedder(dimensions=64))
    try:
        store.write_documents(
            [
                HaystackDocument(id=i, content=t, meta={"page": n, "year": 2024 + n % 2})
                for n, (i, t, _) in enumerate(PAGES)
            ]
        )
        page = {"field": "meta.page", "operator": "<=", "value": 3}
        odd = {"field": "meta.year", "operator": "==", "value": 2025}
        replace = HybridSearchRetriever(document_store=store, filters=page, top_k=6)
        merge = HybridSearchRetriever(document_store=store, filters=page, top_k=6, filter_policy=FilterPolicy.MERGE)
        assert {d.id for d in replace.run("revenue", filters=odd)["documents"]} == {"p2", "p4", "p6"}
        assert {d.id for d in merge.run("revenue", filters=odd)["documents"]} == {"p2", "p4"}

        fused = HybridSearchRetriever(document_store=store, top_k=6).run("revenue guidance")["documents"]
        scaled = HybridSearchRetriever(document_store=store, top_k=6, scale_score=True).run("revenue guidance")
        similarities = [d.score for d in scaled["documents"]]
        assert all(s is not None and 0.5 < s <= 1.0 for s in similarities)  # the query's similarity to each
        assert similarities != [d.score for d in fused]  # (not the fused score, which ordered the list)
        bm25 = HybridSearchRetriever(document_store=store, top_k=6, scale_score=True, mode="bm25")
        assert all(0.5 < (d.score or 0.0) < 1.0 for d in bm25.run("guidance")["documents"])  # the peer's logistic

        assert HybridSearchRetriever(document_store=store, fuzziness=0).run("revenue")["documents"]
        with pytest.raises(ConfigurationError, match="recover=True retries"):
            HybridSearchRetriever(document_store=store, fuzziness="AUTO")
        with pytest.raises(ConfigurationError, match="'replace' or 'merge'"):
            HybridSearchRetriever(document_store=store, filter_policy="both")
    finally:
        store.close()


def test_langchain_store_client_is_the_client_given_and_a_url_made_store_says_it_has_none(
    settings: SearchSettings,
) -> None:
    es = Elasticsearch(settings.url)
    given = HybridSearchStore(index_name=settings.index, embedding=_EMBEDDING, client=es)
    made = HybridSearchStore(index_name=settings.index, embedding=_EMBEDDING, es_url=settings.url)
    try:
        assert given.client is es  # the peer's store.client: index administration goes on with it
        assert given.client.indices.exists(index=settings.index) is not None
        with pytest.raises(AttributeError, match="made from a URL"):
            _ = made.client
    finally:
        given.close()
        made.close()
        es.close()


@pytest.mark.parametrize(("analyzer", "found"), [("standard", ["said"]), ("english_folded", [])])
def test_bm25_retrieval_returns_only_what_matches_and_the_standard_analyzer_keeps_the_peers_stop_words(
    settings: SearchSettings, analyzer: str, found: list[str]
) -> None:
    """The peer's BM25 retriever returns only documents that match, on its ``standard`` analyzer, where "there was"
    are words; ours with ``mode="bm25"`` does the same on ``analyzer="standard"``; the default
    ``english_folded`` drops stop words (so "there was" matches nothing) — the difference the docs name."""
    ours = settings.model_copy(update={"analyzer": analyzer})
    store = HybridSearchDocumentStore(settings=ours, embedder=HashingEmbedder(dimensions=64))
    try:
        store.write_documents(
            [
                HaystackDocument(id="said", content="I was there when the kiln cooled."),
                HaystackDocument(id="other", content="Glaze recipes for stoneware."),
            ]
        )
        bm25 = HybridSearchRetriever(document_store=store, mode="bm25", top_k=5)
        assert [d.id for d in bm25.run("there was")["documents"]] == found
        assert bm25.run("zeppelin")["documents"] == []  # no vector neighbours fill the list
        hybrid = HybridSearchRetriever(document_store=store, top_k=5)
        assert len(hybrid.run("zeppelin")["documents"]) == 2  # (the default hybrid: nearest vectors too)
    finally:
        store.close()
