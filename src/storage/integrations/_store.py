"""What the framework *stores* share (LangChain's ``VectorStore`` today): a framework's documents in and out
of our index without losing anything, on the client the retrievers use.

- **In**: a framework document is one of ours — its content as the text (no title), its id (or a new uuid),
  its metadata kept **exactly as given** (``Document.payload``: any JSON, returned as it came) and, where a
  value is a string or a list of strings under a key our filters accept, copied to ``metadata.<key>`` so
  that the framework's ``filter={key: value}`` reads it.
- **Out**: a hit or a stored document as (id, content, score, metadata): the content as it came in, the
  metadata as given (a document written by our own API: its stored fields).
- Every call runs through a :class:`ClientBridge` (sync or async, any loop or thread); the index is
  created (``ensure_index``) before the first call needs it. Writes are searchable when they return
  (``refresh``), as framework users expect of a store.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from elasticsearch.helpers import async_scan
from pydantic import SecretStr, ValidationError

from embeddings import Embedder

from .._admin import id_list
from .._client import SearchClient
from .._dsl.filters import FilterInput
from .._errors import ConfigurationError, DocumentsNotIndexed, InvalidDocument, InvalidQuery
from .._settings import SearchSettings
from .._types.models import METADATA_KEY, Document, FailedDocument, IndexReport, embedding_text
from .._types.requests import SearchRequest
from .._types.results import SearchHit
from ._bridge import ClientBridge
from ._common import check_options
from ._dialects import count_argument

__all__ = ["StoreCore", "Stored", "document_fields", "open_store", "our_documents", "store_options", "stored"]

#: Stored fields that are ours, not a document's metadata (a document written by our own API).
_OURS = frozenset({"title", "text", "payload", "content_hash", "metadata"})


@dataclass(frozen=True, slots=True)
class Stored:
    """One document as a framework document is built from it."""

    id: str
    content: str
    metadata: dict[str, Any]
    #: The hit's fused (or rerank) score (None: not from a search).
    score: float | None = None
    #: In [0, 1]: the query's similarity to it (``SearchHit.similarity``), else (a bm25 search) its
    #: normalized score.
    relevance: float | None = None
    #: The query's similarity to it in [0, 1] (None: a bm25 search, or not from one).
    similarity: float | None = None
    #: Its BM25 score, when the BM25 leg found it.
    bm25_score: float | None = None


def our_documents(
    items: Sequence[tuple[str | None, str, Mapping[str, Any] | None]],
    payloads: Sequence[Mapping[str, Any]] | None = None,
) -> list[Document]:
    """Framework documents (id or None, content, metadata) as ours (see the module docstring); ``payloads``:
    what each keeps instead of its metadata (a LlamaIndex node's whole serialized form). One that is not
    valid (blank content, an id over 512 bytes) is an :class:`InvalidDocument` naming its position, and
    nothing is sent."""
    out: list[Document] = []
    for position, (doc_id, content, metadata) in enumerate(items):
        payload = payloads[position] if payloads is not None else None
        try:
            out.append(Document(**document_fields(doc_id or str(uuid.uuid4()), content, metadata, payload)))
        except ValidationError as exc:
            reason = "; ".join(str(e.get("msg", "")).removeprefix("Value error, ") for e in exc.errors())
            raise InvalidDocument(f"document {position}: {reason}", position=position) from None
    return out


def document_fields(
    doc_id: str, text: str, metadata: Mapping[str, Any] | None, payload: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """One framework document's fields as ours, not yet validated (``index_documents`` reports one that is
    not valid): its text, its metadata kept as the ``payload`` (or ``payload`` when given) and its scalars
    filterable."""
    fields = _filterable(dict(metadata or {}))
    if payload is not None:
        fields["payload"] = dict(payload)
    return {**fields, "id": doc_id, "text": text}


def _filterable(given: dict[str, Any]) -> dict[str, Any]:
    """A document's ``payload`` (the metadata as given) and ``metadata`` (its scalar values — strings, numbers,
    booleans, or lists of them — as keywords where our filters read them; a number or ISO date is compared as
    one through the keyword's sub-fields)."""
    filterable: dict[str, str | list[str]] = {}
    for key, value in given.items():
        if not METADATA_KEY.fullmatch(key):
            continue
        if isinstance(value, list) and value and all(_keyword(v) is not None for v in value):
            filterable[key] = [cast(str, _keyword(v)) for v in value]
        elif (word := _keyword(value)) is not None:
            filterable[key] = word
    return {"payload": given, "metadata": filterable}


def _keyword(value: object) -> str | None:
    """A scalar as the keyword Elasticsearch makes of it in a query (``true``, ``2``, ``2.5``); None: not one."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and math.isfinite(value):
        return repr(value)
    return None


def _as_stored(doc: Document) -> dict[str, Any]:
    """A document read back as the fields it was stored with (dates as JSON writes them; one another program
    wrote, read back unvalidated, as it is)."""
    return doc.model_dump(mode="json", exclude={"id"}, exclude_none=True, warnings=False)


def stored(doc_id: str, source: Mapping[str, Any], *, hit: SearchHit | None = None) -> Stored:
    if "payload" in source:
        metadata = dict(source.get("payload") or {})
    else:
        metadata = {k: v for k, v in source.items() if k not in _OURS} | dict(source.get("metadata") or {})
    title, text = str(source.get("title") or ""), str(source.get("text") or "")
    content = embedding_text(title, text) if title else text  # (a store's own document: its text as given)
    if hit is None:
        return Stored(doc_id, content, metadata)
    relevance = hit.normalized_score if hit.similarity is None else hit.similarity
    return Stored(doc_id, content, metadata, hit.score, relevance, hit.similarity, hit.leg_scores.get("bm25"))


def store_options(
    options: Mapping[str, Any], *, instead: str, reserved: Sequence[str] = ("limit", "filters", "query")
) -> dict[str, Any]:
    """Search options a store passes on to every search; the ``reserved`` ones are what the framework's own
    arguments say (its count, filter, query), refused with what to pass ``instead``."""
    for name in reserved:
        if name in options:
            raise ConfigurationError(f"{name!r} is not a store option: {instead}")
    if "tenant_id" in options:
        raise ConfigurationError("tenant_id is the store's own: give it to the store's constructor (tenant_id=...)")
    return check_options(options)


def open_store(
    client: SearchClient | None,
    *,
    settings: SearchSettings | None,
    embedder: Embedder | None,
    foreign: bool,
    refresh: bool,
    tenant_id: str | None = None,
    **connection: Any,
) -> StoreCore:
    """A store's core on ``client`` (given: shared, the caller's to close), or on a client of its own made from
    ``settings`` (default the environment) with the framework's connection arguments (``index``, ``url``,
    ``cloud_id``, ``username``, ``password``, ``api_key``: the names of :class:`SearchSettings`) and
    ``embedder`` (None: ours, from the settings; ``foreign``: a framework's embedding, whose window is not
    known, so no passages)."""
    if client is not None:
        given = sorted(k for k, v in connection.items() if v)
        if given or settings is not None or embedder is not None:
            raise ConfigurationError(
                f"a given client has its index, connection and embedder: pass client alone, not {given or 'more'}"
            )
        return StoreCore(ClientBridge(client), refresh=refresh, tenant_id=tenant_id)
    secret = ("password", "api_key")
    updates: dict[str, Any] = {
        k: SecretStr(v) if k in secret else v for k, v in connection.items() if v is not None and v != ""
    }
    if foreign:
        updates["passages"] = False
    resolved = (settings or SearchSettings()).model_copy(update=updates)
    bridge = ClientBridge(factory=lambda: SearchClient.from_settings(resolved, embedder=embedder))
    return StoreCore(bridge, refresh=refresh, tenant_id=tenant_id)


class StoreCore:
    """A store's client (given, or owned and made by ``factory``) and its calls, each ``async`` on the
    client's loop; the framework classes call them through :attr:`bridge` (``run`` / ``arun``). With a
    ``tenant_id`` the store is that tenant's: what it writes carries it, every read and delete sees only its
    documents (the client's read scope, ``storage._dsl.tenancy``)."""

    def __init__(self, bridge: ClientBridge, *, refresh: bool = True, tenant_id: str | None = None) -> None:
        self.bridge = bridge
        self.refresh = refresh
        self.tenant_id = tenant_id
        #: The index exists (``ensure_index`` ran once for this store): set once, never per request.
        self._ready = False

    async def _client(self, client: SearchClient) -> SearchClient:
        if not self._ready:
            await client.ensure_index()
            self._ready = True
        return client

    def _refresh(self, given: bool | None) -> bool:
        """A call's ``refresh`` (the framework's per-call argument), else the store's."""
        return self.refresh if given is None else given

    async def add(
        self, client: SearchClient, documents: Sequence[Document], *, refresh: bool | None = None
    ) -> list[str]:
        """Index ``documents`` (an id given again replaces that document); their ids, in order. A document
        that could not be indexed raises :class:`DocumentsNotIndexed` (the others are indexed)."""
        if not documents:
            return []
        c = await self._client(client)
        report = await c.index_documents(self._stamped(documents), refresh=self._refresh(refresh), on_invalid="raise")
        if report.failed:
            raise DocumentsNotIndexed(report.failed, indexed=report.indexed)
        return [d.id for d in documents]

    async def add_new(
        self, client: SearchClient, documents: Sequence[Document], *, refresh: bool | None = None
    ) -> tuple[list[str], list[str]]:
        """Index those of ``documents`` whose id the index does not hold, atomically (Elasticsearch's
        ``create``: two writers racing on one id cannot both win); (the ids written, the ids it held). Any other
        failure raises :class:`DocumentsNotIndexed`."""
        if not documents:
            return [], []
        c = await self._client(client)
        report = await c.index_documents(
            self._stamped(documents), refresh=self._refresh(refresh), on_invalid="raise", overwrite=False
        )
        other = [f for f in report.failed if f.reason != "exists"]
        if other:
            raise DocumentsNotIndexed(other, indexed=report.indexed)
        return list(report.indexed), [f.id for f in report.failed]

    def _stamped(self, documents: Sequence[Document | dict[str, Any]]) -> list[Any]:
        """``documents`` as the store's tenant's (as given without one)."""
        if self.tenant_id is None:
            return list(documents)
        tenant = {"tenant_id": self.tenant_id}
        return [d.model_copy(update=tenant) if isinstance(d, Document) else {**d, **tenant} for d in documents]

    async def get(self, client: SearchClient, ids: Sequence[str]) -> list[Stored]:
        """The stored documents of ``ids``, in that order; an id the index does not hold is left out."""
        wanted = id_list(ids)
        found = await (await self._client(client)).documents.get_many(wanted, tenant_id=self.tenant_id)
        return [stored(i, _as_stored(found[i])) for i in wanted if i in found]

    async def delete(self, client: SearchClient, ids: Sequence[str] | None, *, refresh: bool | None = None) -> bool:
        if ids is None:
            raise InvalidQuery("give the ids of the documents to delete (delete(ids=[...]))")
        c = await self._client(client)
        await c.documents.delete(id_list(ids), tenant_id=self.tenant_id, refresh=self._refresh(refresh))
        return True

    async def count(self, client: SearchClient, filters: FilterInput = None) -> int:
        """How many documents ``filters`` (our model; None: all) match."""
        return await (await self._client(client)).documents.count(filters=filters, tenant_id=self.tenant_id)

    async def existing(self, client: SearchClient, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` the index holds."""
        return await (await self._client(client)).documents.exist(id_list(ids), tenant_id=self.tenant_id)

    async def filtered(self, client: SearchClient, filters: FilterInput) -> list[Stored]:
        """Every document ``filters`` (our model; None: all) match."""
        return await self.get(client, await self.matching(client, filters))

    async def matching(self, client: SearchClient, filters: FilterInput) -> list[str]:
        """The ids of every document ``filters`` (our model; None: all) match."""
        return await (await self._client(client)).documents.matching_ids(filters=filters, tenant_id=self.tenant_id)

    async def delete_matching(self, client: SearchClient, filters: FilterInput, *, refresh: bool | None = None) -> int:
        """Delete every document ``filters`` match (None: every document); how many were deleted."""
        ids = await self.matching(client, filters)
        c = await self._client(client)
        deleted = 0
        for start in range(0, len(ids), 1000):
            deleted += len(await c.documents.delete(ids[start : start + 1000], tenant_id=self.tenant_id))
        if self._refresh(refresh):
            await c.indices.refresh()
        return deleted

    async def delete_all(self, client: SearchClient, *, recreate: bool = False, refresh: bool | None = None) -> None:
        """Delete every document; ``recreate``: the index itself, created anew (empty, today's mapping)."""
        if not recreate:
            await self.delete_matching(client, None, refresh=refresh)
            return
        if self.tenant_id is not None:
            raise ConfigurationError("a tenant's store cannot recreate the index (other tenants' documents are in it)")
        await client.indices.delete()
        self._ready = False
        await self._client(client)

    async def import_index(
        self,
        client: SearchClient,
        index: str,
        *,
        convert: Callable[[str, Mapping[str, Any]], Document | dict[str, Any]],
        fields: Sequence[str] | None,
        batch_size: int,
    ) -> IndexReport:
        """Every document of ``index`` (an index a framework's Elasticsearch store filled) indexed here under its
        id, embedded by this store's embedder: ``convert(id, _source)`` makes each one ours (``fields``: the
        ``_source`` fields it reads; None: all). Read with elasticsearch-py's ``async_scan`` (a scroll),
        written ``batch_size`` at a time. One that cannot be indexed (no text) is reported in ``failed``, the
        others are written."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidQuery(f"batch_size must be a whole number >= 1, got {batch_size!r}")
        c = await self._client(client)
        started = time.perf_counter()
        indexed: list[str] = []
        failed: list[FailedDocument] = []

        async def flush(batch: list[Document | dict[str, Any]]) -> None:
            report = await c.index_documents(self._stamped(batch), refresh=False)
            indexed.extend(report.indexed)
            failed.extend(report.failed)

        batch: list[Document | dict[str, Any]] = []
        body: dict[str, Any] = {"query": {"match_all": {}}}
        if fields is not None:
            body["_source"] = list(fields)
        async for hit in async_scan(c.elasticsearch, index=index, size=batch_size, query=body):
            batch.append(convert(str(hit["_id"]), hit.get("_source") or {}))
            if len(batch) >= batch_size:
                await flush(batch)
                batch = []
        if batch:
            await flush(batch)
        if self.refresh:
            await c.indices.refresh()
        return IndexReport(index=c.index, indexed=indexed, failed=failed, seconds=time.perf_counter() - started)

    async def search(
        self,
        client: SearchClient,
        query: str,
        *,
        k: Any,
        filters: FilterInput = None,
        options: Mapping[str, Any] | None = None,
    ) -> list[Stored]:
        """``k`` results (the framework's count, checked: a whole number), ``filters`` in our model (the
        framework's filter translated by ``_dialects`` with ``store=True``)."""
        given = dict(options or {})
        if given.get("mode", "hybrid") != "bm25":  # every hit's similarity: what the frameworks threshold on
            given.setdefault("similarities", True)
        request = SearchRequest(
            query=query, limit=count_argument("k", k), filters=filters, tenant_id=self.tenant_id, **given
        )
        response = await (await self._client(client)).search(**request.arguments())
        return [stored(h.id, h.source, hit=h) for h in response.hits]
