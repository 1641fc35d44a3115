"""``SearchClient``: the front door. Construction, lifecycle and wiring; the work is done by

- :mod:`storage._engine` — every read path's entry points (plan, retrieve, fuse, fetch) and a search;
- :mod:`storage._walk` — deep paging on a point-in-time, on the engine;
- :mod:`storage._answer` — answers with citations: a search, a budgeted context, the chat model;
- :mod:`storage._indices` — the alias and its versioned indices; :mod:`storage._ingest` — embed + bulk;
  :mod:`storage._reembed` — a model change with no downtime;
- :mod:`storage._backend` — every call to Elasticsearch and the model providers, through its resilience
  stack.

Each operation takes its request type's arguments (``storage._requests``: one keyword list per operation,
written once) or one request object. The client holds no per-request state: concurrent calls share nothing
but the dependencies.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Self

from elasticsearch import AsyncElasticsearch
from elasticsearch.serializer import OrjsonSerializer

from embeddings import LLM, Embedder, ProviderConfigError, Reranker, create_embedder, create_llm, create_reranker

from ._answer import Answerer
from ._answers import Answer, AnswerEvent
from ._backend import Backend
from ._compat import CompatibleTransport
from ._engine import Engine
from ._errors import ConfigurationError, ElasticsearchNotConfigured, InvalidQuery
from ._filters import FilterInput
from ._fusion import LegHit
from ._fusion_setting import FusionSetting, FusionSource
from ._indices import IndexManager
from ._ingest import Ingester
from ._models import IndexProgress, IndexReport, ReembedReport, SearchMode
from ._reembed import Reembedder
from ._requests import AnswerRequest, IngestRequest, PageRequest, SearchRequest, operation
from ._resilience import Resilience, ResiliencePolicy
from ._results import SearchPage, SearchResponse
from ._settings import SearchSettings
from ._telemetry import DEFAULT_DATA_STREAM, TelemetryObserver, TelemetrySink
from ._walk import Walker

__all__ = ["SearchClient"]


class SearchClient:
    """Hybrid search over one Elasticsearch alias: BM25 ∥ kNN, fused in the client, optionally reranked.

    Lifecycle is explicit: ``async with SearchClient.from_settings() as client`` (or ``await
    client.aclose()``). A closed client raises :class:`ClientClosed`.
    """

    def __init__(
        self,
        es: AsyncElasticsearch,
        embedder: Embedder,
        settings: SearchSettings | None = None,
        *,
        owns_clients: bool = False,
        es_policy: ResiliencePolicy | None = None,
        embeddings_policy: ResiliencePolicy | None = None,
        reranker: Reranker | None = None,
        reranker_policy: ResiliencePolicy | None = None,
        llm: LLM | None = None,
        llm_policy: ResiliencePolicy | None = None,
    ) -> None:
        self._es = es
        self._settings = settings if settings is not None else SearchSettings()
        #: What :meth:`aclose` closes: with ``owns_clients`` (``from_settings`` sets it), ``es`` and the providers;
        #: else nothing — a client or provider the caller made and passed to the constructor is the caller's.
        self._closers: tuple[Callable[[], Awaitable[None]], ...] = (
            _closers(es, embedder, reranker, llm) if owns_clients else ()
        )
        self._backend = Backend(
            es,
            embedder,
            self._settings,
            reranker=reranker,
            es_policy=es_policy,
            embeddings_policy=embeddings_policy,
            reranker_policy=reranker_policy,
            llm=llm,
            llm_policy=llm_policy,
        )
        self._engine = Engine(self._backend)
        self._indices = IndexManager(self._backend)
        self._ingester = Ingester(self._backend, self._indices)
        self._walker = Walker(self._backend, self._engine)
        self._answerer = Answerer(self._backend, self._engine)
        self._reembedder = Reembedder(self._backend, self._indices, self._ingester)
        self._telemetry: tuple[TelemetrySink, TelemetryObserver] | None = None

    # -- construction and lifecycle -------------------------------------------------------------------

    @classmethod
    def from_settings(
        cls,
        settings: SearchSettings | None = None,
        *,
        embedder: Embedder | None = None,
        reranker: Reranker | None = None,
        llm: LLM | None = None,
    ) -> SearchClient:
        """A client from ``ES_*``, ``EMBEDDINGS_*``, ``RERANKER_*`` and ``LLM_*`` environment variables, or the
        settings and providers given. The reranker and the chat model are optional (``RERANKER_PROVIDER``,
        ``LLM_PROVIDER``, default none)."""
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
        # The transport fails over to another node (several hosts given, or found by sniffing).
        failover = len(hosts) > 1 or s.sniff_on_start or s.sniff_on_node_failure
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
                # With several nodes a timed-out node is failed over too (the transport marks it dead): a hung
                # node costs a search one request timeout (half the leg budget, Backend.leg_request_timeout_s).
                retry_on_timeout=failover,
                verify_certs=s.verify_certs,
                # orjson: request bodies carry a query vector, which the standard library encodes ~30x slower.
                serializer=OrjsonSerializer(),
                # Whatever client major is installed, the compatibility header the server accepts (_compat).
                transport_class=CompatibleTransport,
                **sniffing,
                **auth,
            )
        except ValueError as exc:  # e.g. TLS options with an http:// URL
            raise ConfigurationError(f"invalid Elasticsearch connection settings: {exc}") from None
        # The providers last: nothing above holds a connection yet, so a failure here leaks nothing.
        try:
            emb = embedder if embedder is not None else create_embedder()
            rer = reranker if reranker is not None else create_reranker()
            chat = llm if llm is not None else create_llm()
        except ProviderConfigError as exc:
            raise ConfigurationError(str(exc)) from exc
        # It owns what it made and what it was given here (a factory takes them over): aclose() closes them.
        return cls(es, emb, s, reranker=rer, llm=chat, owns_clients=True)

    async def __aenter__(self) -> Self:
        self._backend.check_open()
        metadata = self._backend.metadata
        if self.index not in metadata.targets:  # the alias's tuned fusion and layout: read once
            await metadata.read_target(self.index)  # (at most METADATA_TIMEOUT_S; never fails the entry)
        if self._settings.telemetry and self._telemetry is None:
            await self.enable_telemetry(data_stream=self._settings.telemetry_data_stream)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def enable_telemetry(self, *, data_stream: str = DEFAULT_DATA_STREAM, **options: Any) -> TelemetrySink:
        """Ship this client's search and breaker events into ``data_stream`` (for the Kibana dashboard in
        ``kibana/``).

        Asynchronous and bounded, with its own breaker: a slow or failing sink never slows or fails a
        search (see ``storage._telemetry``). ``options`` go to :class:`TelemetrySink`. Stopped (and flushed)
        by :meth:`aclose`.
        """
        self._backend.check_open()
        if self._telemetry is not None:
            return self._telemetry[0]
        sink = TelemetrySink(self._es, data_stream=data_stream, **options)
        await sink.start()
        observer = TelemetryObserver(sink)
        self._backend.events.add(observer)
        self._telemetry = (sink, observer)
        return sink

    async def aclose(self) -> None:
        """Close what this client owns: the Elasticsearch client and the model providers of a client made by
        :meth:`from_settings`, or given to the constructor with ``owns_clients=True``. Idempotent."""
        b = self._backend
        if b.closed:
            return
        b.close()
        if self._telemetry is not None:
            sink, observer = self._telemetry
            b.events.remove(observer)
            await sink.aclose()
        failures: list[Exception] = []
        for close in self._closers:  # every one is closed, whatever the others do
            try:
                await close()
            except Exception as exc:
                failures.append(exc)
        if failures:
            raise failures[0]

    @property
    def closed(self) -> bool:
        return self._backend.closed

    @property
    def entered_loop(self) -> asyncio.AbstractEventLoop | None:
        """The event loop the client lives on (where its connections live): the one ``async with`` entered
        it on, or it was first used on; None before any use. Another loop's call is
        :class:`WrongEventLoop`; the framework retrievers (``storage.integrations``) hand every call to it."""
        return self._backend.loop

    @property
    def elasticsearch(self) -> AsyncElasticsearch:
        """The underlying elasticsearch-py client (shared: do not close it; its calls bypass this client's
        resilience stack)."""
        return self._es

    @property
    def settings(self) -> SearchSettings:
        return self._settings

    @property
    def embedder(self) -> Embedder:
        return self._backend.embedder

    @property
    def reranker(self) -> Reranker | None:
        return self._backend.reranker

    @property
    def llm(self) -> LLM | None:
        return self._backend.llm

    @property
    def resilience(self) -> dict[str, Resilience]:
        """The per-dependency stacks (breaker state, counters)."""
        return self._backend.resilience

    @property
    def index(self) -> str:
        """The alias searched and written."""
        return self._settings.index

    # -- index management ------------------------------------------------------------------------------

    async def ensure_index(self) -> str:
        """Create the alias and its first versioned index if missing; check an existing one fits.

        Idempotent and safe to call concurrently. Returns the concrete (write) index. Raises
        :class:`DimensionMismatch` if the index was built for other vectors than the embedder's.
        """
        return await self._indices.ensure_index()

    async def create_index_version(self) -> str:
        """Create the next versioned index (``<alias>-000002``...) for the current embedder, *not* aliased.

        Index into it with ``index_documents(docs, index=name)``, then :meth:`promote_index` swaps the alias
        atomically: searches never see a half-built index (zero-downtime reindex for a new model).
        """
        return await self._indices.create_index_version()

    async def promote_index(self, name: str, *, delete_old: bool = False) -> None:
        """Point the alias at ``name`` (atomically) and make it the write index."""
        await self._indices.promote_index(name, delete_old=delete_old)

    async def delete_index(self) -> None:
        """Delete the alias and every index behind it (tests, demos)."""
        await self._indices.delete_index()

    async def refresh(self) -> None:
        """Make everything indexed so far searchable now."""
        await self._indices.refresh()

    async def count(self, *, filters: FilterInput = None, tenant_id: str | None = None) -> int:
        """Documents matching ``filters`` (the tenant's, for a tenant)."""
        return await self._indices.count(filters=filters, tenant_id=tenant_id)

    async def existing(self, ids: Sequence[str], *, tenant_id: str | None = None) -> set[str]:
        """Which of ``ids`` the index holds (the tenant's only, for a tenant)."""
        return await self._indices.existing(ids, tenant_id=tenant_id)

    async def matching_ids(self, filters: FilterInput = None, *, tenant_id: str | None = None) -> list[str]:
        """The ids of every document ``filters`` match (None: every document; the tenant's only, for a
        tenant), read on a point-in-time: what a store's delete or get by filter works on."""
        return await self._indices.matching_ids(filters=filters, tenant_id=tenant_id)

    async def get_document(self, doc_id: str, *, tenant_id: str | None = None) -> dict[str, Any] | None:
        """The stored ``_source`` of one document (without its vector), or None — also None when it belongs
        to another tenant than ``tenant_id`` (required when the client is multi-tenant)."""
        return await self._indices.get_document(doc_id, tenant_id=tenant_id)

    async def get_documents(self, ids: Sequence[str], *, tenant_id: str | None = None) -> dict[str, dict[str, Any]]:
        """id -> stored ``_source`` (without vectors) of those of ``ids`` the index holds, in the order of
        ``ids`` (the tenant's only, for a tenant)."""
        return await self._indices.get_documents(ids, tenant_id=tenant_id)

    async def delete_documents(
        self, ids: Sequence[str], *, tenant_id: str | None = None, refresh: bool = False
    ) -> list[str]:
        """Delete the documents of ``ids`` (for a tenant: only its own); the ids that were deleted (an id the
        index does not hold is not an error). ``refresh=True``: gone from searches when this returns."""
        return await self._indices.delete_documents(ids, tenant_id=tenant_id, refresh=refresh)

    async def health(self) -> dict[str, Any]:
        """Cluster status, server version, license, the index's stats and this client's breaker states."""
        return await self._indices.health()

    async def fusion_in_force(self) -> tuple[FusionSetting, dict[str, FusionSource]]:
        """The fusion a search of the alias uses when the call passes none (read now), and where each of its
        parameters comes from (``settings``, ``index``: stored with it, ``default``)."""
        return await self._engine.fusion_in_force()

    async def store_fusion(self, setting: FusionSetting, **provenance: Any) -> str:
        """Store ``setting`` with the alias's write index (``_meta.fusion``; ``provenance``, e.g. how it was
        tuned, under ``tuned``): every client of the alias uses it where neither the call nor its settings
        say otherwise (read when entered, refreshed once a minute). Returns the index written."""
        meta = setting.to_meta() | ({"tuned": provenance} if provenance else {})
        return await self._indices.store_fusion(meta)

    # -- indexing --------------------------------------------------------------------------------------

    @operation(IngestRequest)
    async def index_documents(self, request: IngestRequest) -> IndexReport:
        """Embed (in batches) and bulk-index documents; embedding and bulk requests overlap.

        Every document is validated first: an invalid one (neither title nor text, a bad field, another
        tenant's) goes into ``report.failed`` with reason ``invalid_document``, its ``position`` and the
        validation message, and the valid ones are indexed; ``strict=True`` instead raises
        :class:`InvalidDocument` for the first one and sends nothing. Every unique id submitted ends up in
        exactly one of ``report.indexed`` / ``report.failed``; a document whose embedding failed is reported
        and never indexed without its vector. ``refresh=True`` waits until the documents are searchable.
        ``overwrite=False`` writes only ids the index does not hold (atomically: Elasticsearch's ``create``);
        the others are failed with reason ``exists``.
        """
        return await self._ingester.index_documents(request)

    async def reembed(
        self,
        embedder: Embedder | None = None,
        *,
        delete_old: bool = False,
        restart: bool = False,
        progress: Callable[[IndexProgress], None] | None = None,
    ) -> ReembedReport:
        """Move the alias to another embedding model with no downtime: read every document of the version it
        points at, embed it with ``embedder`` (default: this client's, e.g. a client configured with a new
        model meeting an index built with the old one), write a new version, check the counts, and move the
        alias atomically (``delete_old``: then delete the versions it pointed at).

        Searches go on against the old version until the alias moves. Documents that fail are in
        ``report.failed`` and keep the alias where it was. An interrupted run leaves the alias untouched and
        its version marked as building (``health()`` lists it); the next run **resumes** it (only what is
        missing is embedded), ``restart=True`` starts clean. ``progress`` gets an :class:`IndexProgress` as
        documents are done. After a move to another model than this client's, make a client with that model:
        this one's kNN leg would fail with :class:`ModelMismatch` (its searches stay BM25 only).
        """
        return await self._reembedder.reembed(embedder, delete_old=delete_old, restart=restart, progress=progress)

    # -- search ----------------------------------------------------------------------------------------

    @operation(SearchRequest)
    async def search(self, request: SearchRequest) -> SearchResponse:
        """Search ``query`` with BM25, kNN or both (in parallel), fused in the client, optionally reranked.

        Takes :class:`SearchRequest`'s arguments, or one :class:`SearchRequest`.
        Validation happens before any request: an empty query, an unknown filter field, a bad mode or
        ``offset + limit`` beyond the fusion ``window`` raise :class:`InvalidQuery`.
        In hybrid mode a failed leg degrades the result (``degraded=True``) unless ``strict=True``;
        if every leg fails, :class:`SearchFailed` carries each leg's typed error.

        Two phases: the legs return ids and scores only; after fusion (and rerank) one request fetches the
        documents and highlights of the page, whichever leg found each hit (``highlight=False`` fetches the
        documents only); ``response.fetch_ms`` is its time.
        Zero-result recovery (opt-in, reported in ``response.recovery``): ``recover=True`` retries an empty
        BM25 leg with fuzzy matching; ``scopes`` are wider filter sets tried in order while nothing is found
        (``response.scope_tier`` says which served). ``round_trip`` picks two parallel requests or one
        ``_msearch`` (default: ``settings.round_trip``). ``syntax="boolean"`` parses AND/OR/NOT, "phrases"
        and field prefixes (``ticker:AAPL``, ``type:10-K``, ``date:2024-06``) into safe query DSL
        (:class:`QuerySyntaxError` points at the offending token); plain text is the default.
        ``rerank=True`` (default: ``settings.rerank``) re-scores the first ``rerank_candidates`` fused hits
        with the configured reranker; if it fails, the fused order is returned, ``degraded`` with a
        ``rerank_*`` reason (``strict=True`` raises instead).
        """
        return await self._engine.search(request)

    @operation(SearchRequest)
    async def retrieve(self, request: SearchRequest) -> dict[str, list[LegHit]]:
        """Each leg's ranked list before fusion (ids and raw scores, ``window`` deep), through the same plan,
        filters and tenancy as :meth:`search`: what tuning and evaluation fuse in-process. A failed leg raises
        (as a strict search does)."""
        return await self._engine.leg_lists(request)

    # -- answers -------------------------------------------------------------------------------------

    @operation(AnswerRequest)
    async def answer(self, request: AnswerRequest) -> Answer:
        """Answer ``question`` from the index, citing the documents: one :meth:`search` (same validation,
        filters, tenancy and degraded model; ``limit`` hits, default ``settings.answer_limit``), a context of
        ``ENTRY #id`` blocks within ``max_context_chars`` (default ``settings.answer_context_chars``; also
        within the model's window when it is known), one chat completion, and the citations checked against
        the context (``answer.invented_citations`` are ids the model made up, never sources).

        The whole call ends within ``timeout_s`` (default ``settings.answer_timeout_s``). A chat model that
        is down, slow or answers garbage gives ``answer=None``, the entries, ``degraded=True`` and an
        ``llm_*`` reason; ``strict=True`` raises the typed error instead (and makes the search strict).
        Nothing found: no chat call, ``status="nothing_found"``. Needs a chat model (``llm=`` or
        ``LLM_PROVIDER``): :class:`ConfigurationError` otherwise, before any request.
        """
        return await self._answerer.answer(request)

    @operation(AnswerRequest)
    def answer_stream(self, request: AnswerRequest) -> AsyncIterator[AnswerEvent]:
        """:meth:`answer`, streamed: :class:`AnswerDelta` events with the text as the model writes it, then
        one :class:`AnswerDone` with the whole :class:`Answer` (citations, entries, timings with
        ``first_token_ms``). If the model fails mid-way the last event says so (``answer.answer`` is None):
        replace the text shown. Use ``contextlib.aclosing`` to stop early."""
        return self._answerer.stream(request)

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

    # -- deep paging -----------------------------------------------------------------------------------

    @operation(PageRequest)
    async def search_page(self, request: PageRequest) -> SearchPage:
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

        ``group_by`` (``ticker``, ``source``, ``doc_type`` or ``metadata.<key>``) walks groups in the same
        order: ``page_size`` counts groups, ``page.groups`` lists them, and a group never comes back on a
        later page. A group of the head keeps its first ``per_group`` hits of the fused head; a group found
        below it, its best ``per_group`` BM25 matches (see ``storage._walk_groups``). A hit without the field
        is a group of its own.
        """
        return await self._walker.search_page(request)

    async def close_cursor(self, cursor: str) -> None:
        """End a walk early: close its point-in-time. Idempotent; an expired one is fine."""
        await self._walker.close_cursor(cursor)

    @operation(PageRequest)
    def walk(self, request: PageRequest) -> AsyncIterator[SearchPage]:
        """Every page of a walk (:meth:`search_page` arguments). Use ``contextlib.aclosing`` so that leaving
        the loop early closes the point-in-time at once::

            async with aclosing(client.walk("q", page_size=50)) as pages:
                async for page in pages: ...
        """
        return self._walker.walk(request)


def _closers(
    es: AsyncElasticsearch | None, *providers: Embedder | Reranker | LLM | None
) -> tuple[Callable[[], Awaitable[None]], ...]:
    """How to close ``es`` and the ``providers`` given (None: nothing to close)."""
    return (*((es.close,) if es is not None else ()), *(p.aclose for p in providers if p is not None))
