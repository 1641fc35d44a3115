"""The frameworks' own standard tests, with their defaults, against the real Elasticsearch (issue 51).

LangChain: ``langchain_tests.integration_tests.RetrieversIntegrationTests`` with LangChain's own result-count
name, ``k`` (not told ours).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langchain_tests.integration_tests import RetrieversIntegrationTests

from embeddings import HashingEmbedder
from storage import SearchClient, SearchSettings
from storage.integrations import close_client
from storage.integrations.langchain import HybridSearchRetriever

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
