"""Our hybrid search as a Haystack document store and component (``pip install 'hybrid-search-es[haystack]'``).

::

    from haystack import Pipeline
    from storage.integrations.haystack import HybridSearchRetriever

    pipeline = Pipeline()
    pipeline.add_component("retriever", HybridSearchRetriever.from_settings(limit=5))
    result = pipeline.run({"retriever": {"query": "revenue guidance", "filters": {"ticker": "AAPL"}}})
    result["retriever"]["documents"][0].meta["ranks"]

A ``haystack-ai`` ``@component`` with ``run`` and ``run_async`` (for ``AsyncPipeline``), over
:meth:`SearchClient.search`: hybrid on the Basic license, where Haystack's Elasticsearch hybrid sends the
``rrf`` retriever Basic refuses. It returns ``documents``: each a Haystack
:class:`~haystack.dataclasses.Document` with the hit's id, the title and text as ``content``, the score
that ordered the list, and our provenance in ``meta`` (``id``, scores, per-leg ranks and scores,
highlights, ``degraded`` / ``partial``). ``filters`` take Haystack's filter syntax or this library's
filter model (``{"ticker": "AAPL", "published_at": {"gte": "2024-01-01"}}``); ``top_k`` overrides
``limit``. Built ``from_settings`` it serializes with its pipeline (``to_dict``: the
options only; the connection comes from the environment where the pipeline is loaded).

:class:`HybridSearchDocumentStore` is a Haystack ``DocumentStore``, a drop-in for
``ElasticsearchDocumentStore`` (``hosts``, ``index``, ``api_key``; or ``client=`` a shared
:class:`SearchClient`)::

    store = HybridSearchDocumentStore(hosts="http://localhost:9200", index="my-docs")
    store.write_documents(documents, policy=DuplicatePolicy.OVERWRITE)
    store.filter_documents({"field": "meta.year", "operator": ">=", "value": 2020})
    pipeline.add_component("retriever", HybridSearchRetriever(document_store=store, top_k=5))

A Haystack document is kept whole (its ``to_dict``: content, meta with its types, embedding, blob) and comes
back equal to what was written; its content is embedded by the store's embedder (the document's own
``embedding`` is kept, not searched). ``filter_documents`` takes Haystack's whole filter syntax (fields
``id`` and ``meta.<key>``; numbers and ISO dates compared as such), translated once into our filter model.
Each error below is Haystack's and ours at once (a ``FilterError`` and an :class:`~storage.InvalidQuery`...).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

try:
    from haystack import Document, component, default_from_dict, default_to_dict
    from haystack.document_stores.types import DuplicatePolicy, FilterPolicy, apply_filter_policy
    from haystack.utils import Secret, deserialize_secrets_inplace
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "the Haystack component needs the 'haystack' extra: pip install 'hybrid-search-es[haystack]'"
    ) from exc

from embeddings import Embedder

from ..._client import SearchClient
from ..._dsl.filters import Filter
from ..._errors import ConfigurationError, InvalidQuery
from ..._settings import SearchSettings
from ..._types.models import IndexReport
from .._common import Content, Retrieved, RetrieverCore, check_options
from .._dialects import count_argument, haystack_filters
from .._peers import Refresh, api_key_of, haystack_arguments, refresh_of
from .._store import StoreCore, document_fields, open_store, store_options
from ._documents import (
    DuplicateDocuments,
    FilterNotSupported,
    NotDocuments,
    checked,
    ours,
    payload,
    peer_retriever_options,
    store_filters,
    stored_document,
)

__all__ = [
    "DuplicateDocuments",
    "FilterNotSupported",
    "HybridSearchDocumentStore",
    "HybridSearchRetriever",
    "NotDocuments",
]


class HybridSearchDocumentStore:
    """Haystack's ``DocumentStore`` on our index: a drop-in for ``ElasticsearchDocumentStore``.

    Built like that one — ``hosts`` (a URL), ``index``, ``api_key`` (a Haystack ``Secret``; default the
    ``ES_*`` environment, as for every client of ours) — or on ``client``: a :class:`SearchClient` shared with
    retrievers and other stores (yours to close). ``embedder``: what embeds the documents' content (default
    ours, ``EMBEDDINGS_*``). ``refresh`` (default True): a write is visible to reads when it returns.
    ``tenant_id``: the store is that tenant's (its writes carry it, its reads and deletes see only its
    documents).
    """

    def __init__(
        self,
        *,
        hosts: str | None = None,
        index: str | None = None,
        api_key: Secret | str | None = None,
        api_key_id: Secret | str | None = None,
        client: SearchClient | None = None,
        settings: SearchSettings | None = None,
        embedder: Embedder | None = None,
        refresh: bool = True,
        tenant_id: str | None = None,
        **peer: Any,
    ) -> None:
        connection = haystack_arguments(peer)
        if hosts is not None and not isinstance(hosts, str):
            raise ConfigurationError(f"hosts must be one URL (a string), got {type(hosts).__name__}")
        self._init: dict[str, Any] = {"hosts": hosts, "index": index, "refresh": refresh, "tenant_id": tenant_id}
        self._api_key, self._api_key_id = api_key, api_key_id
        self._serializable = client is None and settings is None and embedder is None
        key = api_key_of(api_key, api_key_id)
        self._core: StoreCore = open_store(
            client,
            settings=settings,
            embedder=embedder,
            foreign=False,
            refresh=refresh,
            tenant_id=tenant_id,
            index=index,
            url=hosts,
            api_key=key,
            **connection,
        )

    def to_dict(self) -> dict[str, Any]:
        """Its construction arguments (an ``api_key`` as its ``Secret`` says: an environment variable's name,
        never a token); a store built on a client or explicit settings cannot be serialized."""
        if not self._serializable:
            raise ConfigurationError(
                "a HybridSearchDocumentStore built from a SearchClient, settings or an embedder cannot be "
                "serialized: build it with hosts=/index=/api_key= (or the ES_* environment)"
            )
        keys = {  # (a key given as a plain string is not written out: None, as the peer does)
            name: value.to_dict() if isinstance(value, Secret) else None
            for name, value in (("api_key", self._api_key), ("api_key_id", self._api_key_id))
        }
        return default_to_dict(self, **self._init, **keys)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HybridSearchDocumentStore:
        deserialize_secrets_inplace(data["init_parameters"], keys=["api_key", "api_key_id"])
        return default_from_dict(cls, data)

    # -- reads -----------------------------------------------------------------------------------------

    def count_documents(self) -> int:
        return self._core.bridge.run(lambda c: self._core.count(c))

    async def count_documents_async(self) -> int:
        return await self._core.bridge.arun(lambda c: self._core.count(c))

    def count_documents_by_filter(self, filters: dict[str, Any]) -> int:
        ours = store_filters(filters)
        return self._core.bridge.run(lambda c: self._core.count(c, ours))

    async def count_documents_by_filter_async(self, filters: dict[str, Any]) -> int:
        ours = store_filters(filters)
        return await self._core.bridge.arun(lambda c: self._core.count(c, ours))

    # -- the peer's metadata statistics: refused by design, each saying what to use instead ------------------
    # (A document's metadata is kept whole in its payload and as keywords for filters: an int 1 and a str "1"
    # are one keyword, so per-type statistics the peer reads from typed mappings cannot be honoured here.)

    def count_unique_metadata_by_filter(self, filters: dict[str, Any], metadata_fields: list[str]) -> dict[str, int]:
        raise _not_offered("count_unique_metadata_by_filter")

    async def count_unique_metadata_by_filter_async(
        self, filters: dict[str, Any], metadata_fields: list[str]
    ) -> dict[str, int]:
        raise _not_offered("count_unique_metadata_by_filter_async")

    def get_metadata_fields_info(self) -> dict[str, dict[str, str]]:
        raise _not_offered("get_metadata_fields_info")

    async def get_metadata_fields_info_async(self) -> dict[str, dict[str, str]]:
        raise _not_offered("get_metadata_fields_info_async")

    def get_metadata_field_min_max(self, metadata_field: str) -> dict[str, Any]:
        raise _not_offered("get_metadata_field_min_max")

    async def get_metadata_field_min_max_async(self, metadata_field: str) -> dict[str, Any]:
        raise _not_offered("get_metadata_field_min_max_async")

    def get_metadata_field_unique_values(self, metadata_field: str, *args: Any, **kwargs: Any) -> Any:
        raise _not_offered("get_metadata_field_unique_values")

    async def get_metadata_field_unique_values_async(self, metadata_field: str, *args: Any, **kwargs: Any) -> Any:
        raise _not_offered("get_metadata_field_unique_values_async")

    def filter_documents(self, filters: dict[str, Any] | None = None) -> list[Document]:
        """Every document ``filters`` (Haystack's syntax; None or ``{}``: all) match."""
        ours = store_filters(filters)
        return [stored_document(s) for s in self._core.bridge.run(lambda c: self._core.filtered(c, ours))]

    async def filter_documents_async(self, filters: dict[str, Any] | None = None) -> list[Document]:
        ours = store_filters(filters)
        return [stored_document(s) for s in await self._core.bridge.arun(lambda c: self._core.filtered(c, ours))]

    # -- writes ----------------------------------------------------------------------------------------

    def write_documents(
        self, documents: list[Document], policy: DuplicatePolicy = DuplicatePolicy.NONE, refresh: Refresh = None
    ) -> int:
        """Write ``documents``; how many were written. ``policy``: ``OVERWRITE`` replaces a document of the
        same id, ``SKIP`` leaves it, ``FAIL`` and ``NONE`` (the default, as Elasticsearch's store) raise
        :class:`DuplicateDocuments` and write nothing. ``refresh`` (``True``, ``"wait_for"``, ``False``;
        default the store's): the write is visible to reads when the call returns."""
        given = checked(documents)
        return self._core.bridge.run(lambda c: self._write(c, given, policy, refresh_of(refresh)))

    async def write_documents_async(
        self, documents: list[Document], policy: DuplicatePolicy = DuplicatePolicy.NONE, refresh: Refresh = None
    ) -> int:
        given = checked(documents)
        return await self._core.bridge.arun(lambda c: self._write(c, given, policy, refresh_of(refresh)))

    async def _write(
        self, client: SearchClient, documents: list[Document], policy: DuplicatePolicy, refresh: bool | None
    ) -> int:
        if policy == DuplicatePolicy.OVERWRITE:
            chosen = list({d.id: d for d in documents}.values())  # (the last of an id given twice)
            await self._core.add(client, ours(chosen), refresh=refresh)
            return len(chosen)
        first: dict[str, Document] = {}
        for d in documents:
            first.setdefault(d.id, d)
        if policy != DuplicatePolicy.SKIP:  # FAIL / NONE: nothing is written when an id is known already
            held = await self._core.existing(client, list(first))
            if held or len(first) < len(documents):
                repeated = {i for i, n in Counter(d.id for d in documents).items() if n > 1}
                raise DuplicateDocuments(sorted(held | repeated))
        # Written with Elasticsearch's create: an id another writer wrote meanwhile is never overwritten.
        written, existed = await self._core.add_new(client, ours(list(first.values())), refresh=refresh)
        if existed and policy != DuplicatePolicy.SKIP:
            raise DuplicateDocuments(existed, written=len(written))
        return len(written)

    def delete_documents(self, document_ids: list[str], refresh: Refresh = None) -> None:
        """Delete the documents of ``document_ids`` (an id the store does not hold is not an error)."""
        self._core.bridge.run(lambda c: self._core.delete(c, document_ids, refresh=refresh_of(refresh)))

    async def delete_documents_async(self, document_ids: list[str], refresh: Refresh = None) -> None:
        await self._core.bridge.arun(lambda c: self._core.delete(c, document_ids, refresh=refresh_of(refresh)))

    def delete_by_filter(self, filters: dict[str, Any], refresh: Refresh = None) -> int:
        """Delete every document ``filters`` match; how many."""
        ours = store_filters(filters)
        return self._core.bridge.run(lambda c: self._core.delete_matching(c, ours, refresh=refresh_of(refresh)))

    async def delete_by_filter_async(self, filters: dict[str, Any], refresh: Refresh = None) -> int:
        ours = store_filters(filters)
        return await self._core.bridge.arun(lambda c: self._core.delete_matching(c, ours, refresh=refresh_of(refresh)))

    def update_by_filter(self, filters: dict[str, Any], meta: dict[str, Any], refresh: Refresh = None) -> int:
        """Merge ``meta`` into the meta of every document ``filters`` match (each written again, so its
        content is embedded again); how many."""
        ours = store_filters(filters)
        return self._core.bridge.run(lambda c: self._update(c, ours, meta, refresh_of(refresh)))

    async def update_by_filter_async(
        self, filters: dict[str, Any], meta: dict[str, Any], refresh: Refresh = None
    ) -> int:
        ours = store_filters(filters)
        return await self._core.bridge.arun(lambda c: self._update(c, ours, meta, refresh_of(refresh)))

    async def _update(
        self, client: SearchClient, filters: list[Filter] | None, meta: dict[str, Any], refresh: bool | None
    ) -> int:
        if not isinstance(meta, dict):
            raise InvalidQuery(f"meta must be a dict, got {type(meta).__name__}")
        found = [stored_document(s) for s in await self._core.filtered(client, filters)]
        updated = [Document.from_dict({**d.to_dict(flatten=False), "meta": {**d.meta, **meta}}) for d in found]
        await self._core.add(client, ours(updated), refresh=refresh)
        return len(updated)

    def delete_all_documents(self, recreate_index: bool = False, refresh: Refresh = None) -> None:
        """Delete every document; ``recreate_index``: delete the index itself and create it anew."""
        self._core.bridge.run(lambda c: self._core.delete_all(c, recreate=recreate_index, refresh=refresh_of(refresh)))

    async def delete_all_documents_async(self, recreate_index: bool = False, refresh: Refresh = None) -> None:
        await self._core.bridge.arun(
            lambda c: self._core.delete_all(c, recreate=recreate_index, refresh=refresh_of(refresh))
        )

    def import_index(self, index: str, *, batch_size: int = 500) -> IndexReport:
        """Copy an index Haystack's ``ElasticsearchDocumentStore`` filled (each ``_source`` a document's
        ``to_dict()``; ids kept) into this store, embedded by this store's embedder: the move from
        ``ElasticsearchDocumentStore`` in one call. Returns the report (every document in ``indexed`` or
        ``failed``)."""

        def convert(doc_id: str, source: Mapping[str, Any]) -> dict[str, Any]:
            given = {k: v for k, v in source.items() if k not in ("score", "sparse_embedding")}
            doc = Document.from_dict({**given, "id": doc_id})
            return document_fields(doc.id, doc.content or "", doc.meta, payload(doc))

        return self._core.bridge.run(
            lambda c: self._core.import_index(c, index, convert=convert, fields=None, batch_size=batch_size)
        )

    # -- search (the retriever's) ----------------------------------------------------------------------

    def _search(
        self, query: str, filters: dict[str, Any] | None, top_k: int, options: dict[str, Any], scale: bool = False
    ) -> list[Document]:
        ours = store_filters(filters)
        found = self._core.bridge.run(lambda c: self._core.search(c, query, k=top_k, filters=ours, options=options))
        return [stored_document(s, scale_score=scale) for s in found]

    async def _asearch(
        self, query: str, filters: dict[str, Any] | None, top_k: int, options: dict[str, Any], scale: bool = False
    ) -> list[Document]:
        ours = store_filters(filters)
        found = await self._core.bridge.arun(
            lambda c: self._core.search(c, query, k=top_k, filters=ours, options=options)
        )
        return [stored_document(s, scale_score=scale) for s in found]

    def close(self) -> None:
        """Close the client this store made (a client you gave stays open)."""
        self._core.bridge.close()

    async def aclose(self) -> None:
        await self._core.bridge.aclose()

    close_async = aclose  # (the peer's name)


def _document(hit: Retrieved) -> Document:
    return Document(id=hit.id, content=hit.content, meta=hit.metadata, score=hit.score)


def _not_offered(method: str) -> NotImplementedError:
    """The peer's metadata statistics: not offered, and what to use instead."""
    return NotImplementedError(
        f"{method} is not offered by this store: it keeps metadata as keywords for filters, not as typed fields. "
        "Count documents per value with SearchClient.search(query, facets=['metadata.<key>']) (filters apply), "
        "or count_documents_by_filter() for one value"
    )


def _overrides(filters: dict[str, Any] | None, top_k: int | None) -> dict[str, Any]:
    """Haystack's names as ours: ``top_k`` is ``limit``; ``filters`` in Haystack's syntax (or ours)."""
    out: dict[str, Any] = {}
    if filters is not None:
        out["filters"] = haystack_filters(filters)
    if top_k is not None:
        out["limit"] = count_argument("top_k", top_k)
    return out


@component
class HybridSearchRetriever:
    """Hybrid (BM25 + kNN, fused in the client) search as a Haystack retriever component.

    ``HybridSearchRetriever(client=..., **options)`` uses your :class:`SearchClient` (yours to close);
    ``HybridSearchRetriever.from_settings(**options)`` makes one from the environment on a loop of its own
    (``close()`` it when done). ``options`` are :meth:`SearchClient.search` arguments (``mode``, ``limit``,
    ``filters``, ``tenant_id``, ``rerank``, ``fusion``, ``strict``...), and Haystack's own: ``top_k``
    (``limit``) and ``filters`` in Haystack's syntax (``{"field": "meta.x", "operator": "==", "value": ..}``,
    ``AND``/``OR``/``NOT`` conditions). ``content``: a document holds a long document's best passages
    (``passages``, the default) or its whole text (``text``).

    ``HybridSearchRetriever(document_store=store, top_k=10, filters=None, **options)``: the retriever of a
    :class:`HybridSearchDocumentStore` (as ``ElasticsearchBM25Retriever`` is of its store): the store's
    documents as they were written, with the score that ordered them; ``filters`` in Haystack's syntax on
    the store's fields; ``to_dict`` holds the store's own. The peer retrievers' ``filter_policy`` (``replace``:
    a run's filters replace the component's; ``merge``: both apply), ``scale_score`` (scores in [0, 1]: the
    query's similarity, or in ``bm25`` mode the peer's logistic of the BM25 score) and ``fuzziness=0`` are
    taken; another ``fuzziness`` is refused (this BM25 matches words as written; ``recover=True`` retries a
    query that finds nothing with fuzzy matching).
    """

    def __init__(
        self,
        *,
        client: SearchClient | None = None,
        settings: SearchSettings | None = None,
        document_store: HybridSearchDocumentStore | None = None,
        content: Content = "passages",
        **options: Any,
    ) -> None:
        self._options = dict(options)  # (as given: what to_dict writes)
        self._store = document_store
        if document_store is not None:
            if not isinstance(document_store, HybridSearchDocumentStore):
                raise ConfigurationError(
                    f"document_store must be a HybridSearchDocumentStore, got {type(document_store).__name__}"
                )
            if client is not None or settings is not None:
                raise ConfigurationError("a document_store has its client: pass document_store alone")
            self._top_k = count_argument("top_k", options.pop("top_k", 10))
            self._filters = options.pop("filters", None)
            store_filters(self._filters)  # (checked now: a bad filter is a construction error)
            self._policy, self._scale = peer_retriever_options(options)
            if self._policy is not FilterPolicy.REPLACE or "filter_policy" in self._options:
                self._options["filter_policy"] = self._policy.value  # (to_dict: a string, as the peer's)
            self._store_options = store_options(options, instead="pass top_k= / filters= (Haystack's syntax)")
            return
        ours = {**options, **_overrides(options.pop("filters", None), options.pop("top_k", None))}
        check_options(ours)
        self._content = content
        self._from_settings = client is None and settings is None
        self._core = RetrieverCore(client, settings=settings, options=ours, content=content)

    @property
    def document_store(self) -> HybridSearchDocumentStore | None:
        """The document store this retriever searches (None: it runs on a client)."""
        return self._store

    @classmethod
    def from_settings(cls, settings: SearchSettings | None = None, **options: Any) -> HybridSearchRetriever:
        """A retriever with a client of its own, made from ``settings`` (default: the environment)."""
        return cls(settings=settings, **options)

    def _store_call(self, filters: dict[str, Any] | None, top_k: int | None) -> tuple[Any, int]:
        """The filters (the component's and the call's, by the filter policy) and ``top_k`` of one run."""
        return apply_filter_policy(self._policy, self._filters, filters), (
            self._top_k if top_k is None else count_argument("top_k", top_k)
        )

    @component.output_types(documents=list[Document])
    def run(self, query: str, filters: dict[str, Any] | None = None, top_k: int | None = None) -> dict[str, Any]:
        """The documents for ``query`` (``filters`` and ``top_k`` override the component's options)."""
        if self._store is not None:
            found = self._store._search(query, *self._store_call(filters, top_k), self._store_options, self._scale)
            return {"documents": found}
        return {"documents": [_document(h) for h in self._core.search(query, **_overrides(filters, top_k))]}

    @component.output_types(documents=list[Document])
    async def run_async(
        self, query: str, filters: dict[str, Any] | None = None, top_k: int | None = None
    ) -> dict[str, Any]:
        """:meth:`run`, for ``AsyncPipeline`` and async callers."""
        if self._store is not None:
            found = await self._store._asearch(
                query, *self._store_call(filters, top_k), self._store_options, self._scale
            )
            return {"documents": found}
        hits = await self._core.asearch(query, **_overrides(filters, top_k))
        return {"documents": [_document(h) for h in hits]}

    def to_dict(self) -> dict[str, Any]:
        """The component's options (never a connection or a secret): a pipeline that loads it makes its
        client from the environment — or, on a document store, the store's own ``to_dict``."""
        if self._store is not None:
            return default_to_dict(self, document_store=self._store.to_dict(), **self._options)
        if not self._from_settings:
            raise ConfigurationError(
                "a HybridSearchRetriever built from a SearchClient (or explicit settings) cannot be serialized: "
                "build it with HybridSearchRetriever.from_settings(**options) and configure ES_* where it loads"
            )
        return default_to_dict(self, content=self._content, **self._options)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HybridSearchRetriever:
        params = data.get("init_parameters", {})
        if isinstance(params.get("document_store"), dict):
            params["document_store"] = HybridSearchDocumentStore.from_dict(params["document_store"])
        return default_from_dict(cls, data)

    def close(self) -> None:
        """Close the client this component made (``from_settings``); a client you gave, or a document
        store's, stays open."""
        if self._store is None:
            self._core.close()

    async def aclose(self) -> None:
        if self._store is None:
            await self._core.aclose()
