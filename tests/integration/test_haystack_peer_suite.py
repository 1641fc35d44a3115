"""elasticsearch-haystack's own document-store tests, run against our store (issue 62).

The peer's ``tests/test_document_store.py`` and ``tests/test_document_store_async.py`` come from its source
distribution on PyPI at test time (pinned by version and sha256, never committed: ``tests/_peer_suite.py``).
Only the construction is swapped: ``ElasticsearchDocumentStore`` is our ``HybridSearchDocumentStore``, and the
``document_store`` fixture builds ours on the test's Elasticsearch (hosts, index) as the peer's fixture builds
its own. The peer's unit tests (mocked clients, its private helpers) are not collected: only its integration
classes are. Tests of the peer's private internals and of methods we do not offer are set aside below by name,
each with its reason (docs/how-to/frameworks.md lists them).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from haystack import Document
from haystack.document_stores.errors import DuplicateDocumentError
from haystack.document_stores.types import DuplicatePolicy
from haystack.errors import FilterError

from embeddings import HashingEmbedder
from storage import ConfigurationError, InvalidDocument, SearchSettings
from storage.integrations.haystack import HybridSearchDocumentStore

from .._peer_suite import peer_test_module

PEER = ("elasticsearch-haystack==7.1.0", "elasticsearch_haystack-7.1.0.tar.gz")
PEER_SHA256 = "9dd14a4bede5a5bd52f982d17f0988a231fa193c483cb8688345226bc5d4339c"
#: The peer's name for its store, rebound to ours in the loaded test modules.
REBIND: dict[str, object] = {"ElasticsearchDocumentStore": HybridSearchDocumentStore}


def _peer(member: str) -> object:
    return peer_test_module(*PEER, PEER_SHA256, f"elasticsearch_haystack-7.1.0/tests/{member}", REBIND)


_sync = _peer("test_document_store.py")
_async = _peer("test_document_store_async.py")

#: Set aside, by the start of the test's name: the peer's private internals (its client objects, its private
#: retrieval helpers, SQL) and the optional methods we do not offer, each with the reason. A peer behaviour we
#: refuse by design is not set aside: its test is replaced below by one that proves the refusal and its message.
SET_ASIDE: dict[str, str] = {
    "test_bm25_": "calls the peer's private _bm25_retrieval (our retriever: HybridSearchRetriever, mode='bm25')",
    "test_embedding_retrieval": "calls the peer's private _embedding_retrieval with a vector the test computed",
    "test_query_sql": "calls the peer's private _query_sql (Elasticsearch SQL)",
    "test_sparse_vector_retrieval": "calls the peer's private _sparse_vector_retrieval",
    "test_close_and_reopen": "reads the peer's private _client",
    "test_close_async_and_reopen": "reads the peer's private _async_client",
    "test_user_agent_header": "reads the peer's Elasticsearch client's headers",
    "test_delete_all_documents_index_recreation": "reads the index through the peer's private _client and _index",
    "test_delete_all_documents_async_index_recreation": "reads the index through the peer's private _async_client",
    "test_init_with_custom_mapping": "a mocked Elasticsearch client",
    "test_write_documents_with_sparse": "sparse vectors: sparse_vector_field= is refused by name (tested below)",
    "test_write_documents_async_with_sparse": "sparse vectors (as above)",
    "test_write_documents_with_non_contiguous_sparse": "sparse vectors (as above)",
    "test_write_documents_async_with_non_contiguous_sparse": "sparse vectors (as above)",
    "test_write_documents_mixed_sparse": "sparse vectors (as above)",
    "test_write_documents_async_mixed_sparse": "sparse vectors (as above)",
    # Refused by design (typed per-field statistics: our metadata is keywords), each refusal and its advice
    # proved once below (test_the_metadata_statistics_are_refused_with_what_to_use_instead), not per peer test.
    "test_count_unique_metadata_by_filter": "metadata statistics: refused by design (NotImplementedError)",
    "test_get_metadata_field": "metadata statistics: refused by design (NotImplementedError)",
}


def _store(settings: SearchSettings) -> Iterator[HybridSearchDocumentStore]:
    store = HybridSearchDocumentStore(hosts=settings.url, index=settings.index, embedder=HashingEmbedder(dimensions=64))
    yield store
    store.close()


class TestPeerDocumentStore(_sync.TestDocumentStore):  # type: ignore[name-defined,misc]
    @pytest.fixture
    def document_store(self, settings: SearchSettings) -> Iterator[HybridSearchDocumentStore]:
        yield from _store(settings)

    # -- the peer's behaviours refused by design: each test replaced by one of the refusal and its advice ----

    def test_write_documents(self, document_store: HybridSearchDocumentStore) -> None:
        """A document without content is refused (the index embeds and searches each document's text); the
        peer's duplicate check, on a document with content, holds."""
        with pytest.raises(InvalidDocument, match="needs a title or a text"):
            document_store.write_documents([Document(id="1")])
        assert document_store.write_documents([Document(id="1", content="one")]) == 1
        with pytest.raises(DuplicateDocumentError):
            document_store.write_documents([Document(id="1", content="one")], DuplicatePolicy.FAIL)

    def test_filter_documents_equal_with_list_matches_exact_set(
        self, document_store: HybridSearchDocumentStore
    ) -> None:
        """``==`` with a list (the exact set of a list field's values) is refused, naming ``in``."""
        document_store.write_documents([Document(content="exact", meta={"tags": ["a", "b"]})])
        with pytest.raises(FilterError, match="use in for any of them"):
            document_store.filter_documents(filters={"field": "meta.tags", "operator": "==", "value": ["a", "b"]})

    def test_the_metadata_statistics_are_refused_with_what_to_use_instead(
        self, document_store: HybridSearchDocumentStore
    ) -> None:
        calls = {
            "count_unique_metadata_by_filter": ({}, ["category"]),
            "get_metadata_fields_info": (),
            "get_metadata_field_min_max": ("priority",),
            "get_metadata_field_unique_values": ("category",),
        }
        for method, arguments in calls.items():
            with pytest.raises(NotImplementedError, match=r"facets=\['metadata.<key>'\]"):
                getattr(document_store, method)(*arguments)

    def test_init_with_sparse_vector_field(self) -> None:
        with pytest.raises(ConfigurationError, match="sparse_vector_field= is not taken here: sparse vectors"):
            HybridSearchDocumentStore(hosts="http://localhost:9200", sparse_vector_field="sparse_vec")


class TestPeerDocumentStoreAsync(_async.TestElasticsearchDocumentStoreAsync):  # type: ignore[name-defined,misc]
    @pytest.fixture
    async def document_store(self, settings: SearchSettings) -> AsyncIterator[HybridSearchDocumentStore]:
        store = HybridSearchDocumentStore(
            hosts=settings.url, index=settings.index, embedder=HashingEmbedder(dimensions=64)
        )
        yield store
        await store.aclose()

    async def test_the_metadata_statistics_are_refused_with_what_to_use_instead_async(
        self, document_store: HybridSearchDocumentStore
    ) -> None:
        calls = {
            "count_unique_metadata_by_filter_async": ({}, ["category"]),
            "get_metadata_fields_info_async": (),
            "get_metadata_field_min_max_async": ("priority",),
            "get_metadata_field_unique_values_async": ("category",),
        }
        for method, arguments in calls.items():
            with pytest.raises(NotImplementedError, match=r"facets=\['metadata.<key>'\]"):
                await getattr(document_store, method)(*arguments)


for _cls in (TestPeerDocumentStore, TestPeerDocumentStoreAsync):
    for _name in [n for n in dir(_cls) if n.startswith(tuple(SET_ASIDE))]:
        setattr(_cls, _name, None)  # (not collected: a set-aside test is not a skip)
