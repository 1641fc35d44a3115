"""Index management: the alias and its versioned indices, counts, single documents, scans, health."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, cast

from embeddings import Embedder

from .._dsl.filters import FilterInput
from .._dsl.mapping import (
    CONTENT_HASH,
    DEFINED_ANALYZERS,
    DYNAMIC_TEMPLATES,
    PAYLOAD,
    carried_settings,
    index_body,
    is_version_of,
    next_index_name,
    stored_passages,
    vector_index_for,
    vectors_in_source_for,
    versioned_index_name,
    write_index_of,
)
from .._dsl.queries import SOURCE_EXCLUDES, count_request, ids_request
from .._dsl.tenancy import Scope, every_tenant, read_scope, require, visible
from .._errors import (
    AccessDenied,
    AnalyzerUnavailable,
    ConfigurationError,
    DimensionMismatch,
    DocumentsNotIndexed,
    IncompatibleServer,
    IndexNotFound,
    InvalidQuery,
    ModelMismatch,
    PassagesMismatch,
)
from .._transport.backend import Backend
from .._transport.compat import server_version, too_old
from .._transport.translate import error_reason, error_type, incompatible_server
from .._types.models import FailedDocument
from .bulk_load import unfinished_bulk_load
from .changes import held_while_blocked
from .meta import set_meta

__all__ = ["IndexManager"]

#: Ids asked for in one request when checking which exist.
_IDS_PER_REQUEST = 1000


class IndexManager:
    """Creates, checks, versions and inspects the alias a client searches and writes."""

    def __init__(self, backend: Backend) -> None:
        self._b = backend
        #: The server's (major, minor), once read.
        self._server: tuple[int, int] | None = None
        #: The write index once :meth:`ensure_index` has checked it (ingest calls it first otherwise).
        self.checked_index: str | None = None
        #: Targets seen written to (no initial load is possible there any more: storage._indexing.bulk_load);
        #: forgotten when this client deletes or creates the alias's indices.
        self.written: set[str] = set()

    @property
    def backend(self) -> Backend:
        return self._b

    @property
    def alias(self) -> str:
        return self._b.settings.index

    async def ensure_index(self) -> str:
        """Create the alias and its first versioned index if missing; check an existing one fits."""
        b = self._b
        b.check_open()
        await b.probe_embedder()
        await self._check_server()
        alias = self.alias
        existing = await self._get_index(alias)
        created = existing is None
        if existing is None:
            self.written.discard(alias)
            name = versioned_index_name(alias, 1)
            made = await self._create(name, aliases={alias: {"is_write_index": True}})
            existing = await self._get_index(alias)
            if existing is None and not made:  # the first version is there, but not the alias
                raise ConfigurationError(
                    f"index {name} exists but the alias {alias!r} does not point at it (removed by hand?): point it "
                    f'there (POST _aliases {{"actions": [{{"add": {{"index": "{name}", "alias": "{alias}", '
                    '"is_write_index": true}}]}) or delete the index'
                )
            if existing is None:  # pragma: no cover - deleted between our calls
                raise IndexNotFound(f"index {name} vanished right after creation")
        write_index = self._check_existing(alias, existing)
        if (record := unfinished_bulk_load(existing[write_index])) is not None:
            b.events.emit(
                30,
                f"a bulk load of {write_index} started {record.get('started')} has not ended: its refresh is off "
                "until it does (if the process running it is gone, client.indices.end_bulk_load() restores it)",
                "index.bulk_load_unfinished",
                {"index.name": write_index},
            )
        props = existing[write_index].setdefault("mappings", {}).setdefault("properties", {})
        added = {k: v for k, v in (("content_hash", CONTENT_HASH), ("payload", PAYLOAD)) if k not in props}
        if added:  # an index made before documents carried their content hash, or a payload
            await b.es_call(lambda: b.es.indices.put_mapping(index=write_index, properties=added))
            props.update(added)
        templates = existing[write_index]["mappings"].get("dynamic_templates") or []
        if templates != DYNAMIC_TEMPLATES:  # made before metadata had its num/date sub-fields: new keys get them
            await b.es_call(lambda: b.es.indices.put_mapping(index=write_index, dynamic_templates=DYNAMIC_TEMPLATES))
        self.checked_index = write_index
        b.metadata.remember(alias, existing, empty=created)  # (the answer holds the mappings: no second request)
        b.events.emit(20, "index ready", "index.ensure", {"index.alias": alias, "index.name": write_index})
        return write_index

    async def _check_server(self) -> tuple[int, int] | None:
        """The server's (major, minor), read once; a server older than :data:`MINIMUM_SERVER` is refused here,
        by name, before anything is created."""
        if self._server is not None:
            return self._server
        b = self._b
        info = await b.es_call(lambda: b.es.info())
        found = server_version(info.body)
        reason = too_old(found)
        if reason is not None:
            raise IncompatibleServer(f"{reason}: upgrade the server (any version from 8.12 to 9.x works)")
        self._server = found
        return found

    async def create_index_version(self) -> str:
        b = self._b
        b.check_open()
        await b.probe_embedder()
        return await self.create_version()

    async def create_version(
        self, *, embedder: Embedder | None = None, analyzer: str | None = None, meta: Mapping[str, Any] | None = None
    ) -> str:
        """The next versioned index (not aliased), for ``embedder``'s vectors (default the client's), with
        ``analyzer`` (default the configured one) and more ``_meta`` keys."""
        name = next_index_name(self.alias, list(await self.versions()))
        current = await self.aliased()  # (limits raised on it carry over: a document it took, the next takes)
        carried = carried_settings(current[write_index_of(self.alias, current)]) if current else None
        if not await self._create(name, embedder=embedder, analyzer=analyzer, meta=meta, carried=carried):
            raise ConfigurationError(f"index {name} was created meanwhile by someone else; call again")
        return name

    async def store_fusion(self, fusion: Mapping[str, Any]) -> str:
        """Store a fusion setting with the alias's write index (``_meta.fusion``): every client of the alias
        uses it when neither the call nor its settings say otherwise. Returns the index written."""
        current = await self.aliased()
        if not current:
            raise IndexNotFound.named(self.alias)
        index = write_index_of(self.alias, current)
        await set_meta(self._b, index, {"fusion": dict(fusion)})
        self._b.metadata.forget(self.alias)
        return index

    async def versions(self) -> dict[str, Any]:
        """Every versioned index of the alias (``<alias>-NNNNNN``), aliased or not: name -> its settings,
        mappings and aliases."""
        b = self._b
        resp = await b.es_call(
            lambda: b.es.options(ignore_status=404).indices.get(index=f"{self.alias}-*", expand_wildcards="all")
        )
        return dict(resp.body) if resp.meta.status == 200 else {}

    async def aliased(self) -> dict[str, Any] | None:
        """The indices the alias points at (name -> settings, mappings, aliases), or None without the alias."""
        return await self._get_index(self.alias)

    async def promote_index(self, name: str, *, delete_old: bool = False) -> None:
        b = self._b
        b.check_open()
        alias = self.alias
        if not isinstance(name, str) or not is_version_of(alias, name):
            # (another index would put other documents behind the alias, and delete_old would delete its own)
            raise InvalidQuery(
                f"{name!r} is not a version of the alias {alias!r}: its versions are named {alias}-NNNNNN "
                "(client.indices.create_version() makes the next one)"
            )
        current = await self._get_index(alias)
        actions: list[dict[str, Any]] = [{"add": {"index": name, "alias": alias, "is_write_index": True}}]
        old = [n for n in (current or {}) if n != name]
        actions += [{"remove": {"index": n, "alias": alias}} for n in old]
        await b.es_call(lambda: b.es.indices.update_aliases(actions=actions))
        if delete_old and old:
            await b.es_call(lambda: b.es.indices.delete(index=",".join(old)))
        self.checked_index = None

    async def delete_index(self) -> None:
        b = self._b
        b.check_open()
        current = await self._get_index(self.alias)
        if current:
            await b.es_call(lambda: b.es.indices.delete(index=",".join(current)))
        self.checked_index = None
        self.written.clear()

    async def refresh(self, index: str | None = None) -> None:
        await self._b.es_call(lambda: self._b.es.indices.refresh(index=index or self.alias))

    async def count(self, *, filters: FilterInput = None, tenant_id: str | None = None) -> int:
        """Documents of the alias matching ``filters`` (the tenant's, for a tenant)."""
        scope = read_scope(filters, tenant_id, what="count", multi_tenant=self._b.settings.multi_tenant)
        return await self._count(self.alias, scope)

    async def count_all(self, index: str) -> int:
        """Every document of ``index``, across tenants (maintenance: a reembed)."""
        return await self._count(index, every_tenant())

    async def _count(self, index: str, scope: Scope) -> int:
        body = count_request(scope)
        resp = await self._b.es_call(lambda: self._b.es.count(index=index, **body))
        return int(resp.body["count"])

    async def existing(self, ids: Sequence[str], *, tenant_id: str | None = None) -> set[str]:
        """Which of ``ids`` the alias holds (the tenant's only, for a tenant)."""
        scope = read_scope(None, tenant_id, what="existing", multi_tenant=self._b.settings.multi_tenant)
        return await self._existing(ids, scope, self.alias)

    async def content_hashes(self, index: str, ids: Sequence[str]) -> dict[str, str]:
        """id -> the content hash ``index`` holds for it, for those of ``ids`` it holds (across tenants: the
        writer's own documents, to skip unchanged ones)."""
        b = self._b
        out: dict[str, str] = {}
        for start in range(0, len(ids), _IDS_PER_REQUEST):
            body = ids_request(ids[start : start + _IDS_PER_REQUEST], every_tenant())
            body["docvalue_fields"] = ["content_hash"]
            resp = await b.es_call(lambda body=body: b.es.search(index=index, **body))  # type: ignore[misc]
            for h in resp.body["hits"]["hits"]:
                found = (h.get("fields") or {}).get("content_hash") or [None]
                if found[0]:
                    out[str(h["_id"])] = str(found[0])
        return out

    async def existing_in(self, index: str, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` ``index`` holds, across tenants (maintenance: a reembed)."""
        return await self._existing(ids, every_tenant(), index)

    async def _existing(self, ids: Sequence[str], scope: Scope, index: str) -> set[str]:
        return set(await self._by_ids(index, ids, scope, source=False))

    async def _by_ids(self, index: str, ids: Sequence[str], scope: Scope, *, source: bool) -> dict[str, dict[str, Any]]:
        """id -> ``_source`` without the vectors (``source``, else ``{}``) of those of ``ids`` (each once)
        ``index`` holds within ``scope``, a batch of ids per request."""
        b = self._b
        found: dict[str, dict[str, Any]] = {}
        unique = list(dict.fromkeys(ids))
        for start in range(0, len(unique), _IDS_PER_REQUEST):
            body = ids_request(unique[start : start + _IDS_PER_REQUEST], scope)
            if source:
                body["source"] = {"excludes": list(SOURCE_EXCLUDES)}
            resp = await b.es_call(lambda body=body: b.es.search(index=index, **body))  # type: ignore[misc]
            found.update({str(h["_id"]): dict(h.get("_source") or {}) for h in resp.body["hits"]["hits"]})
        return found

    async def matching_ids(self, *, filters: FilterInput = None, tenant_id: str | None = None) -> list[str]:
        """The ids of every document of the alias ``filters`` match (the tenant's only, for a tenant)."""
        scope = read_scope(filters, tenant_id, what="matching_ids", multi_tenant=self._b.settings.multi_tenant)
        return [
            str(h["_id"]) async for page in self.scan(self.alias, size=1000, source=False, scope=scope) for h in page
        ]

    async def scan(
        self, index: str, *, size: int, source: bool, scope: Scope | None = None
    ) -> AsyncIterator[list[dict[str, Any]]]:
        """Every document of ``index`` (within ``scope``; None: all, across tenants), a page of ``size`` at a
        time, on a point-in-time (a stable view, closed at the end); with ``source`` their ``_source`` without
        the vectors, else ids only."""
        b = self._b
        keep_alive = b.settings.pit_keep_alive
        opened = await b.es_call(lambda: b.es.open_point_in_time(index=index, keep_alive=keep_alive))
        pit: str = opened.body["id"]
        after: list[Any] | None = None
        try:
            while True:
                body: dict[str, Any] = {
                    "size": size,
                    "pit": {"id": pit, "keep_alive": keep_alive},
                    "sort": ["_shard_doc"],
                    "_source": {"excludes": ["embedding", "passages"]} if source else False,
                    "track_total_hits": False,
                }
                if scope is not None and scope.clauses:
                    body["query"] = {"bool": {"filter": list(scope.clauses)}}
                if after is not None:
                    body["search_after"] = after
                resp = await b.es_call(lambda body=body: b.es.search(**body))  # type: ignore[misc]
                pit = resp.body.get("pit_id") or pit
                hits = resp.body["hits"]["hits"]
                if hits:
                    yield hits
                if len(hits) < size:
                    return
                after = hits[-1]["sort"]
        finally:
            await b.es_call(lambda: b.es.options(ignore_status=404).close_point_in_time(id=pit))

    async def get_document(self, doc_id: str, *, tenant_id: str | None = None) -> dict[str, Any] | None:
        b = self._b
        tenant = require(tenant_id, "get_document", multi_tenant=b.settings.multi_tenant)
        resp = await b.es_call(
            lambda: b.es.options(ignore_status=404).get(
                index=self.alias, id=doc_id, source_excludes=list(SOURCE_EXCLUDES)
            )
        )
        if resp.meta.status == 404:
            if error_type(resp.body) == "index_not_found_exception":
                raise IndexNotFound.named(self.alias)
            return None
        source = cast(dict[str, Any], resp.body.get("_source", {}))
        if not visible(source, tenant):
            return None  # another tenant's document does not exist for this caller
        return source

    async def get_documents(self, ids: Sequence[str], *, tenant_id: str | None = None) -> dict[str, dict[str, Any]]:
        scope = read_scope(None, tenant_id, what="get_documents", multi_tenant=self._b.settings.multi_tenant)
        found = await self._by_ids(self.alias, ids, scope, source=True)
        return {i: found[i] for i in dict.fromkeys(ids) if i in found}

    async def delete_documents(
        self, ids: Sequence[str], *, tenant_id: str | None = None, refresh: bool = False
    ) -> list[str]:
        b = self._b
        unique = list(dict.fromkeys(ids))
        if tenant_id is not None or b.settings.multi_tenant:  # only the tenant's own
            theirs = await self.existing(unique, tenant_id=tenant_id)
            unique = [i for i in unique if i in theirs]
        if not unique:
            if refresh:
                await self.refresh()
            return []

        async def send(ids: list[str]) -> list[tuple[bool, dict[str, Any]]]:
            actions = [{"delete": {"_index": self.alias, "_id": i}} for i in ids]
            resp = await b.es_call(lambda: b.es.bulk(operations=actions, refresh=refresh or None))
            items = [item.get("delete", {}) for item in resp.body.get("items", [])]
            return [(item.get("result") == "deleted", item) for item in items]

        deleted: list[str] = []
        failed: list[FailedDocument] = []
        for _, result in await held_while_blocked(send, unique, str):  # (held while a reembed moves the alias)
            if result.get("result") == "deleted":
                deleted.append(str(result.get("_id")))
            elif result.get("status") != 404:
                error = result.get("error") or {}
                failed.append(
                    FailedDocument(
                        id=str(result.get("_id")),
                        reason="delete_failed",
                        detail=str(error.get("reason", "")),
                        status=result.get("status"),
                    )
                )
        if failed:
            raise DocumentsNotIndexed(failed, indexed=deleted)
        return deleted

    async def _primaries_active(self, name: str, wait_s: float = 30.0) -> None:
        """Wait (up to ``wait_s``) until ``name``'s primary shards are active. An index that exists may still be
        being created — by another client, or by our own create whose attempt timed out on a busy node and
        whose retry found it — and it answers every search with 503 until then. Credentials without the
        ``monitor`` cluster privilege cannot ask: then nothing is waited for."""
        b = self._b
        es = b.es.options(ignore_status=408)  # (408: not yet, within the one-second wait)
        deadline = asyncio.get_running_loop().time() + wait_s
        try:
            while True:
                resp = await b.es_call(lambda: es.cluster.health(index=name, wait_for_status="yellow", timeout="1s"))
                if not resp.body.get("timed_out") or asyncio.get_running_loop().time() > deadline:
                    return
        except AccessDenied:
            return

    async def _create(
        self,
        name: str,
        aliases: dict[str, Any] | None = None,
        *,
        embedder: Embedder | None = None,
        analyzer: str | None = None,
        meta: Mapping[str, Any] | None = None,
        carried: Mapping[str, Any] | None = None,
    ) -> bool:
        """Create one index with our mapping (and ``carried`` ``index.`` settings); False if it exists already.
        An analyzer the server lacks is an AnalyzerUnavailable (the create is atomic: nothing was made)."""
        b = self._b
        s, emb = b.settings, embedder or b.embedder
        analyzer = analyzer or s.analyzer
        server = await self._check_server()
        body = index_body(
            vector_index=vector_index_for(server),
            vectors_in_source=vectors_in_source_for(server),
            dimensions=emb.dimensions,
            normalized=emb.normalized,
            model_id=emb.model_id,
            analyzer=analyzer,
            shards=s.number_of_shards,
            replicas=s.number_of_replicas,
            passages=b.passage_setting(emb),
        )
        if meta:
            body["mappings"]["_meta"].update(meta)
        body["settings"]["index"].update(carried or ())
        extra: dict[str, Any] = {"aliases": aliases} if aliases else {}
        resp = await b.es_call(lambda: b.es.options(ignore_status=400).indices.create(index=name, **extra, **body))
        if resp.meta.status != 400:
            return True
        if error_type(resp.body) == "resource_already_exists_exception":
            await self._primaries_active(name)
            return False
        if (mismatch := incompatible_server(resp.body)) is not None:
            raise mismatch
        reason = error_reason(resp.body)
        if f"analyzer [{analyzer}]" in reason or (analyzer in DEFINED_ANALYZERS and "filter" in reason.lower()):
            raise AnalyzerUnavailable(
                f"Elasticsearch has no analyzer {analyzer!r} ({reason}); nothing was created. Enable the "
                "analysis-common module (every full distribution and Elastic Cloud has it; the local launcher "
                "installs its English subset), or set ES_ANALYZER=standard for an unstemmed index."
            )
        raise ConfigurationError(f"could not create index {name}: {reason}")

    async def write_index_info(self, target: str) -> tuple[str, dict[str, Any]]:
        """The concrete index ``target`` (an index or alias) writes to, and its get-index entry."""
        found = await self._get_index(target)
        if not found:
            raise IndexNotFound(f"index {target} does not exist (ensure_index() creates the client's alias)")
        name = write_index_of(target, found)
        return name, found[name]

    async def _get_index(self, name: str) -> dict[str, Any] | None:
        b = self._b
        resp = await b.es_call(lambda: b.es.options(ignore_status=404).indices.get(index=name))
        if resp.meta.status == 404:
            return None
        return dict(resp.body)

    def _check_existing(self, alias: str, indices: Mapping[str, Any]) -> str:
        emb = self._b.embedder
        for name, info in indices.items():
            meta = info.get("mappings", {}).get("_meta", {}).get("embedding", {})
            vector = info.get("mappings", {}).get("properties", {}).get("embedding", {})
            dims = meta.get("dimensions", vector.get("dims"))
            if dims is None:
                raise DimensionMismatch(f"index {name} has no 'embedding' vector field; it was not created by us")
            if int(dims) != emb.dimensions:
                raise DimensionMismatch(
                    f"index {name} holds {dims}-dim vectors but the embedder {emb.model_id!r} "
                    f"produces {emb.dimensions}: use the model the index was built with, or build a "
                    "new index version (create_index_version, index_documents(index=...), promote_index)"
                )
            model = meta.get("model_id")
            if model is not None and model != emb.model_id:
                raise ModelMismatch(
                    f"index {name} was built with {model!r}, the embedder is {emb.model_id!r}: vectors of two "
                    f"models never share an index. To move {alias!r} to {emb.model_id!r} with no downtime, run "
                    f"`hybrid-search reembed` (or `await client.indices.reembed()`) with this model configured: it "
                    f"builds a new version and moves the alias when it is complete. To keep {model!r}, configure it "
                    f"instead (e.g. EMBEDDINGS_MODEL)."
                )
            self._check_passages(alias, name, meta)
            analyzer = info.get("mappings", {}).get("properties", {}).get("text", {}).get("analyzer", "standard")
            if analyzer != self._b.settings.analyzer:
                self._b.events.emit(
                    30,
                    "index keeps its analyzer; the configured one applies to new index versions",
                    "index.analyzer_differs",
                    {"index.name": name, "index.analyzer": analyzer, "analyzer": self._b.settings.analyzer},
                )
        return write_index_of(alias, indices)

    def _check_passages(self, alias: str, name: str, meta: Mapping[str, Any]) -> None:
        """An index keeps the passages it was built with (writes follow it). A passage setting given
        explicitly that differs is a mismatch, like a model's; left at its default, an index without passages
        is used as it is, and the log says how to move it."""
        b = self._b
        built, wanted = stored_passages(meta), b.passage_setting()
        if built == wanted:
            return
        how = (
            f"To move {alias!r} to the configured setting with no downtime, run `hybrid-search reembed` (or "
            "`await client.indices.reembed()`): it builds a new version and moves the alias when it is complete."
        )
        if b.settings.passages_explicit():
            said = "no passages" if built is None else f"passages of {built.tokens} tokens ({built.overlap} overlap)"
            asked = "none" if wanted is None else f"{wanted.tokens} tokens ({wanted.overlap} overlap)"
            raise PassagesMismatch(f"index {name} was built with {said}; this client's setting is {asked}. {how}")
        if built is None and wanted is not None:
            b.events.emit(
                20,
                f"index {name} has no passages: a long document's vector is its head only. {how}",
                "index.no_passages",
                {"index.name": name},
            )
