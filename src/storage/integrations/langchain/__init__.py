"""Our hybrid search as a LangChain retriever (``pip install 'hybrid-search-es[langchain]'``).

::

    from storage.integrations.langchain import HybridSearchRetriever

    retriever = HybridSearchRetriever.from_settings(limit=5, filters={"ticker": "AAPL"})  # ES_URL, ...
    docs = retriever.invoke("revenue guidance")          # also ainvoke, batch, abatch; in any loop or none
    docs[0].metadata["id"], docs[0].metadata["ranks"]    # our provenance

A ``langchain_core`` :class:`~langchain_core.retrievers.BaseRetriever` over :class:`SearchClient.search`:
hybrid on the Basic license (fused in the client, where LangChain's Elasticsearch store sends the ``rrf``
retriever Basic refuses). Each :class:`~langchain_core.documents.Document` has the title and text as
``page_content``, the hit's id as ``id`` and in ``metadata["id"]``, and the provenance in ``metadata``
(scores, per-leg ranks and scores, highlights, ``degraded`` / ``partial``). Per-call options override the
retriever's: ``retriever.invoke("q", filters={...}, limit=3)``. An empty or unusable query raises
:class:`InvalidToolQuery`: an :class:`~storage.InvalidQuery` that is also LangChain's ``ToolException``, so a
``create_retriever_tool(..., handle_tool_error=True)`` tool hands the sentence to the model instead of
ending the agent's loop.

:class:`HybridSearchStore` is a drop-in for LangChain's ``ElasticsearchStore`` — the same construction (an
index name, an embedding, a URL or our client) and the ``VectorStore`` interface (``add_documents`` /
``add_texts`` with ids, ``get_by_ids``, ``delete``, ``similarity_search[_with_score|_with_relevance_scores]``,
``max_marginal_relevance_search``, their async forms, ``as_retriever``) with every search hybrid, fused in
the client; a document's metadata comes back exactly as it went in::

    store = HybridSearchStore(index_name="docs", embedding=OpenAIEmbeddings(), es_url="http://localhost:9200")
    store.add_documents(docs)
    store.similarity_search("revenue guidance", k=4, filter={"source": "q3.pdf"})

For agents, :func:`agent_tools` serves the one tool contract of :mod:`storage.agent` as LangChain tools —
the same arguments, schemas, refusals and texts as the MCP server::

    tools = agent_tools(SearchTool(client, limit=5, allowed_filters=("ticker", "date")))
"""

from __future__ import annotations

from typing import Any

try:
    from langchain_core.documents import Document
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "the LangChain retriever needs the 'langchain' extra: pip install 'hybrid-search-es[langchain]'"
    ) from exc

from collections.abc import Iterable, Mapping, Sequence

from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore

from embeddings import CallableEmbedder

from ..._client import SearchClient
from ..._errors import ConfigurationError, InvalidQuery
from ..._settings import SearchSettings
from ..._types.models import IndexReport
from .._dialects import Translated, count_argument, elasticsearch_filters, langchain_filter
from .._peers import is_elasticsearch_client, peer_arguments, store_connection
from .._store import Stored, document_fields, open_store, our_documents, store_options
from ._agent_tools import agent_tools
from ._retriever import HybridSearchRetriever, InvalidToolQuery

__all__ = ["HybridSearchRetriever", "HybridSearchStore", "InvalidToolQuery", "agent_tools"]


def _embedder(embedding: Embeddings) -> CallableEmbedder:
    """A LangChain ``Embeddings`` object as our embedder (its async methods: LangChain runs a sync-only one in
    an executor)."""

    async def texts(batch: list[str]) -> list[list[float]]:
        return await embedding.aembed_documents(batch)

    return CallableEmbedder(f"langchain:{type(embedding).__name__}", texts, embedding.aembed_query)


def _from_stored(found: Stored) -> Document:
    return Document(id=found.id, page_content=found.content, metadata=found.metadata)


class HybridSearchStore(VectorStore):
    """LangChain's ``VectorStore`` on our index: a drop-in for ``ElasticsearchStore`` whose searches are hybrid
    (BM25 + kNN fused in the client: the Basic license's answer to the ``rrf`` retriever it refuses).

    Built like ``ElasticsearchStore``: ``index_name``, ``embedding`` (a LangChain ``Embeddings``; default our
    own embedder from the environment, ``EMBEDDINGS_*``), ``es_url`` / ``es_api_key`` / ``es_user`` /
    ``es_password`` / ``es_cloud_id`` (default ``ES_*``) — or ``client``: a :class:`SearchClient` of yours,
    shared with retrievers and other stores (close it yourself; see :func:`storage.integrations.close_client`),
    or an ``Elasticsearch`` client as ``ElasticsearchStore`` takes it (the store connects with its nodes and
    credentials, on a client of its own). The peer's ``distance_strategy=COSINE`` and default
    ``vector_query_field`` / ``query_field`` are taken; its other arguments are refused by name with what to
    pass instead. ``filter`` takes ``{key: value}`` or the peer's list of Elasticsearch clauses (``term``,
    ``terms``, ``range``, ``exists``, ``ids``, ``bool`` on ``metadata.<key>``).
    With a LangChain embedding a document is embedded whole (its window is not known: no passages).
    ``refresh`` (default True): a write is searchable when it returns. ``tenant_id``: the store is that
    tenant's (its writes carry it, its reads and deletes see only its documents). ``options``: default
    :meth:`SearchClient.search` arguments (``mode``, ``rerank``...).
    """

    def __init__(
        self,
        index_name: str | None = None,
        embedding: Embeddings | None = None,
        *,
        client: Any = None,
        es_url: str | None = None,
        es_cloud_id: str | None = None,
        es_api_key: str | None = None,
        es_user: str | None = None,
        es_password: str | None = None,
        settings: SearchSettings | None = None,
        refresh: bool = True,
        tenant_id: str | None = None,
        **options: Any,
    ) -> None:
        self._embedding = embedding
        mapped = peer_arguments(options, fields={"vector_query_field": "vector", "query_field": "text"})
        self._options = check_store_options(options)
        self._given = client  # (store.client: what you passed)
        peer = client if is_elasticsearch_client(client) else None
        connection = store_connection(
            url=es_url,
            cloud_id=es_cloud_id,
            username=es_user,
            password=es_password,
            api_key=es_api_key,
            es=peer,
            alone="client= (an Elasticsearch client)",
        )
        if peer is not None:
            connection, client = {**connection, **mapped}, None
        elif client is not None and not isinstance(client, SearchClient):
            raise ConfigurationError(
                f"client must be a SearchClient or an Elasticsearch client, got {type(client).__name__}"
            )
        elif client is None:
            connection.update(mapped)
        self._core = open_store(
            client,
            settings=settings,
            embedder=_embedder(embedding) if embedding is not None else None,
            foreign=embedding is not None,
            refresh=refresh,
            tenant_id=tenant_id,
            index=index_name,
            **connection,
        )

    @property
    def embeddings(self) -> Embeddings | None:
        return self._embedding

    @property
    def client(self) -> Any:
        """The peer's ``store.client``: the client you passed as ``client=`` (an ``Elasticsearch`` or a
        :class:`SearchClient`). A store made from a URL has no elasticsearch-py client to hand out (its searches
        run on an asyncio :class:`SearchClient` of its own): an ``AttributeError`` says what to do instead."""
        if self._given is None:
            raise AttributeError(
                "store.client: this store was made from a URL and runs on an asyncio SearchClient of its own; pass "
                "client=Elasticsearch(...) to keep using that client beside the store, or use your own for index "
                "administration"
            )
        return self._given

    # -- writes ----------------------------------------------------------------------------------------

    def _documents(
        self, texts: Iterable[str], metadatas: Sequence[dict[str, Any]] | None, ids: Sequence[str | None] | None
    ) -> list[Any]:
        contents = list(texts)
        for name, given in (("metadatas", metadatas), ("ids", ids)):
            if given is not None and len(given) != len(contents):
                raise InvalidQuery(f"{len(given)} {name} for {len(contents)} texts")
        return our_documents(
            [
                (ids[n] if ids else None, content, metadatas[n] if metadatas else None)
                for n, content in enumerate(contents)
            ]
        )

    def add_texts(
        self,
        texts: Iterable[str],
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        documents = self._documents(texts, metadatas, ids)
        return self._core.bridge.run(lambda c: self._core.add(c, documents))

    async def aadd_texts(
        self,
        texts: Iterable[str],
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        documents = self._documents(texts, metadatas, ids)
        return await self._core.bridge.arun(lambda c: self._core.add(c, documents))

    def _texts_of(self, text_embeddings: Iterable[tuple[str, list[float]]]) -> list[str]:
        """``add_embeddings``: vectors the store's own ``embedding`` computed are accepted — the store embeds
        each text again with it (the same model, the same vectors); from another model they are refused."""
        if self._embedding is None:
            raise InvalidQuery(
                "add_embeddings: this store embeds with its own model, not the one your vectors come from: pass "
                "the texts to add_texts(), or build the store with embedding=<the Embeddings that made them>"
            )
        return [text for text, _ in text_embeddings]

    def add_embeddings(
        self,
        text_embeddings: Iterable[tuple[str, list[float]]],
        metadatas: list[dict[str, Any]] | None = None,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """The peer's ``add_embeddings``: see :meth:`_texts_of` for what the given vectors become."""
        return self.add_texts(self._texts_of(text_embeddings), metadatas, ids=ids)

    async def aadd_embeddings(
        self,
        text_embeddings: Iterable[tuple[str, list[float]]],
        metadatas: list[dict[str, Any]] | None = None,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        return await self.aadd_texts(self._texts_of(text_embeddings), metadatas, ids=ids)

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        return self._core.bridge.run(lambda c: self._core.delete(c, ids))

    async def adelete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        return await self._core.bridge.arun(lambda c: self._core.delete(c, ids))

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        return [_from_stored(s) for s in self._core.bridge.run(lambda c: self._core.get(c, ids))]

    async def aget_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        return [_from_stored(s) for s in await self._core.bridge.arun(lambda c: self._core.get(c, ids))]

    # -- searches ----------------------------------------------------------------------------------------

    def _request(self, filter: Any, extra: dict[str, Any]) -> tuple[Translated, dict[str, Any]]:
        """A search's filters and options: ``filter`` ours or the peer's clause list; the peer's ``fetch_k``
        (its kNN candidates) our ``num_candidates``; its ``custom_query`` and ``doc_builder`` refused."""
        for name in ("custom_query", "doc_builder"):
            if extra.pop(name, None) is not None:
                raise InvalidQuery(
                    f"{name} is not supported: this store sends its own BM25 and kNN requests and fuses them in "
                    "the client; say a condition with filter= (a mapping, or Elasticsearch term / terms / range / "
                    "exists / ids / bool clauses)"
                )
        if "fetch_k" in extra:
            extra["num_candidates"] = count_argument("fetch_k", extra.pop("fetch_k"))
        options = {**self._options, **check_store_options(extra)}
        if isinstance(filter, list):
            return elasticsearch_filters(filter), options
        return langchain_filter(filter, store=True), options

    def _found(self, query: str, k: Any, filter: Any, extra: dict[str, Any]) -> list[Stored]:
        filters, options = self._request(filter, extra)
        return self._core.bridge.run(lambda c: self._core.search(c, query, k=k, filters=filters, options=options))

    async def _afound(self, query: str, k: Any, filter: Any, extra: dict[str, Any]) -> list[Stored]:
        filters, options = self._request(filter, extra)
        return await self._core.bridge.arun(
            lambda c: self._core.search(c, query, k=k, filters=filters, options=options)
        )

    def similarity_search(self, query: str, k: int = 4, filter: Any = None, **kwargs: Any) -> list[Document]:
        return [_from_stored(s) for s in self._found(query, k, filter, kwargs)]

    async def asimilarity_search(
        self,
        query: str,
        k: int = 4,
        filter: Any = None,
        **kwargs: Any,
    ) -> list[Document]:
        return [_from_stored(s) for s in await self._afound(query, k, filter, kwargs)]

    def similarity_search_with_score(
        self,
        query: str,
        k: int = 4,
        filter: Any = None,
        **kwargs: Any,
    ) -> list[tuple[Document, float]]:
        """Each document with its hit's score (the fused score, or the reranker's when it ran)."""
        return [(_from_stored(s), float(s.score or 0.0)) for s in self._found(query, k, filter, kwargs)]

    async def asimilarity_search_with_score(
        self,
        query: str,
        k: int = 4,
        filter: Any = None,
        **kwargs: Any,
    ) -> list[tuple[Document, float]]:
        return [(_from_stored(s), float(s.score or 0.0)) for s in await self._afound(query, k, filter, kwargs)]

    def _similarity_search_with_relevance_scores(
        self, query: str, k: int = 4, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """Relevance in [0, 1]: the query's similarity to each document (Elasticsearch's kNN score, as the
        peer's), so a ``score_threshold`` means the same for every query; in ``bm25`` mode (no vectors) the
        normalized fused score."""
        filter_ = kwargs.pop("filter", None)
        return [(_from_stored(s), float(s.relevance or 0.0)) for s in self._found(query, k, filter_, kwargs)]

    async def _asimilarity_search_with_relevance_scores(
        self, query: str, k: int = 4, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        filter_ = kwargs.pop("filter", None)
        found = await self._afound(query, k, filter_, kwargs)
        return [(_from_stored(s), float(s.relevance or 0.0)) for s in found]

    def _by_vector(self, embedding: Sequence[float], extra: dict[str, Any]) -> dict[str, Any]:
        """A search by a vector the framework computed: the kNN leg alone, on that vector — taken when the
        store's own ``embedding`` made it (the index holds that model's vectors), refused otherwise."""
        if self._embedding is None:
            raise InvalidQuery(
                "similarity_search_by_vector: this store embeds with its own model, not the one your vector comes "
                "from: pass the query text to similarity_search(query), or build the store with "
                "embedding=<the Embeddings that made it>"
            )
        return {**extra, "mode": "knn", "query_vector": list(embedding)}

    def similarity_search_by_vector(
        self, embedding: list[float], k: int = 4, filter: Any = None, **kwargs: Any
    ) -> list[Document]:
        """The nearest documents to ``embedding`` (kNN; see :meth:`_by_vector` for which vectors are taken)."""
        return [_from_stored(s) for s in self._found("", k, filter, self._by_vector(embedding, kwargs))]

    async def asimilarity_search_by_vector(
        self, embedding: list[float], k: int = 4, filter: Any = None, **kwargs: Any
    ) -> list[Document]:
        return [_from_stored(s) for s in await self._afound("", k, filter, self._by_vector(embedding, kwargs))]

    def similarity_search_by_vector_with_relevance_scores(
        self, embedding: list[float], k: int = 4, filter: Any = None, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """:meth:`similarity_search_by_vector` with each document's similarity in [0, 1] (as the peer's)."""
        found = self._found("", k, filter, self._by_vector(embedding, kwargs))
        return [(_from_stored(s), float(s.relevance or 0.0)) for s in found]

    async def asimilarity_search_by_vector_with_relevance_scores(
        self, embedding: list[float], k: int = 4, filter: Any = None, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        found = await self._afound("", k, filter, self._by_vector(embedding, kwargs))
        return [(_from_stored(s), float(s.relevance or 0.0)) for s in found]

    def max_marginal_relevance_search(
        self,
        query: str,
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        filter: Any = None,
        **kwargs: Any,
    ) -> list[Document]:
        """Our diversity stage (maximal marginal relevance over the fused window): ``fetch_k`` candidates,
        ``lambda_mult`` 1 for relevance only, 0 for the most diverse."""
        extra = {**kwargs, **_mmr(fetch_k, lambda_mult)}
        return [_from_stored(s) for s in self._found(query, k, filter, extra)]

    async def amax_marginal_relevance_search(
        self,
        query: str,
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        filter: Any = None,
        **kwargs: Any,
    ) -> list[Document]:
        extra = {**kwargs, **_mmr(fetch_k, lambda_mult)}
        return [_from_stored(s) for s in await self._afound(query, k, filter, extra)]

    def import_index(
        self, index: str, *, text_field: str = "text", metadata_field: str = "metadata", batch_size: int = 500
    ) -> IndexReport:
        """Copy an index LangChain's ``ElasticsearchStore`` filled (its ``text`` and ``metadata``; ids kept)
        into this store, embedded by this store's embedder: the move from ``ElasticsearchStore`` in one call.
        Returns the report (every document in ``indexed`` or ``failed``)."""

        def convert(doc_id: str, source: Mapping[str, Any]) -> dict[str, Any]:
            metadata = source.get(metadata_field)
            text = str(source.get(text_field) or "")
            return document_fields(doc_id, text, metadata if isinstance(metadata, Mapping) else None)

        fields = [text_field, metadata_field]
        return self._core.bridge.run(
            lambda c: self._core.import_index(c, index, convert=convert, fields=fields, batch_size=batch_size)
        )

    @classmethod
    def from_texts(
        cls,
        texts: list[str],
        embedding: Embeddings | None = None,
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> HybridSearchStore:
        """A store (``kwargs``: as the constructor) with ``texts`` added."""
        store = cls(embedding=embedding, **kwargs)
        store.add_texts(texts, metadatas, ids=ids)
        return store

    def close(self) -> None:
        """Close the client this store made (a client you gave stays open)."""
        self._core.bridge.close()

    async def aclose(self) -> None:
        await self._core.bridge.aclose()


def _mmr(fetch_k: Any, lambda_mult: Any) -> dict[str, Any]:
    if isinstance(lambda_mult, bool) or not isinstance(lambda_mult, int | float) or not 0.0 <= lambda_mult <= 1.0:
        raise InvalidQuery(f"lambda_mult must be a number from 0 to 1, got {lambda_mult!r}")
    return {"window": count_argument("fetch_k", fetch_k), "diversity": 1.0 - float(lambda_mult)}


def check_store_options(options: dict[str, Any]) -> dict[str, Any]:
    """Search options a store passes on (``limit`` and ``filters`` are the store's ``k`` and ``filter``)."""
    if "strategy" in options:
        raise ConfigurationError(
            "strategy= is ElasticsearchStore's: here every search is hybrid, fused in the client (no rrf retriever, "
            "so it works on the Basic license); pass mode='knn' or mode='bm25' to ask for one leg"
        )
    return store_options(options, instead="pass k= / filter= to the search")
