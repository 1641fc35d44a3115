"""``SearchClient``: the thin I/O shell around the pure cores (filters, query builders, fusion)."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import math
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal, Self, TypeVar, cast, get_args

from elasticsearch import AsyncElasticsearch
from elasticsearch.helpers import async_streaming_bulk
from pydantic import ValidationError

from embeddings import (
    Embedder,
    EmbeddingConfigError,
    EmbeddingError,
    InvalidEmbedding,
    Vector,
    create_embedder,
)

from ._errors import (
    AccessDenied,
    ClientClosed,
    ConfigurationError,
    CursorExpired,
    DependencyError,
    DimensionMismatch,
    ElasticsearchNotConfigured,
    IndexNotFound,
    InvalidDocument,
    InvalidQuery,
    SearchError,
    SearchFailed,
)
from ._errors_map import error_type as _error_type
from ._errors_map import map_embedding_error, map_es_error, timeout_error
from ._filters import FilterInput, Term, parse_filters, to_es_filters
from ._fusion import FusedHit, FusionMethod, LegHit, fuse
from ._logging import add_observer, event, get_correlation_id, query_hash, remove_observer
from ._mapping import index_body, next_index_name, versioned_index_name
from ._models import (
    Document,
    FailedDocument,
    IndexProgress,
    IndexReport,
    Leg,
    LegReport,
    SearchHit,
    SearchMode,
    SearchPage,
    SearchResponse,
)
from ._paging import decode_cursor, encode_cursor, fingerprint
from ._queries import (
    BM25_FIELDS,
    bm25_fuzzy_request,
    bm25_request,
    fetch_request,
    knn_query_request,
    knn_request,
    msearch_body,
    on_pit,
)
from ._resilience import Resilience, ResiliencePolicy
from ._settings import RoundTrip, SearchSettings
from ._syntax import parse_query
from ._telemetry import DEFAULT_DATA_STREAM, TelemetryObserver, TelemetrySink
from ._text import clean_query
from ._tracing import AttrValue, mark_error, span

__all__ = ["ProgressCallback", "QuerySyntax", "SearchClient"]

ProgressCallback = Callable[[IndexProgress], None]
T = TypeVar("T")
_MODES: tuple[str, ...] = get_args(SearchMode)
_FUSIONS: tuple[str, ...] = get_args(FusionMethod)
_ROUND_TRIPS: tuple[str, ...] = get_args(RoundTrip)
HighlightSource = Literal["bm25", "followup", "snippet"]
#: ``plain``: the text as words and "phrases" (default); ``boolean``: the query syntax of storage._syntax.
QuerySyntax = Literal["plain", "boolean"]
_INDEXING_CONCURRENCY_QUEUE = 2  # embedded batches waiting for bulk: bounds memory, keeps both busy


@dataclass
class _LegOutcome:
    leg: Leg
    hits: list[dict[str, Any]] = field(default_factory=list)
    error: SearchError | None = None
    latency_ms: float = 0.0
    took_ms: int | None = None
    embed_ms: float | None = None
    #: Deep paging: the point-in-time id Elasticsearch returned (it may change between requests).
    pit_id: str | None = None
    #: What the leg was waiting on (for a timeout's error): "elasticsearch" or "embeddings".
    waiting_on: Literal["elasticsearch", "embeddings"] = "elasticsearch"


@dataclass(frozen=True, slots=True)
class _Plan:
    """A validated search: everything the legs, the fusion and the log event need."""

    text: str
    mode: SearchMode
    legs: tuple[Leg, ...]
    clauses: list[dict[str, Any]]
    target: str
    method: FusionMethod
    k: int
    weights: dict[str, float]
    window: int
    candidates: int
    similarity: float | None
    highlight: bool
    limit: int
    offset: int
    strict: bool
    round_trip: RoundTrip
    adjustments: list[str]
    original_length: int
    #: What the kNN leg embeds (the text, or a parsed query's positive words and phrases).
    embed_text: str = ""
    #: The parsed query's BM25 clause (syntax="boolean"), None for plain text.
    bm25_clause: dict[str, Any] | None = None
    #: The filtered field names (never their values), for telemetry's "top filters".
    filter_fields: tuple[str, ...] = ()
    #: The tenant every result must belong to (checked again on the results).
    tenant_id: str | None = None


class SearchClient:
    """Hybrid search over one Elasticsearch alias: BM25 ∥ kNN, fused in the client.

    Lifecycle is explicit: ``async with SearchClient.from_settings() as client`` (or ``await
    client.aclose()``). A closed client raises :class:`ClientClosed`.
    """

    def __init__(
        self,
        es: AsyncElasticsearch,
        embedder: Embedder,
        settings: SearchSettings | None = None,
        *,
        owns_clients: bool = True,
        es_policy: ResiliencePolicy | None = None,
        embeddings_policy: ResiliencePolicy | None = None,
    ) -> None:
        self._es = es
        self._embedder = embedder
        self._settings = settings if settings is not None else SearchSettings()
        self._owns = owns_clients
        self._closed = False
        self._checked_index: str | None = None
        self._last_outcomes: dict[str, _LegOutcome] = {}
        self._telemetry: tuple[TelemetrySink, TelemetryObserver] | None = None
        self._es_resilience = Resilience("elasticsearch", es_policy or self._settings.es_policy())
        self._embed_resilience = Resilience("embeddings", embeddings_policy or self._settings.embeddings_policy())

    # -- construction and lifecycle -------------------------------------------------------------------

    @classmethod
    def from_settings(cls, settings: SearchSettings | None = None, *, embedder: Embedder | None = None) -> SearchClient:
        """A client from ``ES_*`` (and ``EMBEDDINGS_*``) environment variables, or the settings given."""
        s = settings if settings is not None else SearchSettings()
        hosts = s.hosts()
        if not hosts and not s.cloud_id:
            raise ElasticsearchNotConfigured()
        auth: dict[str, Any] = {"ca_certs": s.ca_certs} if s.ca_certs else {}
        if s.ssl_assert_fingerprint:
            auth["ssl_assert_fingerprint"] = s.ssl_assert_fingerprint
        if s.cloud_id:
            auth["cloud_id"] = s.cloud_id
        if s.api_key is not None:
            auth["api_key"] = s.api_key.get_secret_value()
        elif s.username is not None:
            auth["basic_auth"] = (s.username, s.password.get_secret_value() if s.password else "")
        # Only when asked: passing any sniff option (even False) installs elasticsearch-py's sniff callback,
        # whose requests use the transport's default retries (3) and outlive a closed client.
        sniffing: dict[str, Any] = {}
        if s.sniff_on_start or s.sniff_on_node_failure:
            sniffing = {
                "sniff_on_start": s.sniff_on_start,
                "sniff_on_node_failure": s.sniff_on_node_failure,
                "min_delay_between_sniffing": s.sniff_min_delay_s,
            }
        try:
            es = AsyncElasticsearch(
                hosts or None,
                request_timeout=s.request_timeout_s,
                # One retry layer only (ours). The transport keeps node failover for multi-node clusters (on
                # connection errors and timeouts) and never retries statuses by itself (it would, at once).
                max_retries=max(len(hosts) - 1, 2 if s.sniff_on_start or s.sniff_on_node_failure else 0),
                retry_on_status=(),
                # With several nodes a timed-out node is failed over too (the transport marks it dead).
                retry_on_timeout=len(hosts) > 1,
                verify_certs=s.verify_certs,
                **sniffing,
                **auth,
            )
        except ValueError as exc:  # e.g. TLS options with an http:// URL
            raise ConfigurationError(f"invalid Elasticsearch connection settings: {exc}") from None
        try:
            emb = embedder if embedder is not None else create_embedder()
        except EmbeddingConfigError as exc:
            raise ConfigurationError(str(exc)) from exc
        return cls(es, emb, s)

    async def __aenter__(self) -> Self:
        self._check_open()
        if self._settings.telemetry and self._telemetry is None:
            await self.enable_telemetry(data_stream=self._settings.telemetry_data_stream)
        return self

    async def enable_telemetry(self, *, data_stream: str = DEFAULT_DATA_STREAM, **options: Any) -> TelemetrySink:
        """Ship search and breaker events into ``data_stream`` (for the Kibana dashboard in ``kibana/``).

        Asynchronous and bounded, with its own breaker: a slow or failing sink never slows or fails a
        search (see ``storage._telemetry``). Events of every client in the process are shipped.
        ``options`` go to :class:`TelemetrySink`. Stopped (and flushed) by :meth:`aclose`.
        """
        self._check_open()
        if self._telemetry is not None:
            return self._telemetry[0]
        sink = TelemetrySink(self._es, data_stream=data_stream, **options)
        await sink.start()
        observer = TelemetryObserver(sink)
        add_observer(observer)
        self._telemetry = (sink, observer)
        return sink

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the Elasticsearch connection pool and the embedder. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._es_resilience.close()
        self._embed_resilience.close()
        if self._telemetry is not None:
            sink, observer = self._telemetry
            remove_observer(observer)
            await sink.aclose()
        if self._owns:
            try:
                await self._es.close()
            finally:
                await self._embedder.aclose()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def settings(self) -> SearchSettings:
        return self._settings

    @property
    def embedder(self) -> Embedder:
        return self._embedder

    @functools.cached_property
    def _leg_es(self) -> AsyncElasticsearch:
        """The client with the leg budget as request timeout, made once: ``options()`` builds a whole client
        (forty namespaced sub-clients) per call — 0.7 ms per hybrid search when done per leg."""
        return self._es.options(request_timeout=self._settings.leg_timeout_s)

    @property
    def resilience(self) -> dict[str, Resilience]:
        """The per-dependency stacks (breaker state, counters)."""
        return {"elasticsearch": self._es_resilience, "embeddings": self._embed_resilience}

    @property
    def index(self) -> str:
        """The alias searched and written."""
        return self._settings.index

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosed("the SearchClient is closed")

    # -- Elasticsearch calls (one place, so the resilience layer wraps them all) ------------------------

    async def _es_call(
        self,
        op: Callable[[], Awaitable[T]],
        *,
        deadline_s: float | None = None,
        attempt_timeout_s: float | None = None,
    ) -> T:
        """Every Elasticsearch request goes through here: error mapping inside the resilience stack."""
        self._check_open()

        async def attempt() -> T:
            try:
                return await op()
            except SearchError:
                raise
            except Exception as exc:
                raise map_es_error(exc) from exc

        return await self._es_resilience.call(attempt, deadline_s=deadline_s, attempt_timeout_s=attempt_timeout_s)

    async def _embed_call(
        self,
        op: Callable[[], Awaitable[T]],
        *,
        kind: Literal["query", "documents"],
        count: int,
        deadline_s: float | None = None,
        attempt_timeout_s: float | None = None,
    ) -> T:
        """Every embedding call goes through here: its own stack, so one breaker never blocks the other."""
        self._check_open()

        async def attempt() -> T:
            try:
                return await op()
            except EmbeddingError as exc:
                raise map_embedding_error(exc) from exc

        attrs: dict[str, AttrValue] = {
            "embeddings.kind": kind,
            "embeddings.count": count,
            "embeddings.model": self._embedder.model_id,
        }
        with span("hybrid_search.embed", attrs):
            return await self._embed_resilience.call(
                attempt, deadline_s=deadline_s, attempt_timeout_s=attempt_timeout_s
            )

    async def _embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        # A batch of documents may legitimately take longer than one query: half a second per text on top.
        budget = self._settings.embeddings_timeout_s + 0.5 * len(texts)
        return await self._embed_call(
            lambda: self._embedder.embed_documents(texts),
            kind="documents",
            count=len(texts),
            deadline_s=budget * 2,
            attempt_timeout_s=budget,
        )

    async def _embed_query(self, text: str, *, deadline_s: float | None = None) -> Vector:
        return await self._embed_call(
            lambda: self._embedder.embed_query(text), kind="query", count=1, deadline_s=deadline_s
        )

    # -- index management ------------------------------------------------------------------------------

    async def ensure_index(self) -> str:
        """Create the alias and its first versioned index if missing; check an existing one fits.

        Idempotent and safe to call concurrently. Returns the concrete (write) index. Raises
        :class:`DimensionMismatch` if the index was built for other vectors than the embedder's.
        """
        self._check_open()
        await self._probe_embedder()
        alias = self.index
        existing = await self._get_index(alias)
        if existing is None:
            name = versioned_index_name(alias, 1)
            body = self._index_body()
            resp = await self._es_call(
                lambda: self._es.options(ignore_status=400).indices.create(
                    index=name, aliases={alias: {"is_write_index": True}}, **body
                )
            )
            if resp.meta.status == 400 and _error_type(resp.body) != "resource_already_exists_exception":
                raise ConfigurationError(f"could not create index {name}: {_error_reason(resp.body)}")
            existing = await self._get_index(alias)
            if existing is None:  # pragma: no cover - deleted between our calls
                raise IndexNotFound(f"index {name} vanished right after creation")
        write_index = self._check_existing(alias, existing)
        self._checked_index = write_index
        event(20, "index ready", "index.ensure", {"index.alias": alias, "index.name": write_index})
        return write_index

    async def create_index_version(self) -> str:
        """Create the next versioned index (``<alias>-000002``...) for the current embedder, *not* aliased.

        Index into it with ``index_documents(docs, index=name)``, then :meth:`promote_index` swaps the alias
        atomically: searches never see a half-built index (zero-downtime reindex for a new model).
        """
        self._check_open()
        await self._probe_embedder()
        resp = await self._es_call(
            lambda: self._es.options(ignore_status=404).indices.get(index=f"{self.index}-*", expand_wildcards="all")
        )
        names = list(resp.body) if resp.meta.status == 200 else []
        name = next_index_name(self.index, names)
        await self._es_call(lambda: self._es.indices.create(index=name, **self._index_body()))
        return name

    async def promote_index(self, name: str, *, delete_old: bool = False) -> None:
        """Point the alias at ``name`` (atomically) and make it the write index."""
        self._check_open()
        alias = self.index
        current = await self._get_index(alias)
        actions: list[dict[str, Any]] = [{"add": {"index": name, "alias": alias, "is_write_index": True}}]
        old = [n for n in (current or {}) if n != name]
        actions += [{"remove": {"index": n, "alias": alias}} for n in old]
        await self._es_call(lambda: self._es.indices.update_aliases(actions=actions))
        if delete_old and old:
            await self._es_call(lambda: self._es.indices.delete(index=",".join(old)))
        self._checked_index = None

    async def delete_index(self) -> None:
        """Delete the alias and every index behind it (tests, demos)."""
        self._check_open()
        current = await self._get_index(self.index)
        if current:
            await self._es_call(lambda: self._es.indices.delete(index=",".join(current)))
        self._checked_index = None

    async def refresh(self) -> None:
        """Make everything indexed so far searchable now."""
        await self._es_call(lambda: self._es.indices.refresh(index=self.index))

    async def count(self, *, filters: FilterInput = None, tenant_id: str | None = None) -> int:
        clauses = self._clauses(filters, self._require_tenant(tenant_id, "count"))
        resp = await self._es_call(lambda: self._es.count(index=self.index, query={"bool": {"filter": clauses}}))
        return int(resp.body["count"])

    async def get_document(self, doc_id: str, *, tenant_id: str | None = None) -> dict[str, Any] | None:
        """The stored ``_source`` of one document (without its vector), or None — also None when it belongs
        to another tenant than ``tenant_id`` (required when the client is multi-tenant)."""
        tenant = self._require_tenant(tenant_id, "get_document")
        resp = await self._es_call(
            lambda: self._es.options(ignore_status=404).get(index=self.index, id=doc_id, source_excludes=["embedding"])
        )
        if resp.meta.status == 404:
            if _error_type(resp.body) == "index_not_found_exception":
                raise IndexNotFound(f"index {self.index!r} does not exist; call ensure_index()")
            return None
        source = cast(dict[str, Any], resp.body.get("_source", {}))
        if tenant is not None and source.get("tenant_id") != tenant:
            return None  # another tenant's document does not exist for this caller
        return source

    def _require_tenant(self, tenant_id: str | None, what: str) -> str | None:
        if tenant_id is not None and (not isinstance(tenant_id, str) or not tenant_id.strip()):
            raise InvalidQuery("tenant_id must be a non-empty string")
        if tenant_id is None and self._settings.multi_tenant:
            raise InvalidQuery(f"this client is multi-tenant: {what}() needs tenant_id=")
        return tenant_id

    async def health(self) -> dict[str, Any]:
        """Cluster status, server version, license, the index's stats and this client's breaker states."""

        async def optional(call: Callable[[], Awaitable[Any]]) -> dict[str, Any]:
            """Cluster-level facts need the `monitor` privilege, which an application key may lack."""
            try:
                return dict((await self._es_call(call)).body)
            except AccessDenied:
                return {}

        # Not GET /: the root endpoint is a module (rest-root) that minimal distributions leave out.
        nodes = (await optional(lambda: self._es.nodes.info(metric="process"))).get("nodes", {})
        versions = sorted({str(n.get("version")) for n in nodes.values()}) or ["unknown (no monitor privilege)"]
        cluster = await optional(lambda: self._es.cluster.health())
        lic = (await optional(lambda: self._es.license.get())).get("license", {}).get("type", "unknown")
        stats = await self._es_call(
            lambda: self._es.options(ignore_status=404).indices.stats(index=self.index, metric="docs,store")
        )
        indices = stats.body.get("indices", {}) if stats.meta.status == 200 else {}
        return {
            "cluster": {
                "name": cluster.get("cluster_name"),
                "status": cluster.get("status"),
                "nodes": cluster.get("number_of_nodes"),
            },
            "version": ", ".join(versions),
            "license": lic,
            "index": {
                "alias": self.index,
                "exists": bool(indices),
                "indices": sorted(indices),
                "documents": sum(i["primaries"]["docs"]["count"] for i in indices.values()),
                "size_bytes": sum(i["primaries"]["store"]["size_in_bytes"] for i in indices.values()),
            },
            "breakers": {
                dep: {
                    "state": r.state,
                    "calls": r.calls,
                    "attempts": r.attempts,
                    "retries": r.retries,
                    "rejected_open": r.rejected_open,
                }
                for dep, r in self.resilience.items()
            },
            "embeddings": {"model": self._embedder.model_id, "dimensions": self._embedder.dimensions},
        }

    async def _probe_embedder(self) -> None:
        try:
            await self._embedder.probe()
        except EmbeddingConfigError as exc:
            raise ConfigurationError(str(exc)) from exc
        except EmbeddingError as exc:
            raise map_embedding_error(exc) from exc

    def _index_body(self) -> dict[str, Any]:
        return index_body(
            dimensions=self._embedder.dimensions,
            normalized=self._embedder.normalized,
            model_id=self._embedder.model_id,
            analyzer=self._settings.analyzer,
            shards=self._settings.number_of_shards,
            replicas=self._settings.number_of_replicas,
        )

    async def _get_index(self, name: str) -> dict[str, Any] | None:
        resp = await self._es_call(lambda: self._es.options(ignore_status=404).indices.get(index=name))
        if resp.meta.status == 404:
            return None
        return dict(resp.body)

    def _check_existing(self, alias: str, indices: Mapping[str, Any]) -> str:
        write_index = None
        for name, info in indices.items():
            meta = info.get("mappings", {}).get("_meta", {}).get("embedding", {})
            vector = info.get("mappings", {}).get("properties", {}).get("embedding", {})
            dims = meta.get("dimensions", vector.get("dims"))
            if dims is None:
                raise DimensionMismatch(f"index {name} has no 'embedding' vector field; it was not created by us")
            if int(dims) != self._embedder.dimensions:
                raise DimensionMismatch(
                    f"index {name} holds {dims}-dim vectors but the embedder {self._embedder.model_id!r} "
                    f"produces {self._embedder.dimensions}: use the model the index was built with, or build a "
                    "new index version (create_index_version, index_documents(index=...), promote_index)"
                )
            model = meta.get("model_id")
            if model is not None and model != self._embedder.model_id:
                raise DimensionMismatch(
                    f"index {name} was built with {model!r}, the embedder is {self._embedder.model_id!r}: "
                    "vectors of different models must never share an index"
                )
            alias_info = info.get("aliases", {}).get(alias, {})
            if name == alias or alias_info.get("is_write_index") or len(indices) == 1:
                write_index = name
        if write_index is None:
            raise ConfigurationError(f"alias {alias!r} points at several indices and none is the write index")
        return write_index

    # -- indexing --------------------------------------------------------------------------------------

    async def index_documents(
        self,
        documents: Iterable[Document | Mapping[str, Any]],
        *,
        refresh: bool = False,
        progress: ProgressCallback | None = None,
        index: str | None = None,
        tenant_id: str | None = None,
    ) -> IndexReport:
        """Embed (in batches) and bulk-index documents; embedding and bulk requests overlap.

        Every document is validated before anything is sent (:class:`InvalidDocument` names the first bad
        one). Every unique id submitted ends up in exactly one of ``report.indexed`` / ``report.failed``;
        a document whose embedding failed is reported and never indexed without its vector.
        ``refresh=True`` waits until the documents are searchable.
        """
        self._check_open()
        started = time.perf_counter()
        docs, duplicates = _coerce_documents(documents)
        docs = self._assign_tenant(docs, tenant_id)
        if self._checked_index is None and index is None:
            await self.ensure_index()
        if index is not None and "," in index:
            raise InvalidQuery("index_documents writes to one index or alias")
        target = _valid_target(index) if index else self.index
        total = len(docs)
        indexed: list[str] = []
        failed: list[FailedDocument] = []
        embedded = 0

        def report_progress() -> None:
            if progress is not None:
                progress(IndexProgress(total=total, embedded=embedded, indexed=len(indexed), failed=len(failed)))

        queue: asyncio.Queue[list[tuple[Document, Vector]] | None] = asyncio.Queue(_INDEXING_CONCURRENCY_QUEUE)

        async def produce() -> None:
            nonlocal embedded
            try:
                size = self._settings.embed_batch_size
                for start in range(0, total, size):
                    batch = docs[start : start + size]
                    ok, bad = await self._embed_batch_isolating(batch)
                    failed.extend(bad)
                    embedded += len(batch)
                    report_progress()
                    if ok:
                        await queue.put(ok)
            finally:
                await queue.put(None)

        async def consume() -> None:
            while (item := await queue.get()) is not None:
                actions = [
                    {
                        "_op_type": "index",
                        "_index": target,
                        "_id": doc.id,
                        "_source": {**doc.to_source(), "embedding": vector},
                    }
                    for doc, vector in item
                ]
                try:
                    results = await self._es_call(
                        functools.partial(self._bulk, actions),
                        deadline_s=self._settings.bulk_timeout_s * 2,
                        attempt_timeout_s=self._settings.bulk_timeout_s,
                    )
                except SearchError as exc:
                    # The whole batch failed after retries (or fast, breaker open): report it, go on.
                    for doc, _ in item:
                        failed.append(
                            FailedDocument(
                                id=doc.id,
                                reason=exc.reason if exc.reason != "error" else "transport_error",
                                detail=f"{type(exc).__name__}: {exc} (outcome unknown; re-sending is safe: "
                                "ids are explicit)",
                            )
                        )
                    report_progress()
                    continue
                for ok, info in results:
                    doc_id = str(info.get("_id"))
                    if ok:
                        indexed.append(doc_id)
                    else:
                        failed.append(_bulk_failure(doc_id, info))
                report_progress()

        producer = asyncio.create_task(produce(), name="storage-embed-producer")
        try:
            await consume()
        finally:
            if not producer.done():
                producer.cancel()
            await asyncio.gather(producer, return_exceptions=True)
        if not producer.cancelled() and (producer_exc := producer.exception()) is not None:
            raise producer_exc
        accounted = set(indexed) | {f.id for f in failed}
        for doc in docs:  # defensive: every id is accounted for, whatever happened above
            if doc.id not in accounted:
                failed.append(FailedDocument(id=doc.id, reason="not_sent", detail="bulk indexing stopped"))
        if refresh and indexed:
            await self._es_call(lambda: self._es.indices.refresh(index=target))
        report_progress()
        report = IndexReport(
            index=target,
            indexed=indexed,
            failed=failed,
            duplicates=duplicates,
            seconds=time.perf_counter() - started,
        )
        event(
            20 if report.ok else 30,
            "documents indexed",
            "index.documents",
            {
                "index.name": target,
                "index.submitted": total,
                "index.indexed": len(indexed),
                "index.failed": len(failed),
                "event.duration": int(report.seconds * 1e9),
            },
        )
        return report

    def _assign_tenant(self, docs: list[Document], tenant_id: str | None) -> list[Document]:
        """``tenant_id=`` stamps every document; a document of another tenant is refused. A multi-tenant
        client refuses any document without a tenant."""
        if tenant_id is not None:
            self._require_tenant(tenant_id, "index_documents")
        out = []
        for position, doc in enumerate(docs):
            if tenant_id is not None:
                if doc.tenant_id not in (None, tenant_id):
                    raise InvalidDocument(
                        f"document {doc.id!r} belongs to tenant {doc.tenant_id!r}, not {tenant_id!r}", position=position
                    )
                doc = doc.model_copy(update={"tenant_id": tenant_id}) if doc.tenant_id is None else doc
            elif self._settings.multi_tenant and not doc.tenant_id:
                raise InvalidDocument(
                    f"this client is multi-tenant: document {doc.id!r} has no tenant_id (pass tenant_id=)",
                    position=position,
                )
            out.append(doc)
        return out

    async def _bulk(self, actions: list[dict[str, Any]]) -> list[tuple[bool, dict[str, Any]]]:
        """One attempt at bulk-indexing ``actions``: per-item 429s are retried inside (with backoff); a
        request-level error raises (and the resilience stack retries the batch: ids make it idempotent)."""
        es = self._es.options(request_timeout=self._settings.bulk_timeout_s)
        out: list[tuple[bool, dict[str, Any]]] = []
        async for ok, item in async_streaming_bulk(
            es,
            actions,
            chunk_size=self._settings.bulk_chunk_size,
            max_chunk_bytes=self._settings.bulk_max_bytes,
            max_retries=3,
            initial_backoff=0.5,
            max_backoff=8,
            raise_on_error=False,
            raise_on_exception=True,
            yield_ok=True,
        ):
            out.append((ok, next(iter(item.values()))))
        return out

    async def _embed_batch_isolating(
        self, batch: list[Document]
    ) -> tuple[list[tuple[Document, Vector]], list[FailedDocument]]:
        """Embed a batch; if the answer is invalid, embed one by one so only the bad documents fail."""
        try:
            vectors = await self._embed_documents([d.embedding_text() for d in batch])
            return list(zip(batch, vectors, strict=True)), []
        except SearchError as exc:
            cause = exc.__cause__
            if not isinstance(cause, InvalidEmbedding) or len(batch) == 1:
                return [], [_embedding_failure(d, exc) for d in batch]
        ok: list[tuple[Document, Vector]] = []
        bad: list[FailedDocument] = []
        for doc in batch:
            try:
                ok.append((doc, (await self._embed_documents([doc.embedding_text()]))[0]))
            except SearchError as exc:
                bad.append(_embedding_failure(doc, exc))
        return ok, bad

    # -- search ----------------------------------------------------------------------------------------

    async def search(
        self,
        query: str,
        *,
        mode: SearchMode = "hybrid",
        filters: FilterInput = None,
        limit: int = 10,
        offset: int = 0,
        tenant_id: str | None = None,
        fusion: FusionMethod | None = None,
        rrf_k: int | None = None,
        weights: Mapping[str, float] | None = None,
        window: int | None = None,
        num_candidates: int | None = None,
        similarity: float | None = None,
        strict: bool = False,
        highlight: bool = True,
        index: str | None = None,
        recover: bool = False,
        scopes: Sequence[FilterInput] | None = None,
        round_trip: RoundTrip | None = None,
        syntax: QuerySyntax = "plain",
    ) -> SearchResponse:
        """Search ``query`` with BM25, kNN or both (in parallel), fused in the client.

        Validation happens before any request: an empty query, an unknown filter field, a bad mode or
        ``offset + limit`` beyond the fusion ``window`` raise :class:`InvalidQuery`.
        In hybrid mode a failed leg degrades the result (``degraded=True``) unless ``strict=True``;
        if every leg fails, :class:`SearchFailed` carries each leg's typed error.

        Highlights: BM25 hits carry the leg's own; hits it did not return (kNN-only) get theirs from one
        follow-up request within the leg budget (``highlight=False`` skips it).
        Zero-result recovery (opt-in, reported in ``response.recovery``): ``recover=True`` retries an empty
        BM25 leg with fuzzy matching; ``scopes`` are wider filter sets tried in order while nothing is found
        (``response.scope_tier`` says which served). ``round_trip`` picks two parallel requests or one
        ``_msearch`` (default: ``settings.round_trip``). ``syntax="boolean"`` parses AND/OR/NOT, "phrases"
        and field prefixes (``ticker:AAPL``, ``type:10-K``, ``date:2024-06``) into safe query DSL
        (:class:`QuerySyntaxError` points at the offending token); plain text is the default.
        """
        self._check_open()
        started = time.perf_counter()
        plan = self._plan(
            query,
            mode=mode,
            filters=filters,
            tenant_id=tenant_id,
            limit=limit,
            offset=offset,
            fusion=fusion,
            rrf_k=rrf_k,
            weights=weights,
            window=window,
            num_candidates=num_candidates,
            similarity=similarity,
            strict=strict,
            highlight=highlight,
            index=index,
            round_trip=round_trip,
            syntax=syntax,
        )
        query_filters = plan.clauses[len(self._clauses(filters, tenant_id)) :]  # from the query syntax
        tiers = [plan] + [
            dataclasses.replace(plan, clauses=self._clauses(scope, tenant_id) + query_filters)
            for scope in (scopes or ())
        ]
        attrs: dict[str, AttrValue] = {
            "search.mode": plan.mode,
            "search.query_hash": query_hash(plan.text),
            "search.fusion.method": plan.method,
            "search.window": plan.window,
            "search.limit": plan.limit,
            "search.round_trip": plan.round_trip,
        }
        with span("hybrid_search.search", attrs) as search_span:
            for tier, tier_plan in enumerate(tiers):
                try:
                    response, outcomes = await self._search_once(tier_plan, started, recover=recover)
                except SearchError as exc:
                    self._log_search(plan, self._last_outcomes, None, started, error=exc)
                    raise
                if response.total_fused or tier == len(tiers) - 1:
                    break
            if tier:
                response = response.model_copy(update={"scope_tier": tier, "recovery": [*response.recovery, "scope"]})
            response = response.model_copy(update={"latency_ms": (time.perf_counter() - started) * 1000})
            self._log_search(plan, outcomes, response, started)
            search_span.set_attribute("search.hits", len(response.hits))
            search_span.set_attribute("search.degraded", response.degraded)
            if response.recovery:
                search_span.set_attribute("search.recovery", response.recovery)
            if response.degraded:
                search_span.set_attribute("search.legs_failed", response.legs_failed)
                search_span.set_attribute("search.degraded_reason", response.degraded_reason or "")
            return response

    def _clauses(self, filters: FilterInput, tenant_id: str | None) -> list[dict[str, Any]]:
        parsed = parse_filters(filters)
        if tenant_id is not None:
            parsed.append(Term("tenant_id", tenant_id))
        return to_es_filters(parsed)

    def _plan(
        self,
        query: str,
        *,
        mode: SearchMode,
        filters: FilterInput,
        tenant_id: str | None,
        limit: int,
        offset: int,
        fusion: FusionMethod | None,
        rrf_k: int | None,
        weights: Mapping[str, float] | None,
        window: int | None,
        num_candidates: int | None,
        similarity: float | None,
        strict: bool,
        highlight: bool,
        index: str | None,
        round_trip: RoundTrip | None,
        syntax: QuerySyntax = "plain",
    ) -> _Plan:
        """Validate every argument before anything is sent; :class:`InvalidQuery` names the bad one."""
        s = self._settings
        if mode not in _MODES:
            raise InvalidQuery(f"mode must be one of {_MODES}, got {mode!r}")
        method: FusionMethod = fusion or s.fusion
        if method not in _FUSIONS:
            raise InvalidQuery(f"fusion must be one of {_FUSIONS}, got {method!r}")
        trip: RoundTrip = round_trip or s.round_trip
        if trip not in _ROUND_TRIPS:
            raise InvalidQuery(f"round_trip must be one of {_ROUND_TRIPS}, got {trip!r}")
        win = window if window is not None else s.window
        k = rrf_k if rrf_k is not None else s.rrf_k
        candidates = num_candidates if num_candidates is not None else s.num_candidates
        if not 1 <= win <= 10_000:
            raise InvalidQuery("window must be between 1 and 10000")
        if k < 1:
            raise InvalidQuery("rrf_k must be >= 1")
        if limit < 1 or offset < 0:
            raise InvalidQuery("limit must be >= 1 and offset >= 0")
        if offset + limit > win:
            raise InvalidQuery(
                f"offset + limit = {offset + limit} is beyond the fusion window ({win}); pass a larger window= "
                "or walk the results with search_page()"
            )
        if not win <= candidates <= 10_000:
            candidates = min(max(candidates, win), 10_000)
        leg_weights = {"bm25": s.bm25_weight, "knn": s.knn_weight}
        if weights:
            unknown = set(weights) - set(leg_weights)
            if unknown:
                raise InvalidQuery(f"weights for unknown legs: {sorted(unknown)}; legs are bm25 and knn")
            leg_weights.update(weights)
        if any(not (w >= 0) or w == float("inf") for w in leg_weights.values()):
            raise InvalidQuery("weights must be finite numbers >= 0")
        tenant_id = self._require_tenant(tenant_id, "search")
        cleaned = clean_query(query)
        legs: tuple[Leg, ...] = ("bm25", "knn") if mode == "hybrid" else (mode,)
        clauses = self._clauses(filters, tenant_id)
        embed_text, bm25_clause = cleaned.text, None
        if syntax == "boolean":
            parsed = parse_query(cleaned.text, fields=BM25_FIELDS)
            embed_text, bm25_clause = parsed.embed_text, parsed.clause
            clauses += to_es_filters(parsed.filters)
        elif syntax != "plain":
            raise InvalidQuery(f"syntax must be 'plain' or 'boolean', got {syntax!r}")
        return _Plan(
            text=cleaned.text,
            mode=mode,
            legs=legs,
            clauses=clauses,
            target=_valid_target(index) if index else self.index,
            method=method,
            k=k,
            weights={leg: leg_weights[leg] for leg in legs},
            window=win,
            candidates=candidates,
            similarity=similarity,
            highlight=highlight,
            limit=limit,
            offset=offset,
            strict=strict,
            round_trip=trip,
            adjustments=list(cleaned.adjustments),
            original_length=cleaned.original_length,
            embed_text=embed_text,
            bm25_clause=bm25_clause,
            filter_fields=tuple(
                sorted({f.field for f in parse_filters(filters)} | ({"tenant_id"} if tenant_id else set()))
            ),
        )

    async def _search_once(
        self, plan: _Plan, started: float, *, recover: bool
    ) -> tuple[SearchResponse, dict[str, _LegOutcome]]:
        """One tier: run the legs, recover an empty BM25 leg, fuse, complete highlights."""
        if plan.round_trip == "msearch":
            outcomes = await self._legs_msearch(plan)
        else:
            outcomes = await self._legs_parallel(plan)
        self._last_outcomes = outcomes
        recovery: list[str] = []
        bm25 = outcomes.get("bm25")
        if recover and bm25 is not None and bm25.error is None and not bm25.hits:
            fuzzy = _LegOutcome("bm25")
            body = bm25_fuzzy_request(plan.embed_text, filters=plan.clauses, size=plan.window, highlight=plan.highlight)
            await self._run_leg(fuzzy, self._bm25_leg(fuzzy, plan.target, body))
            if fuzzy.error is None and fuzzy.hits:
                fuzzy.latency_ms += bm25.latency_ms
                outcomes["bm25"] = fuzzy
                recovery.append("fuzzy")

        failed: dict[str, SearchError] = {leg: o.error for leg, o in outcomes.items() if o.error is not None}
        if failed and (plan.strict or len(failed) == len(outcomes)):
            errors = list(failed.values())
            if all(isinstance(e, IndexNotFound) for e in errors):
                raise errors[0]
            if all(isinstance(e, ConfigurationError) for e in errors):
                raise errors[0]  # credentials, privileges, TLS: a set-up problem, not a search outcome
            if closed := [e for e in errors if isinstance(e, ClientClosed)]:
                raise closed[0]  # closing is the caller's act, not a dependency failure
            raise SearchFailed("; ".join(f"{leg} leg failed: {err}" for leg, err in failed.items()), leg_errors=failed)
        ok_legs = {leg: o for leg, o in outcomes.items() if o.error is None}
        fused = fuse(
            {leg: [LegHit(str(h["_id"]), float(h.get("_score") or 0.0)) for h in o.hits] for leg, o in ok_legs.items()},
            method=plan.method,
            k=plan.k,
            weights={leg: plan.weights[leg] for leg in ok_legs},
        )
        sources: dict[str, dict[str, Any]] = {}
        highlights: dict[str, dict[str, list[str]]] = {}
        for o in ok_legs.values():
            for h in o.hits:
                sources.setdefault(str(h["_id"]), h.get("_source") or {})
                if "highlight" in h:
                    highlights[str(h["_id"])] = h["highlight"]
        if plan.tenant_id is not None:
            fused = _same_tenant(fused, sources, plan.tenant_id)
        page = fused[plan.offset : plan.offset + plan.limit]
        origin: dict[str, HighlightSource] = dict.fromkeys(highlights, "bm25")
        complete = True
        if plan.highlight:
            missing = [f.id for f in page if f.id not in highlights]
            if missing:
                budget = self._settings.leg_timeout_s - (time.perf_counter() - started)
                found = await self._follow_up(plan.embed_text, missing, budget, index=plan.target, filters=plan.clauses)
                complete = found is not None
                for doc_id, h in (found or {}).items():
                    highlights[doc_id] = h.get("highlight") or {}
                    origin[doc_id] = _highlight_origin(highlights[doc_id])
        hits = [
            SearchHit(
                id=f.id,
                score=f.score,
                normalized_score=f.normalized_score,
                ranks=dict(f.ranks),
                leg_scores=dict(f.leg_scores),
                source=sources.get(f.id, {}),
                highlights=highlights.get(f.id, {}),
                highlight_source=origin.get(f.id),
            )
            for f in page
        ]
        overlap = 0
        if len(ok_legs) == 2:
            overlap = len({str(h["_id"]) for h in ok_legs["bm25"].hits} & {str(h["_id"]) for h in ok_legs["knn"].hits})
        first_error = next(iter(failed.values()), None)
        response = SearchResponse(
            query=plan.text,
            mode=plan.mode,
            hits=hits,
            total_fused=len(fused),
            offset=plan.offset,
            limit=plan.limit,
            legs={leg: _leg_report(o) for leg, o in outcomes.items()},
            overlap=overlap,
            fusion={
                "method": plan.method,
                "k": plan.k,
                "weights": dict(plan.weights),
                "window": plan.window,
                "num_candidates": plan.candidates,
            },
            degraded=bool(failed),
            legs_failed=sorted(failed),
            degraded_reason=first_error.reason if first_error else None,
            query_adjustments=plan.adjustments,
            recovery=recovery,
            round_trip=plan.round_trip,
            highlights_complete=complete,
            latency_ms=(time.perf_counter() - started) * 1000,
            correlation_id=get_correlation_id(),
        )
        return response, outcomes

    async def _legs_parallel(self, plan: _Plan) -> dict[str, _LegOutcome]:
        coros: list[Awaitable[_LegOutcome]] = []
        if "bm25" in plan.legs:
            body = bm25_request(
                plan.text, filters=plan.clauses, size=plan.window, highlight=plan.highlight, clause=plan.bm25_clause
            )
            bm25 = _LegOutcome("bm25")
            coros.append(self._run_leg(bm25, self._bm25_leg(bm25, plan.target, body)))
        if "knn" in plan.legs:
            knn = _LegOutcome("knn")
            coros.append(self._run_leg(knn, self._knn_leg(knn, plan)))
        return {o.leg: o for o in await asyncio.gather(*coros)}

    async def _legs_msearch(self, plan: _Plan) -> dict[str, _LegOutcome]:
        """Both legs in one ``_msearch``: the query is embedded first (the kNN item needs the vector), then
        one request; a per-item error fails that leg only (the degraded-result machinery applies)."""
        budget = self._settings.leg_timeout_s
        t0 = time.perf_counter()
        outcomes: dict[str, _LegOutcome] = {leg: _LegOutcome(leg) for leg in plan.legs}
        with span("hybrid_search.msearch", {"search.legs": list(plan.legs)}) as ms_span:
            searches: list[dict[str, Any]] = []
            order: list[str] = []
            if "knn" in outcomes:
                knn = outcomes["knn"]
                knn.waiting_on = "embeddings"
                try:
                    async with asyncio.timeout(budget):
                        vector = await self._embed_query(plan.embed_text, deadline_s=budget)
                    knn.embed_ms = (time.perf_counter() - t0) * 1000
                    body = knn_request(
                        vector,
                        filters=plan.clauses,
                        k=plan.window,
                        num_candidates=plan.candidates,
                        similarity=plan.similarity,
                    )
                    searches += [{"index": plan.target}, msearch_body(body)]
                    order.append("knn")
                except TimeoutError:
                    knn.error = timeout_error("knn", "embeddings", budget)
                except SearchError as exc:
                    knn.error = exc
                knn.waiting_on = "elasticsearch"
            if "bm25" in outcomes:
                body = bm25_request(
                    plan.text, filters=plan.clauses, size=plan.window, highlight=plan.highlight, clause=plan.bm25_clause
                )
                searches = [{"index": plan.target}, msearch_body(body), *searches]
                order.insert(0, "bm25")
            if searches:
                remaining = max(budget - (time.perf_counter() - t0), 0.001)
                es = self._es.options(request_timeout=remaining)
                try:
                    async with asyncio.timeout(remaining):
                        resp = await self._es_call(lambda: es.msearch(searches=searches), deadline_s=remaining)
                    for leg, item in zip(order, resp.body["responses"], strict=True):
                        if "error" in item:
                            outcomes[leg].error = _msearch_item_error(item)
                        else:
                            outcomes[leg].hits = list(item["hits"]["hits"])
                            outcomes[leg].took_ms = item.get("took")
                except TimeoutError:
                    for leg in order:
                        outcomes[leg].error = timeout_error(leg, "elasticsearch", budget)
                except SearchError as exc:
                    for leg in order:
                        outcomes[leg].error = exc
            elapsed = (time.perf_counter() - t0) * 1000
            for o in outcomes.values():
                o.latency_ms = elapsed
                if o.error is not None:
                    mark_error(ms_span, o.error, reason=o.error.reason)
        return outcomes

    async def _follow_up(
        self,
        text: str,
        ids: Sequence[str],
        budget_s: float,
        *,
        index: str | None = None,
        pit: tuple[str, str] | None = None,
        source: bool = False,
        filters: Sequence[dict[str, Any]] = (),
    ) -> dict[str, dict[str, Any]] | None:
        """One request for ``ids``: highlights for ``text`` (and documents if ``source``), by id.

        Highlights only (``source=False``) are best effort: None when the budget is spent or the request
        fails. With ``source=True`` (deep paging, which needs the documents) errors propagate.
        """
        if budget_s < 0.05 and not source:
            return None
        body = fetch_request(text, ids, source=source, filters=filters)
        if pit is not None:
            body["pit"] = {"id": pit[0], "keep_alive": pit[1]}
        timeout = max(budget_s, 0.05)
        es = self._es.options(request_timeout=timeout)
        with span("hybrid_search.fetch", {"search.fetch.ids": len(ids), "search.fetch.source": source}):
            try:
                async with asyncio.timeout(timeout):
                    if pit is not None:
                        resp = await self._es_call(lambda: es.search(**body), deadline_s=timeout)
                    else:
                        resp = await self._es_call(lambda: es.search(index=index, **body), deadline_s=timeout)
            except (TimeoutError, SearchError) as exc:
                if source:
                    if isinstance(exc, TimeoutError):
                        raise timeout_error("fetch", "elasticsearch", timeout) from None
                    raise
                event(
                    20,
                    "highlight follow-up skipped",
                    "search.highlight_followup",
                    {"error.type": type(exc).__name__, "search.fetch.ids": len(ids)},
                )
                return None
        return {str(h["_id"]): h for h in resp.body["hits"]["hits"]}

    # -- deep paging -----------------------------------------------------------------------------------

    async def search_page(
        self,
        query: str,
        *,
        cursor: str | None = None,
        mode: SearchMode = "hybrid",
        filters: FilterInput = None,
        tenant_id: str | None = None,
        page_size: int = 10,
        depth: int | None = None,
        fusion: FusionMethod | None = None,
        rrf_k: int | None = None,
        weights: Mapping[str, float] | None = None,
        highlight: bool = True,
        index: str | None = None,
        syntax: QuerySyntax = "plain",
    ) -> SearchPage:
        """One page of a stable walk through the fused results, past any fusion window.

        The first call (``cursor=None``) opens a point-in-time; pass ``page.next_cursor`` back, with the
        same arguments, for the next page. When ``next_cursor`` is None the walk is over and its
        point-in-time closed; :meth:`close_cursor` ends a walk early. The order (see ``storage._paging``):
        the fusion of each leg's top ``depth`` documents, then the remaining BM25 matches in BM25 order;
        every document appears once, and writes made during the walk neither appear nor shift pages.
        A walk is strict: a failed leg raises (the same cursor can be retried), it never degrades, since a
        page fused from one leg would reorder the walk. :class:`CursorExpired` when the point-in-time has
        expired (``settings.pit_keep_alive`` between pages); :class:`InvalidQuery` for a cursor made for
        other arguments.
        """
        self._check_open()
        started = time.perf_counter()
        d = depth if depth is not None else self._settings.paging_depth
        if not 1 <= page_size <= 1000:
            raise InvalidQuery("page_size must be between 1 and 1000")
        if not 1 <= d <= 10_000:
            raise InvalidQuery("depth must be between 1 and 10000")
        plan = self._plan(
            query,
            mode=mode,
            filters=filters,
            tenant_id=tenant_id,
            limit=min(page_size, d),
            offset=0,
            fusion=fusion,
            rrf_k=rrf_k,
            weights=weights,
            window=d,
            num_candidates=d,
            similarity=None,
            strict=True,
            highlight=highlight,
            index=index,
            round_trip="parallel",
            syntax=syntax,
        )
        fp = fingerprint(
            {"q": plan.text, "s": plan.bm25_clause is not None, "m": plan.mode, "f": plan.clauses, "i": plan.target}
            | {"fu": plan.method}
            | {"k": plan.k, "w": plan.weights, "d": d}
        )
        keep_alive = self._settings.pit_keep_alive
        if cursor is None:
            opened = await self._es_call(lambda: self._es.open_point_in_time(index=plan.target, keep_alive=keep_alive))
            state: dict[str, Any] = {"pit": opened.body["id"], "o": 0, "t": None, "tr": 0, "td": False}
            state |= {"p": 0, "n": 0, "fp": fp}
        else:
            try:
                state = decode_cursor(cursor)
            except ValueError as exc:
                raise InvalidQuery(str(exc)) from None
            if state.get("fp") != fp:
                raise InvalidQuery(
                    "this cursor belongs to another search: pass the same query, mode, filters, tenant, index, "
                    "fusion and depth as for its first page"
                )
        with span("hybrid_search.page", {"search.mode": plan.mode, "search.page": int(state["p"]) + 1}):
            try:
                return await self._walk_page(plan, state, d, page_size, keep_alive, started)
            except DependencyError as exc:
                if _pit_missing(exc):
                    raise CursorExpired(
                        f"the walk's point-in-time has expired (kept {keep_alive} between pages); start again"
                    ) from exc
                raise

    async def close_cursor(self, cursor: str) -> None:
        """End a walk early: close its point-in-time. Idempotent; an expired one is fine."""
        try:
            pit = str(decode_cursor(cursor)["pit"])
        except (ValueError, KeyError) as exc:
            raise InvalidQuery(str(exc)) from None
        await self._close_pit(pit)

    async def walk(self, query: str, *, page_size: int = 10, **options: Any) -> AsyncIterator[SearchPage]:
        """Every page of a walk (:meth:`search_page` arguments). Use ``contextlib.aclosing`` so that leaving
        the loop early closes the point-in-time at once::

            async with aclosing(client.walk("q", page_size=50)) as pages:
                async for page in pages: ...
        """
        cursor: str | None = None
        try:
            while True:
                page = await self.search_page(query, cursor=cursor, page_size=page_size, **options)
                cursor = page.next_cursor
                yield page
                if cursor is None:
                    return
        finally:
            if cursor is not None and not self._closed:
                await self.close_cursor(cursor)

    async def _close_pit(self, pit: str) -> None:
        try:
            await self._es_call(lambda: self._es.options(ignore_status=404).close_point_in_time(id=pit))
        except SearchError as exc:  # it expires by itself; never fail the caller for it
            event(30, "could not close a point-in-time", "search.pit_close_failed", {"error.type": type(exc).__name__})

    async def _walk_page(
        self, plan: _Plan, state: dict[str, Any], depth: int, page_size: int, keep_alive: str, started: float
    ) -> SearchPage:
        pit: str = state["pit"]
        # 1. The head: each leg's top `depth` (ids and scores only), on the point-in-time, fused.
        outcomes = {leg: _LegOutcome(leg) for leg in plan.legs}
        coros: list[Awaitable[_LegOutcome]] = []
        if "bm25" in outcomes:
            body = on_pit(
                bm25_request(plan.text, filters=plan.clauses, size=depth, highlight=False, clause=plan.bm25_clause),
                pit,
                keep_alive,
            )
            coros.append(self._run_leg(outcomes["bm25"], self._pit_leg(outcomes["bm25"], body)))
        if "knn" in outcomes:
            coros.append(self._run_leg(outcomes["knn"], self._knn_pit_leg(outcomes["knn"], plan, pit, keep_alive)))
        await asyncio.gather(*coros)
        failed: dict[str, SearchError] = {leg: o.error for leg, o in outcomes.items() if o.error is not None}
        if failed:
            for error in failed.values():
                if isinstance(error, IndexNotFound | ClientClosed) or _pit_missing(error):
                    raise error
            raise SearchFailed("; ".join(f"{leg} leg failed: {err}" for leg, err in failed.items()), leg_errors=failed)
        pit = next((o.pit_id for o in outcomes.values() if o.pit_id), pit)
        fused = fuse(
            {
                leg: [LegHit(str(h["_id"]), float(h.get("_score") or 0.0)) for h in o.hits]
                for leg, o in outcomes.items()
            },
            method=plan.method,
            k=plan.k,
            weights=plan.weights,
        )
        offset = int(state["o"])
        chosen = [
            (f.id, f.score, f.normalized_score, dict(f.ranks), dict(f.leg_scores))
            for f in fused[offset : offset + page_size]
        ]
        offset += len(chosen)
        # 2. The BM25 tail, once the head is used up: matches below `depth`, minus the kNN head's ids.
        bm25 = outcomes.get("bm25")
        tail_possible = bm25 is not None and len(bm25.hits) >= depth
        tail_after = (
            state["t"] if state["t"] is not None else (bm25.hits[-1]["sort"] if tail_possible and bm25 else None)
        )
        tail_rank, tail_done = int(state["tr"]), bool(state["td"])
        knn_ids = {str(h["_id"]) for h in outcomes["knn"].hits} if "knn" in outcomes else set()
        best = math.fsum(w / (plan.k + 1) for w in plan.weights.values()) if plan.method == "rrf" else 1.0
        in_tail = False
        while len(chosen) < page_size and tail_possible and not tail_done:
            in_tail = True
            size = min(2 * (page_size - len(chosen)) + 10, 1000)
            body = on_pit(
                bm25_request(plan.text, filters=plan.clauses, size=size, highlight=False, clause=plan.bm25_clause),
                pit,
                keep_alive,
                tail_after,
            )
            resp = await self._es_call(
                functools.partial(self._es.search, **body), deadline_s=self._settings.leg_timeout_s
            )
            pit = resp.body.get("pit_id") or pit
            hits = resp.body["hits"]["hits"]
            consumed = 0
            for h in hits:
                if len(chosen) == page_size:
                    break
                consumed += 1
                tail_rank += 1
                tail_after = h["sort"]
                if str(h["_id"]) in knn_ids:
                    continue  # already in the head
                rank = depth + tail_rank
                score = plan.weights["bm25"] / (plan.k + rank) if plan.method == "rrf" else 0.0
                leg_scores = {"bm25": float(h.get("_score") or 0.0)}
                chosen.append((str(h["_id"]), score, min(score / best, 1.0), {"bm25": rank}, leg_scores))
            if len(hits) < size and consumed == len(hits):
                tail_done = True
        # 3. The page's documents and highlights: one request on the same point-in-time.
        docs: dict[str, dict[str, Any]] = {}
        if chosen:
            found = await self._follow_up(
                plan.embed_text,
                [c[0] for c in chosen],
                self._settings.leg_timeout_s,
                pit=(pit, keep_alive),
                source=True,
                filters=plan.clauses,
            )
            docs = found or {}
            if plan.tenant_id is not None:
                wrong = [c for c in chosen if docs.get(c[0], {}).get("_source", {}).get("tenant_id") != plan.tenant_id]
                if wrong:
                    event(
                        40,
                        "results of another tenant dropped",
                        "search.tenant_violation",
                        {"search.dropped": len(wrong)},
                    )
                    chosen = [c for c in chosen if c not in wrong]
        returned = int(state["n"])
        hits_out = []
        for position, (doc_id, score, normalized, ranks, leg_scores) in enumerate(chosen, start=returned + 1):
            h = docs.get(doc_id, {})
            highlight = h.get("highlight") or {} if plan.highlight else {}
            hits_out.append(
                SearchHit(
                    id=doc_id,
                    score=score,
                    normalized_score=normalized,
                    ranks=ranks,
                    leg_scores=leg_scores,
                    source=h.get("_source") or {},
                    highlights=highlight,
                    highlight_source=_highlight_origin(highlight) if plan.highlight else None,
                    position=position,
                )
            )
        finished = offset >= len(fused) and (not tail_possible or tail_done)
        next_cursor: str | None = None
        if finished:
            await self._close_pit(pit)
        else:
            next_cursor = encode_cursor(
                {"pit": pit, "o": offset, "t": tail_after, "tr": tail_rank, "td": tail_done, "fp": state["fp"]}
                | {"p": int(state["p"]) + 1, "n": returned + len(chosen)}
            )
        page = SearchPage(
            query=plan.text,
            mode=plan.mode,
            hits=hits_out,
            page=int(state["p"]) + 1,
            next_cursor=next_cursor,
            returned=returned + len(chosen),
            in_tail=in_tail,
            latency_ms=(time.perf_counter() - started) * 1000,
        )
        event(
            20,
            "search page",
            "search.page",
            {
                "search.mode": plan.mode,
                "search.query_hash": query_hash(plan.text),
                "search.page": page.page,
                "search.hits": len(hits_out),
                "search.in_tail": in_tail,
                "search.walk_finished": finished,
                "event.duration": int((time.perf_counter() - started) * 1e9),
            },
        )
        return page

    async def _pit_leg(self, out: _LegOutcome, body: dict[str, Any]) -> None:
        es = self._leg_es
        resp = await self._es_call(lambda: es.search(**body), deadline_s=self._settings.leg_timeout_s)
        out.hits, out.took_ms, out.pit_id = (
            list(resp.body["hits"]["hits"]),
            resp.body.get("took"),
            resp.body.get("pit_id"),
        )

    async def _knn_pit_leg(self, out: _LegOutcome, plan: _Plan, pit: str, keep_alive: str) -> None:
        budget = self._settings.leg_timeout_s
        out.waiting_on = "embeddings"
        vector = await self._embed_query(plan.embed_text, deadline_s=budget)
        out.waiting_on = "elasticsearch"
        body = on_pit(
            knn_query_request(vector, filters=plan.clauses, depth=plan.candidates, size=plan.window),
            pit,
            keep_alive,
        )
        await self._pit_leg(out, body)

    async def search_tool(
        self,
        query: str,
        search_type: SearchMode = "hybrid",
        indices: Sequence[str] | str | None = None,
        ticker: str | None = None,
        filters: FilterInput = None,
        limit: int = 10,
        tenant_id: str | None = None,
    ) -> SearchResponse:
        """The seed systems' call shape, delegating to :meth:`search`."""
        merged: FilterInput = filters
        if ticker is not None:
            if filters is not None and not isinstance(filters, Mapping):
                raise InvalidQuery("pass ticker inside filters when filters is a list of Filter objects")
            merged = {**(filters or {}), "ticker": ticker}
        index = indices if isinstance(indices, str) or indices is None else ",".join(indices)
        return await self.search(query, mode=search_type, filters=merged, limit=limit, index=index, tenant_id=tenant_id)

    async def _run_leg(self, outcome: _LegOutcome, work: Awaitable[None]) -> _LegOutcome:
        """Run one leg within its budget; its failure becomes data (``outcome.error``), never an exception."""
        started = time.perf_counter()
        with span(f"hybrid_search.leg.{outcome.leg}", {"search.leg": outcome.leg}) as leg_span:
            try:
                async with asyncio.timeout(self._settings.leg_timeout_s):
                    await work
            except TimeoutError:
                outcome.hits = []
                outcome.error = timeout_error(outcome.leg, outcome.waiting_on, self._settings.leg_timeout_s)
            except SearchError as exc:
                outcome.hits = []
                outcome.error = exc
            outcome.latency_ms = (time.perf_counter() - started) * 1000
            leg_span.set_attribute("search.leg.hits", len(outcome.hits))
            if outcome.error is not None:
                mark_error(leg_span, outcome.error, reason=outcome.error.reason)
        return outcome

    async def _bm25_leg(self, out: _LegOutcome, index: str, body: dict[str, Any]) -> None:
        es = self._leg_es
        resp = await self._es_call(lambda: es.search(index=index, **body), deadline_s=self._settings.leg_timeout_s)
        out.hits, out.took_ms = list(resp.body["hits"]["hits"]), resp.body.get("took")

    async def _knn_leg(self, out: _LegOutcome, plan: _Plan) -> None:
        t0 = time.perf_counter()
        budget = self._settings.leg_timeout_s
        out.waiting_on = "embeddings"
        vector = await self._embed_query(plan.embed_text, deadline_s=budget)
        out.embed_ms = (time.perf_counter() - t0) * 1000
        out.waiting_on = "elasticsearch"
        body = knn_request(
            vector, filters=plan.clauses, k=plan.window, num_candidates=plan.candidates, similarity=plan.similarity
        )
        es = self._leg_es
        remaining = max(budget - (time.perf_counter() - t0), 0.001)
        resp = await self._es_call(lambda: es.search(index=plan.target, **body), deadline_s=remaining)
        out.hits, out.took_ms = list(resp.body["hits"]["hits"]), resp.body.get("took")

    def _log_search(
        self,
        plan: _Plan,
        outcomes: Mapping[str, _LegOutcome],
        response: SearchResponse | None,
        started: float,
        *,
        error: SearchError | None = None,
    ) -> None:
        text, mode, original_length = plan.text, plan.mode, plan.original_length
        fields: dict[str, Any] = {
            "search.filters": list(plan.filter_fields),
            "search.mode": mode,
            "search.query_hash": query_hash(text),
            "search.query_length": len(text),
            "event.duration": int((time.perf_counter() - started) * 1e9),
            "event.outcome": "failure" if error else "success",
        }
        for leg, o in outcomes.items():
            fields[f"search.legs.{leg}.latency_ms"] = round(o.latency_ms, 2)
            fields[f"search.legs.{leg}.hits"] = len(o.hits)
            if o.error is not None:
                fields[f"search.legs.{leg}.reason"] = o.error.reason
        if response is not None:
            fields["search.overlap"] = response.overlap
            fields["search.fusion.method"] = response.fusion["method"]
            fields["search.fusion.k"] = response.fusion["k"]
            fields["search.hits"] = len(response.hits)
            fields["search.degraded"] = response.degraded
            if response.degraded:
                fields["search.legs_failed"] = response.legs_failed
                fields["search.degraded_reason"] = response.degraded_reason
            if "truncated" in response.query_adjustments:
                fields["search.query_truncated_from"] = original_length
            if response.query_adjustments:
                fields["search.query_adjustments"] = response.query_adjustments
            if response.recovery:
                fields["search.recovery"] = response.recovery
                fields["search.scope_tier"] = response.scope_tier
            fields["search.round_trip"] = response.round_trip
            if not response.highlights_complete:
                fields["search.highlights_complete"] = False
        if error is not None:
            fields["error.type"] = type(error).__name__
            fields["error.message"] = str(error)
        level = 40 if error else (30 if response is not None and response.degraded else 20)
        event(level, "search", "search", fields)


def _coerce_documents(documents: Iterable[Document | Mapping[str, Any]]) -> tuple[list[Document], list[str]]:
    if isinstance(documents, Document | Mapping | str | bytes):
        raise InvalidDocument("index_documents takes an iterable of documents, not a single one")
    unique: dict[str, Document] = {}
    duplicates: list[str] = []
    for position, item in enumerate(documents):
        if isinstance(item, Document):
            doc = item
        elif isinstance(item, Mapping):
            try:
                doc = Document.model_validate(item)
            except ValidationError as exc:
                raise InvalidDocument(f"document #{position} is invalid: {exc}", position=position) from None
        else:
            raise InvalidDocument(
                f"document #{position} is a {type(item).__name__}, not a Document or mapping",
                position=position,
            )
        if doc.id in unique:
            duplicates.append(doc.id)
            del unique[doc.id]  # the last occurrence wins, in its own position
        unique[doc.id] = doc
    return list(unique.values()), duplicates


def _embedding_failure(doc: Document, exc: SearchError) -> FailedDocument:
    cause = exc.__cause__ or exc
    return FailedDocument(id=doc.id, reason="embedding_failed", detail=f"{type(cause).__name__}: {cause}")


def _bulk_failure(doc_id: str, info: Mapping[str, Any]) -> FailedDocument:
    status = info.get("status")
    error = info.get("error")
    if isinstance(error, Mapping):
        kind = str(error.get("type", "error"))
        detail = f"{kind}: {error.get('reason', '')}"
    else:
        kind, detail = "transport_error", str(error)
    if status == 429:
        reason = "rejected"
    elif kind in (
        "mapper_parsing_exception",
        "document_parsing_exception",
        "strict_dynamic_mapping_exception",
    ):
        reason = "mapping_error"
    elif "exception" in info:
        reason = "transport_error"
    else:
        reason = kind
    return FailedDocument(id=doc_id, reason=reason, detail=detail, status=status if isinstance(status, int) else None)


_INDEX_NAME = re.compile(r"^[a-z0-9][a-z0-9_.\-]{0,254}$")


def _valid_target(index: str) -> str:
    """Explicit names only (comma-separated): no wildcards, ``_all``, exclusions or remote clusters."""
    names = index.split(",")
    bad = [n for n in names if not _INDEX_NAME.match(n)]
    if bad:
        raise InvalidQuery(f"invalid index name(s) {bad}: lowercase letters, digits, '.', '_', '-'; no wildcards")
    return index


def _same_tenant(fused: list[FusedHit], sources: Mapping[str, Mapping[str, Any]], tenant: str) -> list[FusedHit]:
    """The second check: results of another tenant are dropped (and logged as an error), whatever the query
    did. The filter inside both legs should make this a no-op."""
    kept = [f for f in fused if sources.get(f.id, {}).get("tenant_id") == tenant]
    if len(kept) != len(fused):
        event(
            40,
            "results of another tenant dropped",
            "search.tenant_violation",
            {"search.dropped": len(fused) - len(kept)},
        )
    return kept


def _pit_missing(error: SearchError) -> bool:
    """Elasticsearch's answer for an expired or closed point-in-time."""
    return isinstance(error, DependencyError) and error.status == 404 and "search_context_missing" in str(error)


def _highlight_origin(highlight: Mapping[str, list[str]]) -> HighlightSource:
    return "followup" if any("<em>" in f for frags in highlight.values() for f in frags) else "snippet"


def _msearch_item_error(item: Mapping[str, Any]) -> SearchError:
    status = item.get("status")
    error = item.get("error")
    kind = _error_type({"error": error}) if isinstance(error, Mapping) else None
    if status == 404 and kind == "index_not_found_exception":
        return IndexNotFound(f"index not found: {_error_reason(item)}; call ensure_index()")
    return DependencyError(
        f"Elasticsearch answered {status} for this leg: {kind or 'error'}: {_error_reason(item)}",
        dependency="elasticsearch",
        status=status if isinstance(status, int) else None,
        reason="http_error",
    )


def _leg_report(o: _LegOutcome) -> LegReport:
    return LegReport(
        leg=o.leg,
        ok=o.error is None,
        hits=len(o.hits),
        latency_ms=round(o.latency_ms, 3),
        took_ms=o.took_ms,
        embed_ms=round(o.embed_ms, 3) if o.embed_ms is not None else None,
        reason=o.error.reason if o.error else None,
        error=f"{type(o.error).__name__}: {o.error}" if o.error else None,
    )


def _error_reason(body: Any) -> str:
    if isinstance(body, Mapping) and isinstance(body.get("error"), Mapping):
        return str(body["error"].get("reason", body["error"]))
    return str(body)
