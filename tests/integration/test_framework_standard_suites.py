"""The frameworks' own standard tests, with their defaults, against the real Elasticsearch (issue 51).

LangChain: ``langchain_tests.integration_tests.RetrieversIntegrationTests`` with LangChain's own result-count
name, ``k`` (not told ours), and ``VectorStoreIntegrationTests`` (sync and async) on the drop-in store with
the suite's own embeddings (``DeterministicFakeEmbedding``: a LangChain ``Embeddings`` object, as users pass
one to ``ElasticsearchStore``). LlamaIndex (no shipped suite): a contract test of ``VectorStoreIndex`` on the
store. Haystack: ``haystack.testing.document_store``'s base tests and the optional ones our store implements.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from elasticsearch import AsyncElasticsearch
from haystack import Document as HaystackDocument
from haystack import Pipeline
from haystack.document_stores.errors import DuplicateDocumentError
from haystack.document_stores.types import DuplicatePolicy
from haystack.errors import FilterError
from haystack.testing.document_store import (
    CountDocumentsByFilterTest,
    DeleteAllTest,
    DeleteByFilterTest,
    DocumentStoreBaseTests,
)
from haystack.testing.document_store_async import (
    CountDocumentsAsyncTest,
    CountDocumentsByFilterAsyncTest,
    DeleteAllAsyncTest,
    DeleteByFilterAsyncTest,
    DeleteDocumentsAsyncTest,
    FilterDocumentsAsyncTest,
    WriteDocumentsAsyncTest,
)
from langchain_core.documents import Document
from langchain_core.vectorstores import VectorStore
from langchain_tests.integration_tests import RetrieversIntegrationTests, VectorStoreIntegrationTests
from llama_index.core import Document as LlamaDocument
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
)
from llama_index.core.vector_stores.utils import node_to_metadata_dict

from embeddings import HashingEmbedder
from storage import ConfigurationError, InvalidDocument, InvalidQuery, SearchClient, SearchSettings
from storage.integrations import close_client
from storage.integrations.haystack import DuplicateDocuments, HybridSearchDocumentStore
from storage.integrations.haystack import HybridSearchRetriever as HaystackRetriever
from storage.integrations.langchain import HybridSearchRetriever, HybridSearchStore
from storage.integrations.llama_index import HybridSearchVectorStore

from .test_framework_retrievers import QUERY, load_corpus


def _loaded_client(settings: SearchSettings) -> SearchClient:
    load_corpus(settings)
    return SearchClient.from_settings(settings, embedder=HashingEmbedder(dimensions=64))


class TestLangChainRetrieverStandardSuite(RetrieversIntegrationTests):
    """One SearchClient (never entered: the retrievers run it on its own loop) shared by every retriever the
    suite builds; closed after each test."""

    @pytest.fixture(autouse=True)
    def _client(self, settings: SearchSettings) -> Iterator[None]:
        self.client = _loaded_client(settings)
        yield
        close_client(self.client)

    @property
    def retriever_constructor(self) -> type[HybridSearchRetriever]:
        return HybridSearchRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"client": self.client}

    @property
    def retriever_query_example(self) -> str:
        return QUERY


def test_langchain_search_kwargs_as_tutorials_write_them(settings: SearchSettings) -> None:
    client = _loaded_client(settings)
    try:
        retriever = HybridSearchRetriever(client=client, search_kwargs={"k": 2, "filter": {"ticker": "MSFT"}})
        docs = retriever.invoke(QUERY)
        assert len(docs) == 2
        assert {d.metadata["ticker"] for d in docs} == {"MSFT"}
        assert len(retriever.invoke(QUERY, k=1)) == 1
    finally:
        close_client(client)


class TestLangChainVectorStoreStandardSuite(VectorStoreIntegrationTests):
    """The drop-in store, built as users build ``ElasticsearchStore`` (a URL, an index name, an embedding),
    on an index of its own per test."""

    @pytest.fixture
    def vectorstore(self, settings: SearchSettings) -> Iterator[VectorStore]:
        store = HybridSearchStore(index_name=settings.index, embedding=self.get_embeddings(), es_url=settings.url)
        yield store
        store.close()


def test_the_store_keeps_framework_metadata_exactly_and_filters_and_diversifies_by_it(settings: SearchSettings) -> None:
    store = HybridSearchStore(
        index_name=settings.index, embedding=VectorStoreIntegrationTests.get_embeddings(), es_url=settings.url
    )
    try:
        metadata = {"source": "a.txt", "page": 3, "score": 0.5, "tags": ["x", "y"], "nested": {"k": [1, None]}}
        ids = store.add_texts(
            ["apples and pears", "pears and plums", "plums"], metadatas=[metadata, {"source": "b.txt"}, {}]
        )
        (got,) = store.get_by_ids(ids[:1])
        assert got == Document(id=ids[0], page_content="apples and pears", metadata=metadata)  # as given
        found = store.similarity_search("pears", k=3, filter={"source": "b.txt"})
        assert [d.id for d in found] == [ids[1]]
        scored = store.similarity_search_with_score("apples and pears", k=1)
        assert scored[0][0].id == ids[0]
        assert scored[0][1] > 0
        relevance = store.similarity_search_with_relevance_scores("apples and pears", k=3)
        assert all(0.0 <= r <= 1.0 for _, r in relevance)
        mmr = store.max_marginal_relevance_search("pears", k=2, fetch_k=3, lambda_mult=0.5)
        assert len(mmr) == 2
        retriever = store.as_retriever(search_type="mmr", search_kwargs={"k": 1, "filter": {"source": "a.txt"}})
        assert [d.id for d in retriever.invoke("pears")] == [ids[0]]
        assert store.delete(ids) is True
        assert store.get_by_ids(ids) == []
    finally:
        store.close()


def test_the_store_shares_a_given_client_with_the_retrievers(settings: SearchSettings) -> None:
    client = _loaded_client(settings)
    try:
        store = HybridSearchStore(client=client)
        retriever = HybridSearchRetriever(client=client, k=2)
        ids = store.add_texts(["Zorblax quantum widget revenue"], ids=["zorblax"])
        assert ids == ["zorblax"]
        assert store.similarity_search("Zorblax quantum widget", k=1)[0].id == "zorblax"
        assert len(retriever.invoke(QUERY)) == 2
    finally:
        close_client(client)


async def test_a_langchain_elasticsearch_index_moves_into_the_store_in_one_call(
    settings: SearchSettings, es: AsyncElasticsearch
) -> None:
    old = f"{settings.index}-langchain"  # the shape ElasticsearchStore writes: text, metadata, vector
    await es.indices.create(
        index=old, mappings={"properties": {"text": {"type": "text"}, "vector": {"type": "dense_vector", "dims": 2}}}
    )
    rows = [("a", "Apple lowered its revenue guidance.", {"source": "aapl.pdf", "page": 3}), ("b", "", {"page": 1})]
    for doc_id, text, metadata in rows:
        await es.index(index=old, id=doc_id, document={"text": text, "metadata": metadata, "vector": [0.1, 0.2]})
    await es.indices.refresh(index=old)

    def move() -> None:
        store = HybridSearchStore(
            index_name=settings.index, embedding=VectorStoreIntegrationTests.get_embeddings(), es_url=settings.url
        )
        try:
            report = store.import_index(old, batch_size=1)
            assert report.indexed == ["a"]
            assert [(f.id, f.reason) for f in report.failed] == [("b", "invalid_document")]  # no text: said
            (doc,) = store.get_by_ids(["a"])
            assert doc.metadata == {"source": "aapl.pdf", "page": 3}
            assert store.similarity_search("revenue guidance", k=1, filter={"source": "aapl.pdf"})[0].id == "a"
        finally:
            store.close()

    await asyncio.to_thread(move)


# -- LlamaIndex: no shipped base class; the contract of VectorStoreIndex on the store ------------------------

LLAMA_DOCS = [
    ("d1", "Apple lowered its revenue guidance for the year.", {"ticker": "AAPL", "year": 2024}),
    ("d2", "Azure revenue grew thirty percent.", {"ticker": "MSFT", "year": 2023}),
    ("d3", "The weather service expects rain.", {"ticker": "WX", "year": 2024}),
]


def _llama_index(store: HybridSearchVectorStore) -> VectorStoreIndex:
    docs = [LlamaDocument(id_=i, text=t, metadata=m) for i, t, m in LLAMA_DOCS]
    context = StorageContext.from_defaults(vector_store=store)
    return VectorStoreIndex.from_documents(docs, storage_context=context, embed_model=MockEmbedding(embed_dim=8))


def test_a_vector_store_index_on_the_store_retrieves_filters_and_deletes_as_on_elasticsearchstore(
    settings: SearchSettings,
) -> None:
    client = SearchClient.from_settings(settings, embedder=HashingEmbedder(dimensions=64))
    try:
        store = HybridSearchVectorStore(client=client)  # shared with a retriever below
        index = _llama_index(store)
        hybrid = index.as_retriever(similarity_top_k=1, vector_store_query_mode="hybrid")
        (top,) = hybrid.retrieve("revenue guidance")
        assert top.node.ref_doc_id == "d1"
        assert top.node.metadata == {"ticker": "AAPL", "year": 2024}  # as it went in
        assert top.node.get_content() == LLAMA_DOCS[0][1]
        msft = MetadataFilters(filters=[MetadataFilter(key="ticker", value="MSFT")])
        filtered = index.as_retriever(similarity_top_k=3, vector_store_query_mode="hybrid", filters=msft)
        assert [n.node.ref_doc_id for n in filtered.retrieve("revenue")] == ["d2"]
        either = MetadataFilters(
            filters=[MetadataFilter(key="ticker", value="AAPL"), MetadataFilter(key="ticker", value="WX")],
            condition=FilterCondition.OR,
        )
        found = index.as_retriever(similarity_top_k=3, vector_store_query_mode="text_search", filters=either)
        assert {n.node.ref_doc_id for n in found.retrieve("revenue rain")} == {"d1", "d3"}
        assert len(index.as_retriever(similarity_top_k=2).retrieve("Azure revenue")) == 2  # default: kNN
        mmr = index.as_retriever(similarity_top_k=2, vector_store_query_mode="mmr").retrieve("revenue")
        assert len(mmr) == 2
        index.delete_ref_doc("d1")
        assert "d1" not in {n.node.ref_doc_id for n in hybrid.retrieve("revenue guidance")}
        again = VectorStoreIndex.from_vector_store(store, embed_model=MockEmbedding(embed_dim=8))
        assert (
            again.as_retriever(similarity_top_k=1, vector_store_query_mode="hybrid")
            .retrieve("Azure")[0]
            .node.ref_doc_id
            == "d2"
        )
        (node,) = store.get_nodes(filters=msft)
        assert node.get_content() == LLAMA_DOCS[1][1]
        store.delete_nodes([node.node_id])
        assert store.get_nodes(filters=msft) == []
        assert len(HybridSearchRetriever(client=client, limit=3).invoke("weather")) == 1  # the same client
        store.clear()
        assert store.get_nodes(filters=MetadataFilters(filters=[MetadataFilter(key="year", value="2024")])) == []
    finally:
        close_client(client)


async def test_the_llama_index_store_works_from_async_code_with_a_llama_index_embedding(
    settings: SearchSettings,
) -> None:
    store = HybridSearchVectorStore(
        index_name=settings.index, es_url=settings.url, embed_model=MockEmbedding(embed_dim=8)
    )
    try:
        nodes = [TextNode(id_=i, text=t, metadata=m) for i, t, m in LLAMA_DOCS]
        assert await store.async_add(nodes) == ["d1", "d2", "d3"]
        result = await store.aquery(
            VectorStoreQuery(query_str="rain", similarity_top_k=1, mode=VectorStoreQueryMode.HYBRID)
        )
        assert result.ids == ["d3"]
        assert result.nodes[0].metadata == {"ticker": "WX", "year": 2024}
        with pytest.raises(InvalidQuery, match="svm"):
            await store.aquery(VectorStoreQuery(query_str="rain", mode=VectorStoreQueryMode.SVM))
        await store.adelete_nodes(["d3"])
        assert [n.node_id for n in await store.aget_nodes(["d1", "d3"])] == ["d1"]
    finally:
        await store.aclose()


def _haystack_store(settings: SearchSettings) -> Iterator[HybridSearchDocumentStore]:
    """The store built as users build ``ElasticsearchDocumentStore`` (hosts, index), closed afterwards."""
    store = HybridSearchDocumentStore(hosts=settings.url, index=settings.index, embedder=HashingEmbedder(dimensions=64))
    yield store
    store.close()


class TestHaystackDocumentStoreStandardSuite(
    DocumentStoreBaseTests, DeleteAllTest, DeleteByFilterTest, CountDocumentsByFilterTest
):
    """Haystack's own document store tests (``haystack.testing.document_store``: count, write with each
    duplicate policy, delete, the whole filter syntax; delete all, delete and count by filter), on a store
    built as users build ``ElasticsearchDocumentStore`` (hosts, index), an index of its own per test."""

    @pytest.fixture
    def document_store(self, settings: SearchSettings) -> Iterator[HybridSearchDocumentStore]:
        yield from _haystack_store(settings)

    def assert_documents_are_equal(self, received: list[HaystackDocument], expected: list[HaystackDocument]) -> None:
        """Equal documents (the whole of each: content, meta with its types, embedding, score None) in
        another order: Elasticsearch returns a filter's matches in index order, not in the order written
        (the extension point the suite's docstring names for this)."""
        assert sorted(received, key=lambda d: d.id) == sorted(expected, key=lambda d: d.id)

    def test_write_documents(self, document_store: HybridSearchDocumentStore) -> None:
        """The default policy (NONE) is FAIL, as on ``ElasticsearchDocumentStore``."""
        doc = HaystackDocument(content="test doc")
        assert document_store.write_documents([doc]) == 1
        with pytest.raises(DuplicateDocumentError):
            document_store.write_documents([doc])
        self.assert_documents_are_equal(document_store.filter_documents(), [doc])


class TestHaystackDocumentStoreAsyncStandardSuite(
    CountDocumentsAsyncTest,
    WriteDocumentsAsyncTest,
    DeleteDocumentsAsyncTest,
    FilterDocumentsAsyncTest,
    DeleteAllAsyncTest,
    DeleteByFilterAsyncTest,
    CountDocumentsByFilterAsyncTest,
):
    """Haystack's async document store tests (``haystack.testing.document_store_async``) on the same store,
    called from a running loop (the store's client runs on its own)."""

    @pytest.fixture
    def document_store(self, settings: SearchSettings) -> Iterator[HybridSearchDocumentStore]:
        yield from _haystack_store(settings)

    def assert_documents_are_equal(self, received: list[HaystackDocument], expected: list[HaystackDocument]) -> None:
        assert sorted(received, key=lambda d: d.id) == sorted(expected, key=lambda d: d.id)

    async def test_write_documents_async(self, document_store: HybridSearchDocumentStore) -> None:
        doc = HaystackDocument(content="test doc")
        assert await document_store.write_documents_async([doc]) == 1
        with pytest.raises(DuplicateDocumentError):
            await document_store.write_documents_async([doc])
        self.assert_documents_are_equal(await document_store.filter_documents_async(), [doc])


async def test_writers_racing_on_one_id_with_policy_fail_never_both_win(settings: SearchSettings) -> None:
    """Eight stores write a document of the same id at once with DuplicatePolicy.FAIL: each checks that the
    id is new, and Elasticsearch's create makes the write itself atomic — exactly one wins, the others get
    DuplicateDocuments, and the stored document is the winner's."""
    stores = [
        HybridSearchDocumentStore(hosts=settings.url, index=settings.index, embedder=HashingEmbedder(dimensions=64))
        for _ in range(8)
    ]
    try:
        await stores[0].count_documents_async()  # (the index exists before the race)
        docs = [HaystackDocument(id="contested", content=f"writer {n}") for n in range(8)]
        outcomes = await asyncio.gather(
            *(s.write_documents_async([d], policy=DuplicatePolicy.FAIL) for s, d in zip(stores, docs, strict=True)),
            return_exceptions=True,
        )
        winners = [n for n, o in enumerate(outcomes) if o == 1]
        assert len(winners) == 1
        assert all(isinstance(o, DuplicateDocuments) for n, o in enumerate(outcomes) if n != winners[0])
        assert [d.content for d in await stores[0].filter_documents_async()] == [f"writer {winners[0]}"]
    finally:
        for s in stores:
            s.close()


async def test_the_haystack_store_s_retriever_runs_hybrid_with_haystack_filters_and_round_trips_in_a_pipeline(
    settings: SearchSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EMBEDDINGS_PROVIDER", "hashing")  # (what the store embeds with when it loads)
    monkeypatch.setenv("EMBEDDINGS_DIMENSIONS", "64")
    store = HybridSearchDocumentStore(hosts=settings.url, index=settings.index)
    written = [
        HaystackDocument(content="Solar panels convert sunlight into electricity", meta={"year": 2019, "kind": "a"}),
        HaystackDocument(content="Wind turbines convert wind into electricity", meta={"year": 2021, "kind": "b"}),
        HaystackDocument(content="Batteries store electricity for the night", meta={"year": 2023, "kind": "a"}),
        HaystackDocument(content="Bread is baked from flour", meta={"year": 2023, "kind": "c"}, embedding=[0.5] * 3),
    ]
    retriever = HaystackRetriever(document_store=store, top_k=2)
    try:
        assert await store.write_documents_async(written, policy=DuplicatePolicy.OVERWRITE) == 4
        pipeline = Pipeline()
        pipeline.add_component("retriever", retriever)
        found = (await asyncio.to_thread(pipeline.run, {"retriever": {"query": "sunlight electricity"}}))["retriever"]
        assert found["documents"][0].id == written[0].id
        assert len(found["documents"]) == 2
        assert all(d.score is not None for d in found["documents"])
        newer = {"field": "meta.year", "operator": ">=", "value": 2021}
        result = await pipeline.run_async({"retriever": {"query": "electricity", "filters": newer, "top_k": 5}})
        assert {d.id for d in result["retriever"]["documents"]} == {d.id for d in written[1:]}
        bread = next(d for d in result["retriever"]["documents"] if d.id == written[3].id)
        assert bread.embedding == [0.5, 0.5, 0.5]  # (kept as given; the store searched its own vector)
        assert bread.meta == {"year": 2023, "kind": "c"}
        restored = Pipeline.loads(pipeline.dumps(), allowed_modules=["storage.integrations.haystack"])
        kind_a = {"field": "meta.kind", "operator": "==", "value": "a"}
        again = await asyncio.to_thread(restored.run, {"retriever": {"query": "electricity", "filters": kind_a}})
        assert {d.id for d in again["retriever"]["documents"]} == {written[0].id, written[2].id}
        restored.get_component("retriever").document_store.close()  # type: ignore[attr-defined]
        with pytest.raises(FilterError, match=r"'id' and 'meta\.<key>'") as caught:
            store.filter_documents({"field": "content", "operator": "==", "value": "x"})
        assert isinstance(caught.value, InvalidQuery)
        with pytest.raises(DuplicateDocuments) as duplicate:
            store.write_documents(written[:1], policy=DuplicatePolicy.FAIL)
        assert isinstance(duplicate.value, InvalidDocument)
        assert duplicate.value.ids == [written[0].id]
    finally:
        store.close()


async def test_a_haystack_elasticsearch_index_moves_into_the_store_in_one_call(
    settings: SearchSettings, es: AsyncElasticsearch
) -> None:
    old = f"{settings.index}-haystack"  # what ElasticsearchDocumentStore writes: each document's to_dict()
    given = [
        HaystackDocument(id="a", content="Apple lowered its revenue guidance.", meta={"year": 2024, "page": "3"}),
        HaystackDocument(id="b", content=None, meta={"year": 2020}),  # (a blob-only document: nothing to search)
    ]
    for doc in given:
        await es.index(index=old, id=doc.id, document={**doc.to_dict(), "embedding": [0.1, 0.2]})
    await es.indices.refresh(index=old)

    def move() -> None:
        store = HybridSearchDocumentStore(
            hosts=settings.url, index=settings.index, embedder=HashingEmbedder(dimensions=64)
        )
        try:
            report = store.import_index(old, batch_size=1)
            assert report.indexed == ["a"]
            assert [(f.id, f.reason) for f in report.failed] == [("b", "invalid_document")]  # no content: said
            (doc,) = store.filter_documents({"field": "meta.year", "operator": ">", "value": 2021})
            assert doc == HaystackDocument(id="a", content=given[0].content, meta=given[0].meta, embedding=[0.1, 0.2])
        finally:
            store.close()

    await asyncio.to_thread(move)


async def test_a_llama_index_elasticsearch_index_moves_into_the_store_in_one_call(
    settings: SearchSettings, es: AsyncElasticsearch
) -> None:
    old = f"{settings.index}-llama"  # what LlamaIndex's ElasticsearchStore writes: content, metadata, embedding
    node = TextNode(id_="n1", text="Apple lowered its revenue guidance.", metadata={"ticker": "AAPL", "year": 2024})
    node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id="doc-1")
    serialized = node_to_metadata_dict(node, remove_text=True, flat_metadata=False)
    await es.index(index=old, id="n1", document={"content": node.text, "metadata": serialized, "embedding": [0.1]})
    await es.index(index=old, id="n2", document={"content": "", "metadata": {}, "embedding": [0.2]})
    await es.indices.refresh(index=old)

    def move() -> None:
        store = HybridSearchVectorStore(
            index_name=settings.index, es_url=settings.url, embed_model=MockEmbedding(embed_dim=8)
        )
        try:
            report = store.import_index(old, batch_size=1)
            assert report.indexed == ["n1"]
            assert [(f.id, f.reason) for f in report.failed] == [("n2", "invalid_document")]  # no text: said
            (moved,) = store.get_nodes(["n1"])
            assert (moved.metadata, moved.ref_doc_id) == ({"ticker": "AAPL", "year": 2024}, "doc-1")
            year = MetadataFilters(filters=[MetadataFilter(key="year", value=2023, operator=FilterOperator.GT)])
            assert [n.node_id for n in store.get_nodes(filters=year)] == ["n1"]
            store.delete("doc-1")  # (by the ref_doc_id the node kept)
            assert store.get_nodes(["n1"]) == []
        finally:
            store.close()

    await asyncio.to_thread(move)


def test_a_tenant_s_store_reads_writes_and_deletes_only_its_own_documents(settings: SearchSettings) -> None:
    client = SearchClient.from_settings(settings, embedder=HashingEmbedder(dimensions=64))
    try:
        mine = HybridSearchStore(client=client, tenant_id="a")
        theirs = HybridSearchStore(client=client, tenant_id="b")
        mine.add_texts(["apple revenue guidance"], metadatas=[{"k": "x"}], ids=["a1"])
        theirs.add_texts(["apple revenue guidance again"], metadatas=[{"k": "x"}], ids=["b1"])
        assert [d.id for d in mine.similarity_search("apple revenue guidance", k=5)] == ["a1"]
        assert [d.id for d in mine.get_by_ids(["a1", "b1"])] == ["a1"]
        mine.delete(["b1"])  # not its own: nothing happens to it
        assert [d.id for d in theirs.get_by_ids(["b1"])] == ["b1"]
        haystack = HybridSearchDocumentStore(client=client, tenant_id="a")
        assert haystack.count_documents() == 1
        assert haystack.count_documents_by_filter({"field": "meta.k", "operator": "==", "value": "x"}) == 1
        with pytest.raises(ConfigurationError, match="other tenants"):
            haystack.delete_all_documents(recreate_index=True)
        haystack.delete_all_documents()
        assert mine.get_by_ids(["a1"]) == []
        assert [d.id for d in theirs.get_by_ids(["b1"])] == ["b1"]
        with pytest.raises(ConfigurationError, match="the store's own"):
            mine.similarity_search("apple", k=1, tenant_id="b")
    finally:
        close_client(client)


def test_ids_given_as_one_string_delete_nothing_in_any_store(settings: SearchSettings) -> None:
    # Iterated, "12" is the ids "1" and "2": each store refuses it by name before anything is sent.
    client = SearchClient.from_settings(settings, embedder=HashingEmbedder(dimensions=64))
    try:
        langchain = HybridSearchStore(client=client)
        langchain.add_texts(["one", "two", "twelve"], ids=["1", "2", "12"])
        llama = HybridSearchVectorStore(client=client)
        haystack = HybridSearchDocumentStore(client=client)
        calls = [
            lambda: langchain.delete("12"),  # type: ignore[arg-type]
            lambda: langchain.get_by_ids("12"),
            lambda: llama.delete_nodes("12"),  # type: ignore[arg-type]
            lambda: llama.get_nodes("12"),  # type: ignore[arg-type]
            lambda: haystack.delete_documents("12"),  # type: ignore[arg-type]
        ]
        for call in calls:
            with pytest.raises(InvalidQuery, match="one string, not a list of ids"):
                call()
        assert sorted(d.id for d in langchain.get_by_ids(["1", "2", "12"])) == ["1", "12", "2"]
    finally:
        close_client(client)
