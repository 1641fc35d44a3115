"""What is not the main job of a client, in namespaces of their own (as elasticsearch-py's ``client.indices``):

- ``client.indices`` (:class:`Indices`) — the alias's versioned indices: re-embed (a model change with no
  downtime), create a version, move the alias, delete, refresh, the fusion stored with the alias;
- ``client.documents`` (:class:`Documents`) — documents by id and by filter: get, count, which exist,
  which match, delete;
- ``client.breakers`` — each dependency's circuit breaker, as a read-only :class:`BreakerStatus`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from embeddings import Embedder

from ._dsl.filters import FilterInput
from ._errors import InvalidQuery
from ._fusion.setting import FusionInForce, FusionSetting
from ._indexing.bulk_load import end_unfinished
from ._indexing.indices import IndexManager
from ._indexing.reembed import Reembedder
from ._search import Engine
from ._types.models import ID_MAX_BYTES, Document, IndexProgress, ReembedReport, lone_surrogate, stored_document
from ._types.requests import QuerySyntax, SearchRequest
from ._types.results import ScoreExplanation

__all__ = ["Documents", "Indices"]


class Indices:
    """``client.indices``: the alias and its versioned indices (``<alias>-000001``, ...)."""

    def __init__(self, manager: IndexManager, engine: Engine, reembedder: Reembedder) -> None:
        self._m = manager
        self._engine = engine
        self._reembedder = reembedder

    async def reembed(
        self,
        embedder: Embedder | None = None,
        *,
        delete_old: bool = False,
        restart: bool = False,
        progress: Callable[[IndexProgress], None] | None = None,
    ) -> ReembedReport:
        """Move the alias to another embedding model (or analyzer, or passage layout) with no downtime, while it
        is written to: read every document of the version it points at, embed it with ``embedder`` (default:
        the client's), write a new version, catch up with the writes made meanwhile, and move the alias
        atomically (``delete_old``: then delete the versions it pointed at). See ``storage._indexing.reembed``.

        Searches and writes go on meanwhile (this library's writers hold the few refused by the short write
        block of the switch). Documents that fail are in ``report.failed`` and keep the alias where it was. An
        interrupted run leaves the alias untouched and its version marked as building (``health()`` lists it);
        the next run **resumes** it, ``restart=True`` starts clean. ``progress`` gets an :class:`IndexProgress`
        as documents are done. After a move to another model, a client of the old one gets BM25-only searches
        (:class:`ModelMismatch` on its kNN leg) and its writes are refused: give it the new model.
        """
        return await self._reembedder.reembed(embedder, delete_old=delete_old, restart=restart, progress=progress)

    async def create_version(self) -> str:
        """Create the next versioned index (``<alias>-000002``...) for the client's embedder, *not* aliased.

        Write into it with ``index_documents(docs, index=name)``, then :meth:`promote` moves the alias
        atomically: searches never see a half-built index. (``client.indices.reembed()`` does all of it.)"""
        return await self._m.create_index_version()

    async def promote(self, name: str, *, delete_old: bool = False) -> None:
        """Point the alias at ``name`` (atomically) and make it the write index; ``delete_old``: then delete the
        versions it pointed at. ``name`` must be one of the alias's versions (``<alias>-NNNNNN``, as
        :meth:`create_version` names them): any other index is an :class:`InvalidQuery`, and nothing moves."""
        await self._m.promote_index(name, delete_old=delete_old)

    async def delete(self) -> None:
        """Delete the alias and every index behind it (tests, demos)."""
        await self._m.delete_index()

    async def refresh(self) -> None:
        """Make everything written so far searchable now."""
        await self._m.refresh()

    async def end_bulk_load(self) -> bool:
        """Finish a bulk load (``index_documents(bulk_load=...)``) whose process was killed: the write index's
        refresh interval restored as it was, refreshed. False when no bulk load was left unfinished."""
        return await end_unfinished(self._m.backend, *await self._m.write_index_info(self._m.alias))

    async def fusion_in_force(self) -> FusionInForce:
        """The fusion a search of the alias uses when the call passes none (read now), and where each of its
        parameters comes from (``settings``, ``index``: stored with it, ``default``)."""
        return await self._engine.fusion_in_force()

    async def store_fusion(self, setting: FusionSetting, **provenance: Any) -> str:
        """Store ``setting`` with the alias's write index (``_meta.fusion``; ``provenance``, e.g. how it was
        tuned, under ``tuned``): every client of the alias uses it where neither the call nor its settings
        say otherwise (read when entered, refreshed once a minute). Returns the index written."""
        meta = setting.to_meta() | ({"tuned": provenance} if provenance else {})
        return await self._m.store_fusion(meta)


class Documents:
    """``client.documents``: documents by id and by filter (a tenant's only, for a tenant; ``tenant_id`` is
    required by a multi-tenant client). ``ids`` is a list of ids: one string given as the ids, or an empty id,
    is an :class:`InvalidQuery` before anything is sent."""

    def __init__(self, manager: IndexManager, engine: Engine) -> None:
        self._m = manager
        self._engine = engine

    async def explain(
        self,
        doc_id: str,
        query: str,
        *,
        filters: FilterInput = None,
        tenant_id: str | None = None,
        index: str | None = None,
        syntax: QuerySyntax = "plain",
    ) -> ScoreExplanation | None:
        """Why the BM25 leg scores ``doc_id`` as it does for ``query`` (Elasticsearch's explain, on the leg's own
        query: its fields, filters and tenant), or None when the document does not match it. The kNN leg's part
        is the hit's ``similarity``; how the legs combine, its ``ranks`` and the fusion in force."""
        id_list((doc_id,))
        request = SearchRequest(query, mode="bm25", filters=filters, tenant_id=tenant_id, index=index, syntax=syntax)
        found = await self._engine.explain_bm25(request, doc_id)
        return ScoreExplanation.model_validate(found) if found is not None else None

    async def get(self, doc_id: str, *, tenant_id: str | None = None) -> Document | None:
        """One document as it was indexed, or None — also None when it belongs to another tenant than
        ``tenant_id``. (Elasticsearch's own ``_source``, with what the index adds, is ``client.elasticsearch``'s
        to read.)"""
        id_list((doc_id,))
        source = await self._m.get_document(doc_id, tenant_id=tenant_id)
        return None if source is None else stored_document(doc_id, source)

    async def get_many(self, ids: Sequence[str], *, tenant_id: str | None = None) -> dict[str, Document]:
        """id -> document as it was indexed, for those of ``ids`` the index holds, in the order of ``ids``."""
        ids = id_list(ids)
        found = await self._m.get_documents(ids, tenant_id=tenant_id)
        return {doc_id: stored_document(doc_id, source) for doc_id, source in found.items()}

    async def count(self, *, filters: FilterInput = None, tenant_id: str | None = None) -> int:
        """Documents matching ``filters`` (None: all)."""
        return await self._m.count(filters=filters, tenant_id=tenant_id)

    async def exist(self, ids: Sequence[str], *, tenant_id: str | None = None) -> set[str]:
        """Which of ``ids`` the index holds."""
        ids = id_list(ids)
        return await self._m.existing(ids, tenant_id=tenant_id)

    async def matching_ids(self, *, filters: FilterInput = None, tenant_id: str | None = None) -> list[str]:
        """The ids of every document ``filters`` match (None: every document), read on a point-in-time: what a
        delete or a get by filter works on."""
        return await self._m.matching_ids(filters=filters, tenant_id=tenant_id)

    async def delete(self, ids: Sequence[str], *, tenant_id: str | None = None, refresh: bool = False) -> list[str]:
        """Delete the documents of ``ids``; the ids that were deleted (an id the index does not hold is not an
        error). ``refresh=True``: gone from searches when this returns. A delete refused by a reembed's short
        write block is held and sent again."""
        ids = id_list(ids)
        return await self._m.delete_documents(ids, tenant_id=tenant_id, refresh=refresh)


def id_list(ids: Sequence[str]) -> list[str]:
    """``ids`` as a list, each a document id that can be sent: an :class:`InvalidQuery` before anything is
    for one string given as the ids (iterated, ``delete("12")`` would delete documents "1" and "2"), an id that
    is not a non-empty string or is over 512 bytes (none can exist: Elasticsearch refuses the request, or the
    URL holding it) or no Unicode text (a lone surrogate, as a broken decode leaves)."""
    if isinstance(ids, str | bytes):
        raise InvalidQuery(f"ids is one string, not a list of ids: pass [{ids!r}]")
    checked = list(ids)
    for doc_id in checked:
        if not isinstance(doc_id, str) or not doc_id:
            raise InvalidQuery(f"a document id is a non-empty string, not {doc_id!r}")
        if lone_surrogate(doc_id):
            raise InvalidQuery(f"document id {doc_id!r} is not valid Unicode text (it holds a lone surrogate)")
        if len(doc_id.encode()) > ID_MAX_BYTES:
            raise InvalidQuery(f"a document id is at most {ID_MAX_BYTES} bytes, not {len(doc_id.encode())}")
    return checked
