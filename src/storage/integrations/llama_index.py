"""Our hybrid search as a LlamaIndex retriever (``pip install 'hybrid-search-es[llama-index]'``).

::

    from storage.integrations.llama_index import HybridSearchRetriever

    retriever = HybridSearchRetriever.from_settings(limit=5)       # ES_URL, EMBEDDINGS_*, ...
    nodes = retriever.retrieve("revenue guidance")                 # also await aretrieve(...)
    nodes[0].node.metadata["id"], nodes[0].score

A ``llama_index.core`` :class:`~llama_index.core.retrievers.BaseRetriever` over
:meth:`SearchClient.search`, returning :class:`~llama_index.core.schema.NodeWithScore`: a ``TextNode``
whose ``id_`` is the hit's id, whose text is the title and text, and whose ``metadata`` carries our
provenance (``id``, scores, per-leg ranks and scores, highlights, ``degraded`` / ``partial``); the score is
what ordered the list. The provenance is kept out of what the node shows an LLM or an embedding model
(``excluded_llm_metadata_keys`` / ``excluded_embed_metadata_keys``): the stored fields (title, source,
date...) stay in.

:class:`HybridSearchVectorStore` is a drop-in for LlamaIndex's ``ElasticsearchStore``: a vector store that
``VectorStoreIndex.from_documents`` / ``from_vector_store`` use as they use that one, with the query modes
``default`` (kNN), ``hybrid`` (BM25 + kNN fused in the client: no ``rrf`` retriever, so it works on the Basic
license), ``text_search`` (BM25) and ``mmr``; ``similarity_top_k``; ``MetadataFilters`` on the nodes'
metadata. A node comes back as it went in (its serialized form is kept whole)::

    store = HybridSearchVectorStore(index_name="docs", es_url="http://localhost:9200")
    index = VectorStoreIndex.from_documents(docs, storage_context=StorageContext.from_defaults(vector_store=store))
    index.as_retriever(similarity_top_k=3, vector_store_query_mode="hybrid").retrieve("revenue guidance")
"""

from __future__ import annotations

from typing import Any

try:
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import BaseNode, MetadataMode, NodeWithScore, QueryBundle, TextNode
    from llama_index.core.vector_stores.types import (
        BasePydanticVectorStore,
        MetadataFilters,
        VectorStoreQuery,
        VectorStoreQueryMode,
        VectorStoreQueryResult,
    )
    from llama_index.core.vector_stores.utils import metadata_dict_to_node, node_to_metadata_dict
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "the LlamaIndex retriever needs the 'llama-index' extra: pip install 'hybrid-search-es[llama-index]'"
    ) from exc

from collections.abc import Mapping, Sequence

from pydantic import PrivateAttr

from embeddings import CallableEmbedder, Embedder

from .._admin import id_list
from .._client import SearchClient
from .._dsl.filters import Filter, condition
from .._errors import ConfigurationError, InvalidQuery
from .._settings import SearchSettings
from .._types.models import IndexReport
from ._common import Content, Retrieved, RetrieverCore
from ._dialects import count_argument, elasticsearch_filters, llama_index_filters
from ._peers import is_elasticsearch_client, peer_arguments, store_connection
from ._store import StoreCore, Stored, document_fields, open_store, our_documents, store_options

__all__ = ["HybridSearchRetriever", "HybridSearchVectorStore"]

#: Provenance keys: in the metadata for the caller, not in the text an LLM or an embedder is given.
_PROVENANCE = [
    "id",
    "score",
    "fused_score",
    "normalized_score",
    "rerank_score",
    "ranks",
    "leg_scores",
    "highlights",
    "degraded",
    "degraded_reason",
    "legs_failed",
    "partial",
]


def _node(hit: Retrieved) -> NodeWithScore:
    node = TextNode(
        id_=hit.id,
        text=hit.content,
        metadata=hit.metadata,
        excluded_llm_metadata_keys=list(_PROVENANCE),
        excluded_embed_metadata_keys=list(_PROVENANCE),
    )
    return NodeWithScore(node=node, score=hit.score)


_NO_TEXT = (
    "a query without query_str is searched by its query_embedding alone, in the default (kNN) or mmr mode; "
    "hybrid and text_search need the text (query_str)"
)
_FOREIGN = (
    "this store embeds with its own model, not the one your query_embedding comes from: pass query_str (the "
    "store embeds it), or build the store with embed_model=<the model that made it>"
)


def _similarity(found: Stored) -> float:
    """A node's similarity as the peer gives it: Elasticsearch's kNN score, in [0, 1] and comparable across
    queries (so ``SimilarityPostprocessor(similarity_cutoff=...)`` means the same for every query); in
    ``bm25`` mode the BM25 score."""
    for value in (found.similarity, found.bm25_score, found.score):
        if value is not None:
            return float(value)
    return 0.0


class HybridSearchRetriever(BaseRetriever):
    """Hybrid (BM25 + kNN, fused in the client) search as a LlamaIndex retriever.

    ``HybridSearchRetriever(client=..., **options)`` uses your :class:`SearchClient` (yours to close);
    ``HybridSearchRetriever.from_settings(**options)`` makes one from the environment on a loop of its own
    (``close()`` it when done). ``options`` are :meth:`SearchClient.search` arguments (``mode``, ``limit``,
    ``filters``, ``tenant_id``, ``rerank``, ``fusion``, ``strict``...), and LlamaIndex's own names:
    ``similarity_top_k`` (``limit``) and ``filters=MetadataFilters(...)`` (``==``, ``in``, ranges; ``and``,
    ``or`` of equalities on one key). ``content``: a node holds a long document's best passages
    (``passages``, the default) or its whole text (``text``).
    """

    def __init__(
        self,
        *,
        client: SearchClient | None = None,
        settings: SearchSettings | None = None,
        callback_manager: Any = None,
        content: Content = "passages",
        **options: Any,
    ) -> None:
        if "similarity_top_k" in options:  # LlamaIndex's names as ours
            options["limit"] = count_argument("similarity_top_k", options.pop("similarity_top_k"))
        if options.get("filters") is not None and not isinstance(options["filters"], dict | list):
            options["filters"] = llama_index_filters(options["filters"])
        self._core = RetrieverCore(client, settings=settings, options=options, content=content)
        super().__init__(callback_manager=callback_manager)

    @classmethod
    def from_settings(cls, settings: SearchSettings | None = None, **options: Any) -> HybridSearchRetriever:
        """A retriever with a client of its own, made from ``settings`` (default: the environment)."""
        return cls(settings=settings, **options)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [_node(hit) for hit in self._core.search(query_bundle.query_str)]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [_node(hit) for hit in await self._core.asearch(query_bundle.query_str)]

    def close(self) -> None:
        """Close the client this retriever made (``from_settings``); a client you gave stays open."""
        self._core.close()

    async def aclose(self) -> None:
        await self._core.aclose()


#: LlamaIndex's query modes -> ours (MMR: kNN with our diversity stage).
_MODES = {
    VectorStoreQueryMode.DEFAULT: "knn",
    VectorStoreQueryMode.HYBRID: "hybrid",
    VectorStoreQueryMode.TEXT_SEARCH: "bm25",
    VectorStoreQueryMode.SPARSE: "bm25",
    VectorStoreQueryMode.MMR: "knn",
}


#: ElasticsearchStore's field names, with their defaults (this index has the same roles under its own names).
_PEER_FIELDS = {"text_field": "content", "vector_field": "embedding"}


def _strategy_mode(strategy: Any) -> str:
    """ElasticsearchStore's ``retrieval_strategy`` as what the ``default`` query mode searches here."""
    name = type(strategy).__name__.removeprefix("Async")
    if name == "DenseVectorStrategy" and not getattr(strategy, "hybrid", False):
        return "knn"
    if name == "DenseVectorStrategy":
        if getattr(strategy, "rrf", True) is not True:
            raise ConfigurationError(
                "retrieval_strategy: a hybrid strategy's own rrf settings are not taken; hybrid here is fused in "
                "the client: pass fusion=FusionSetting(...) as a store option"
            )
        return "hybrid"
    if name == "BM25Strategy":
        return "bm25"
    raise ConfigurationError(
        f"retrieval_strategy={name} is not supported: this store searches by its own embedder's vectors "
        "(DenseVectorStrategy), BM25 (BM25Strategy) or both (DenseVectorStrategy(hybrid=True)); "
        "or pass default_mode='knn' | 'bm25' | 'hybrid'"
    )


def _llama_embedder(model: BaseEmbedding) -> CallableEmbedder:
    """A LlamaIndex embedding model as our embedder."""

    async def texts(batch: list[str]) -> list[list[float]]:
        return await model.aget_text_embedding_batch(batch)

    return CallableEmbedder(f"llama-index:{model.model_name}", texts, model.aget_query_embedding)


def _copies(node: BaseNode) -> dict[str, Any]:
    """The node's metadata our filters read (and its ``ref_doc_id``, which ``delete`` goes by)."""
    copies = dict(node.metadata or {})
    if node.ref_doc_id:
        copies["ref_doc_id"] = node.ref_doc_id
    return copies


def _node_of(found: Stored) -> BaseNode:
    """A stored node as it went in (its serialized form), or a ``TextNode`` for a document our API wrote."""
    if "_node_content" in found.metadata:
        node = metadata_dict_to_node(found.metadata, text=found.content)
        node.embedding = None
        return node
    return TextNode(id_=found.id, text=found.content, metadata=found.metadata)


class HybridSearchVectorStore(BasePydanticVectorStore):
    """LlamaIndex's vector store on our index: a drop-in for its ``ElasticsearchStore``.

    Built like that one: ``index_name``, ``es_url`` / ``es_api_key`` / ``es_user`` / ``es_password`` /
    ``es_cloud_id`` (default ``ES_*``), and ``embed_model`` (a LlamaIndex embedding; default our own embedder,
    ``EMBEDDINGS_*``) — or ``client``: a :class:`SearchClient` shared with retrievers and other stores. The
    store embeds what it indexes and the query itself (``is_embedding_query`` is False: LlamaIndex does not
    embed the query for it). ``default_mode``: what the ``default`` query mode searches (``knn``, as
    LlamaIndex's; ``hybrid`` makes every query hybrid). ``refresh`` (default True): a write is searchable
    when it returns. ``tenant_id``: the store is that tenant's (its writes carry it, its reads and deletes see
    only its documents). ``options``: other :meth:`SearchClient.search` arguments (``rerank``...).
    """

    stores_text: bool = True
    is_embedding_query: bool = False
    flat_metadata: bool = False

    _core: StoreCore = PrivateAttr()
    _options: dict[str, Any] = PrivateAttr()
    _default_mode: str = PrivateAttr()
    #: A query's own ``query_embedding`` is searched when the store's ``embed_model`` made it.
    _vectors_taken: bool = PrivateAttr(default=False)

    def __init__(
        self,
        index_name: str | None = None,
        *,
        client: SearchClient | None = None,
        embed_model: BaseEmbedding | None = None,
        embedder: Embedder | None = None,
        es_url: str | None = None,
        es_cloud_id: str | None = None,
        es_api_key: str | None = None,
        es_user: str | None = None,
        es_password: str | None = None,
        settings: SearchSettings | None = None,
        default_mode: str | None = None,
        refresh: bool = True,
        tenant_id: str | None = None,
        es_client: Any = None,
        retrieval_strategy: Any = None,
        **options: Any,
    ) -> None:
        super().__init__(stores_text=True)
        mapped = peer_arguments(options, fields=_PEER_FIELDS)
        if retrieval_strategy is not None:
            if default_mode is not None:
                raise ConfigurationError("pass retrieval_strategy (ElasticsearchStore's) or default_mode, not both")
            default_mode = _strategy_mode(retrieval_strategy)
        default_mode = default_mode or "knn"
        if es_client is not None:
            if not is_elasticsearch_client(es_client):
                raise ConfigurationError(
                    f"es_client must be an Elasticsearch client, got {type(es_client).__name__}"
                    + (": pass a SearchClient as client=" if isinstance(es_client, SearchClient) else "")
                )
            if client is not None:
                raise ConfigurationError("pass es_client alone, not with client= (a SearchClient)")
        connection = store_connection(
            url=es_url,
            cloud_id=es_cloud_id,
            username=es_user,
            password=es_password,
            api_key=es_api_key,
            es=es_client,
            alone="es_client",
        )
        if default_mode not in ("knn", "hybrid", "bm25"):
            raise ConfigurationError(f"default_mode must be 'knn', 'hybrid' or 'bm25', got {default_mode!r}")
        self._options = store_options(
            options, instead="the query says it", reserved=("limit", "filters", "mode", "query")
        )
        self._default_mode = default_mode
        self._vectors_taken = embed_model is not None
        if embed_model is not None and embedder is not None:
            raise ConfigurationError("pass embed_model (LlamaIndex's) or embedder (ours), not both")
        self._core = open_store(
            client,
            settings=settings,
            embedder=_llama_embedder(embed_model) if embed_model is not None else embedder,
            foreign=embed_model is not None,
            refresh=refresh,
            tenant_id=tenant_id,
            index=index_name,
            **connection,
            **(mapped if client is None else {}),
        )

    @property
    def client(self) -> Any:
        """The bridge to the :class:`SearchClient` this store runs on."""
        return self._core.bridge

    # -- writes ----------------------------------------------------------------------------------------

    def _documents(self, nodes: Sequence[BaseNode]) -> list[Any]:
        items = [(node.node_id, node.get_content(metadata_mode=MetadataMode.NONE), _copies(node)) for node in nodes]
        payloads = [node_to_metadata_dict(n, remove_text=True, flat_metadata=self.flat_metadata) for n in nodes]
        return our_documents(items, payloads)

    def import_index(
        self, index: str, *, text_field: str = "content", metadata_field: str = "metadata", batch_size: int = 500
    ) -> IndexReport:
        """Copy an index LlamaIndex's ``ElasticsearchStore`` filled (each node's text in ``content``, its
        serialized form in ``metadata``; ids kept) into this store, embedded by this store's embedder: the move
        from ``ElasticsearchStore`` in one call. Returns the report (every node in ``indexed`` or ``failed``)."""

        def convert(doc_id: str, source: Mapping[str, Any]) -> dict[str, Any]:
            metadata = source.get(metadata_field)
            given = dict(metadata) if isinstance(metadata, Mapping) else {}
            text = str(source.get(text_field) or "")
            node = metadata_dict_to_node(given, text=text) if "_node_content" in given else None
            if node is None:  # (metadata another writer left: the node is its text and that metadata)
                node = TextNode(id_=doc_id, text=text, metadata=given)
            payload = node_to_metadata_dict(node, remove_text=True, flat_metadata=self.flat_metadata)
            return document_fields(doc_id, text, _copies(node), payload)

        fields = [text_field, metadata_field]
        return self._core.bridge.run(
            lambda c: self._core.import_index(c, index, convert=convert, fields=fields, batch_size=batch_size)
        )

    def add(self, nodes: Sequence[BaseNode], **add_kwargs: Any) -> list[str]:
        documents = self._documents(nodes)
        return self._core.bridge.run(lambda c: self._core.add(c, documents))

    async def async_add(self, nodes: Sequence[BaseNode], **add_kwargs: Any) -> list[str]:
        documents = self._documents(nodes)
        return await self._core.bridge.arun(lambda c: self._core.add(c, documents))

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        """Delete every node of the document ``ref_doc_id``."""
        self._core.bridge.run(lambda c: self._core.delete_matching(c, {"metadata.ref_doc_id": ref_doc_id}))

    async def adelete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        await self._core.bridge.arun(lambda c: self._core.delete_matching(c, {"metadata.ref_doc_id": ref_doc_id}))

    def _scope(self, node_ids: list[str] | None, filters: MetadataFilters | None) -> list[Filter]:
        scope = list(llama_index_filters(filters, store=True) or [])
        if node_ids is not None:
            scope.append(condition("id", id_list(node_ids)))
        return scope

    def delete_nodes(
        self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None, **delete_kwargs: Any
    ) -> None:
        """Delete the nodes of ``node_ids`` that ``filters`` match (an empty list: none; neither: every node)."""
        if node_ids is not None and not node_ids:
            return
        scope = self._scope(node_ids, filters)
        self._core.bridge.run(lambda c: self._core.delete_matching(c, scope))

    async def adelete_nodes(
        self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None, **delete_kwargs: Any
    ) -> None:
        if node_ids is not None and not node_ids:
            return
        scope = self._scope(node_ids, filters)
        await self._core.bridge.arun(lambda c: self._core.delete_matching(c, scope))

    def clear(self) -> None:
        """Delete every node (the index stays)."""
        self._core.bridge.run(lambda c: self._core.delete_matching(c, None))

    async def aclear(self) -> None:
        await self._core.bridge.arun(lambda c: self._core.delete_matching(c, None))

    async def _get(self, c: SearchClient, node_ids: list[str] | None, filters: MetadataFilters | None) -> list[Stored]:
        ids = id_list(node_ids) if node_ids is not None and filters is None else None
        if node_ids is not None and not node_ids:
            return []
        if ids is None:
            return await self._core.filtered(c, self._scope(node_ids, filters))
        return await self._core.get(c, ids)

    def get_nodes(self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None) -> list[BaseNode]:
        return [_node_of(s) for s in self._core.bridge.run(lambda c: self._get(c, node_ids, filters))]

    async def aget_nodes(
        self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None
    ) -> list[BaseNode]:
        return [_node_of(s) for s in await self._core.bridge.arun(lambda c: self._get(c, node_ids, filters))]

    # -- queries ---------------------------------------------------------------------------------------

    def _search(self, query: VectorStoreQuery, given: dict[str, Any]) -> tuple[str, Any, list[Filter], dict[str, Any]]:
        """The search ``query`` asks for; ``given``: ElasticsearchStore's ``query()`` arguments (``es_filter``
        translated, ``metadata_keyword_suffix`` read, ``custom_query`` refused: never ignored)."""
        if given.pop("custom_query", None) is not None:
            raise InvalidQuery(
                "custom_query is not supported: this store sends its own BM25 and kNN requests and fuses them in "
                "the client; say the condition with filters= (MetadataFilters) or es_filter= (term, terms, range, "
                "exists, ids, bool)"
            )
        suffix = given.pop("metadata_keyword_suffix", ".keyword")
        es_filter = given.pop("es_filter", None)
        if given:
            raise InvalidQuery(f"unknown query argument(s) {sorted(given)}: es_filter and custom_query are taken")
        if query.mode not in _MODES:
            raise InvalidQuery(
                f"the query mode {query.mode.value!r} is not supported: use default, hybrid, text_search or mmr"
            )
        mode = self._default_mode if query.mode == VectorStoreQueryMode.DEFAULT else _MODES[query.mode]
        options: dict[str, Any] = {**self._options, "mode": mode}
        vector = query.query_embedding if self._vectors_taken and mode != "bm25" else None
        if vector is not None:  # (the store's own embed_model made it: the kNN leg searches it, no second call)
            options["query_vector"] = list(vector)
        if not query.query_str and (vector is None or mode != "knn"):
            foreign = query.query_embedding is not None and not self._vectors_taken
            raise InvalidQuery(_FOREIGN if foreign else _NO_TEXT)
        if query.mode == VectorStoreQueryMode.MMR:
            threshold = 0.5 if query.mmr_threshold is None else query.mmr_threshold
            if not 0.0 <= threshold <= 1.0:
                raise InvalidQuery(f"mmr_threshold must be from 0 to 1, got {threshold!r}")
            options["diversity"] = 1.0 - threshold
        scope = self._scope(query.node_ids or None, query.filters)  # (a retriever sends [] for "not set")
        if query.doc_ids:
            scope.append(condition("metadata.ref_doc_id", list(query.doc_ids)))
        scope.extend(elasticsearch_filters(es_filter, suffix=suffix) or [])
        k = (
            query.hybrid_top_k
            if query.mode == VectorStoreQueryMode.HYBRID and query.hybrid_top_k
            else query.similarity_top_k
        )
        return query.query_str or "", k, scope, options

    @staticmethod
    def _result(found: list[Stored]) -> VectorStoreQueryResult:
        return VectorStoreQueryResult(
            nodes=[_node_of(s) for s in found],
            similarities=[_similarity(s) for s in found],
            ids=[s.id for s in found],
        )

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        text, k, scope, options = self._search(query, kwargs)
        found = self._core.bridge.run(lambda c: self._core.search(c, text, k=k, filters=scope or None, options=options))
        return self._result(found)

    async def aquery(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        text, k, scope, options = self._search(query, kwargs)
        found = await self._core.bridge.arun(
            lambda c: self._core.search(c, text, k=k, filters=scope or None, options=options)
        )
        return self._result(found)

    def close(self) -> None:
        """Close the client this store made (a client you gave stays open)."""
        self._core.bridge.close()

    async def aclose(self) -> None:
        await self._core.bridge.aclose()
