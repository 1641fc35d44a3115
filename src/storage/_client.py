"""``SearchClient``: the front door. Construction, lifecycle and wiring; the work is done by

- :mod:`storage._search` — every read path's entry points (plan, retrieve, fuse, fetch) and a search;
- :mod:`storage._paging` — deep paging on a point-in-time, on the engine;
- :mod:`storage._rag` — answers with citations: a search, a budgeted context, the chat model;
- :mod:`storage._indexing` — the alias and its versioned indices, ingest, a model change with no downtime;
- :mod:`storage._transport` — every call to Elasticsearch and the model providers, through its resilience stack;
- :mod:`storage._admin` — the ``indices`` and ``documents`` namespaces.

Every method spells its parameters out (keyword-only after the first), so that ``help()``, IDEs, mypy,
``inspect`` and ``unittest.mock.create_autospec`` see them; each builds its operation's request value object
(``storage.types``: ``SearchRequest``...), which the services take. The client holds no per-request state:
concurrent calls share nothing but the dependencies.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, Literal, Self, TypeVar

from elasticsearch import AsyncElasticsearch

from embeddings import LLM, Embedder, ProviderConfigError, Reranker, create_embedder, create_llm, create_reranker

from ._admin import Documents, Indices
from ._dsl.aggregations import FacetSpec
from ._dsl.filters import FilterInput
from ._errors import ConfigurationError, Dependency, InvalidQuery
from ._fusion.methods import FusionMethod, LegHit
from ._indexing.health import breakers, health
from ._indexing.indices import IndexManager
from ._indexing.ingest import Ingester
from ._indexing.reembed import Reembedder
from ._observability.telemetry import DEFAULT_DATA_STREAM, TelemetryObserver, TelemetrySink
from ._paging.walk import Walker
from ._rag.answerer import Answerer
from ._search import Engine
from ._settings import SearchSettings
from ._transport.backend import Backend
from ._transport.connect import elasticsearch_client
from ._transport.resilience import ResiliencePolicy
from ._types.answers import Answer, AnswerEvent
from ._types.models import Document, IndexReport, SearchMode
from ._types.prompt import AnswerPrompt
from ._types.requests import (
    AnswerRequest,
    IngestRequest,
    PageRequest,
    ProgressCallback,
    QuerySyntax,
    RoundTrip,
    SearchRequest,
)
from ._types.results import SearchPage, SearchResponse
from ._types.status import BreakerStatus, Health

__all__ = ["SearchClient"]

R = TypeVar("R")


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
        reranker: Reranker | None = None,
        llm: LLM | None = None,
        policies: Mapping[Dependency, ResiliencePolicy] | None = None,
    ) -> None:
        """``es`` and the providers, as given (``owns_clients``: closed with this client); ``policies``: a
        dependency's resilience stack (``elasticsearch``, ``embeddings``, ``reranker``, ``llm``) other than the
        settings make."""
        self._es = es
        self._settings = settings if settings is not None else SearchSettings()
        #: What :meth:`aclose` closes: with ``owns_clients`` (``from_settings`` sets it), ``es`` and the providers;
        #: else nothing — a client or provider the caller made and passed to the constructor is the caller's.
        self._closers: tuple[Callable[[], Awaitable[None]], ...] = (
            _closers(es, embedder, reranker, llm) if owns_clients else ()
        )
        self._backend = Backend(es, embedder, self._settings, reranker=reranker, llm=llm, policies=policies)
        self._engine = Engine(self._backend)
        self._indices = IndexManager(self._backend)
        self._ingester = Ingester(self._backend, self._indices)
        self._walker = Walker(self._backend, self._engine)
        self._answerer = Answerer(self._backend, self._engine)
        reembedder = Reembedder(self._backend, self._indices, self._ingester)
        self._indices_ns = Indices(self._indices, self._engine, reembedder)
        self._documents_ns = Documents(self._indices, self._engine)
        self._telemetry: tuple[TelemetrySink, TelemetryObserver] | None = None

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
        es = elasticsearch_client(s)
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
        ``kibana/``): asynchronous and bounded, with its own breaker, so a slow or failing sink never slows or
        fails a search (``storage._observability.telemetry``). ``options`` go to :class:`TelemetrySink`.
        Stopped (and flushed) by :meth:`aclose`."""
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
        await _close_all(self._closers)

    @property
    def closed(self) -> bool:
        return self._backend.closed

    @property
    def entered_loop(self) -> asyncio.AbstractEventLoop | None:
        """The event loop the client lives on (its connections'): the first it was entered or used on; None
        before any use. Another loop's call is :class:`WrongEventLoop` (``storage.integrations`` hand it over)."""
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
    def breakers(self) -> dict[str, BreakerStatus]:
        """Each dependency's circuit breaker now (``elasticsearch``, ``embeddings``, and ``reranker`` / ``llm``
        when configured): its state and counters, read-only."""
        return breakers(self._backend.resilience)

    @property
    def index(self) -> str:
        """The alias searched and written."""
        return self._settings.index

    @property
    def indices(self) -> Indices:
        """The alias's versioned indices: ``reembed()``, ``create_version()``, ``promote()``, ``delete()``,
        ``refresh()``, the stored fusion (:class:`~storage._admin.Indices`)."""
        return self._indices_ns

    @property
    def documents(self) -> Documents:
        """Documents by id and by filter: ``get()``, ``get_many()``, ``count()``, ``exist()``, ``matching_ids()``,
        ``delete()`` (:class:`~storage._admin.Documents`)."""
        return self._documents_ns

    async def ensure_index(self) -> str:
        """Create the alias and its first versioned index if missing; check an existing one fits.

        Idempotent and safe to call concurrently. Returns the concrete (write) index. Raises
        :class:`IndexMismatch` (:class:`DimensionMismatch`, :class:`ModelMismatch`...) if the index was built
        otherwise than this client reads it: ``client.indices.reembed()`` moves it.
        """
        return await self._indices.ensure_index()

    async def health(self) -> Health:
        """Cluster status, server version, license, the index's stats and this client's breaker states."""
        return await health(self._indices)

    async def index_documents(
        self,
        documents: Iterable[Document | Mapping[str, Any]],
        *,
        refresh: bool = False,
        progress: ProgressCallback | None = None,
        index: str | None = None,
        tenant_id: str | None = None,
        on_invalid: Literal["report", "raise"] = "report",
        overwrite: bool = True,
        bulk_load: bool | None = None,
    ) -> IndexReport:
        """Embed and bulk-index ``documents`` (``Document`` objects or mappings of its fields; any iterable, read as
        it is written, with flat memory). Every unique id read ends up in exactly one of ``report.indexed`` /
        ``report.failed`` (never indexed without its vectors); an input that raises part-way ends it with
        :class:`IngestInterrupted`, whose ``.report`` accounts for every document read. An invalid document (neither
        title nor text, a bad field, another tenant's) is failed with reason ``invalid_document`` and its ``position``;
        ``on_invalid="raise"`` raises :class:`InvalidDocument` for the first one and sends nothing (so it reads the
        whole input first). ``refresh``: searchable on return; ``index``: another index or alias this library made (a
        version from ``indices.create_version()``); ``tenant_id``: stamp every document (one of another tenant is
        refused); ``overwrite=False``: only ids the index does not hold (Elasticsearch's ``create``, atomic; the others
        fail with reason ``exists``); ``progress``: an :class:`IndexProgress` as it goes; ``bulk_load``: refresh off
        while writing, then restored (True, then merged; by default for an index never written to, merged from 10,000
        documents; False: never).
        """
        return await self._ingester.index_documents(_request(IngestRequest, locals()))

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
        similarities: bool = False,
        query_vector: Sequence[float] | None = None,
        strict: bool = False,
        highlight: bool = True,
        index: str | None = None,
        recover: bool = False,
        scopes: Sequence[FilterInput] | None = None,
        round_trip: RoundTrip | None = None,
        syntax: QuerySyntax = "plain",
        rerank: bool | None = None,
        rerank_candidates: int | None = None,
        facets: Sequence[str | FacetSpec] | None = None,
        group_by: str | None = None,
        per_group: int = 1,
        diversity: float = 0.0,
    ) -> SearchResponse:
        """Search ``query`` with BM25, kNN or both (``mode``: ``hybrid``, ``bm25``, ``knn``; the legs in
        parallel), fused in the client, optionally reranked.

        - ``filters``: one filter model for both legs (``{"ticker": "AAPL", "published_at": {"gte": ...}}``, or
          :mod:`storage.filters` objects); ``tenant_id``: the results' tenant (a multi-tenant client needs it).
        - ``limit`` hits from ``offset`` of the fused list, which holds each leg's ``window`` best candidates
          (``offset + limit`` must fit inside it; ``num_candidates``: kNN's HNSW breadth; ``similarity``: the
          kNN leg's floor, Elasticsearch's raw similarity).
        - ``hit.similarity`` (in [0, 1]: what to threshold on) is the kNN leg's score; ``similarities=True``
          also measures it for shown hits the leg missed (one more kNN request, restricted to them).
          ``query_vector`` (made with the client's model): searched instead of the embedded text.
        - ``fusion`` (``rrf``, ``linear_minmax``, ``linear_zscore``, ``dbsf``), ``rrf_k`` and ``weights``
          (``{"bm25": 1, "knn": 2}``): default the setting in force (the call's, else the settings', else the
          one stored with the index, else the defaults; ``response.fusion_sources`` says which).
        - ``strict``: a failed leg (or unanswered shards) raises instead of degrading the result (all failed:
          :class:`SearchFailed`, with each leg's typed error).
        - ``highlight``: the page's fragments (one fetch after fusion); ``index``: other index or alias names.
        - Zero-result recovery (reported in ``response.recovery``): ``recover`` retries an empty BM25 leg with
          fuzzy matching; ``scopes`` are wider filter sets tried in order while nothing is found.
        - ``round_trip``: two parallel requests or one ``_msearch``; ``syntax="boolean"`` parses AND/OR/NOT,
          "phrases" and field prefixes (``ticker:AAPL``) into safe query DSL (:class:`QuerySyntaxError`).
        - ``rerank`` (default ``settings.rerank``) re-scores the first ``rerank_candidates`` fused hits with the
          reranker; if it fails, the fused order is returned, degraded (``strict`` raises instead).
        - ``facets`` (``"ticker"``, ``"published_at:month"``, ``"metadata.region"`` or :class:`FacetSpec`):
          counts over what the query matched; ``group_by`` / ``per_group``: the best hits of each value of a
          field (``limit`` then counts groups); ``diversity`` (0 to 1): maximal marginal relevance over the
          window, so that near-duplicates do not fill a page.

        Validation happens before any request (:class:`InvalidQuery`).
        """
        return await self._engine.search(_request(SearchRequest, locals()))

    async def leg_rankings(
        self,
        query: str,
        *,
        mode: SearchMode = "hybrid",
        filters: FilterInput = None,
        tenant_id: str | None = None,
        window: int | None = None,
        num_candidates: int | None = None,
        index: str | None = None,
        syntax: QuerySyntax = "plain",
    ) -> dict[str, list[LegHit]]:
        """Each leg's ranked list before fusion (ids and raw scores, ``window`` deep), through the same plan,
        filters and tenancy as :meth:`search`: what tuning and evaluation fuse in-process. A failed leg
        raises (as a strict search does)."""
        # (the lists are ``window`` deep: no page is cut from them, so a page's limit plays no part)
        request = _request(SearchRequest, {**locals(), "strict": True, "highlight": False, "limit": 1})
        return await self._engine.leg_lists(request)

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
        """The seed systems' call shape (positional, as they call it), delegating to :meth:`search`."""
        merged: FilterInput = filters
        if ticker is not None:
            if filters is not None and not isinstance(filters, Mapping):
                raise InvalidQuery("pass ticker inside filters when filters is a list of Filter objects")
            merged = {**(filters or {}), "ticker": ticker}
        index = (indices if isinstance(indices, str) or indices is None else ",".join(indices)) or None  # ([], "")
        return await self.search(query, mode=search_type, filters=merged, limit=limit, index=index, tenant_id=tenant_id)

    async def answer(
        self,
        question: str,
        *,
        mode: SearchMode = "hybrid",
        filters: FilterInput = None,
        tenant_id: str | None = None,
        limit: int | None = None,
        rerank: bool | None = None,
        max_context_chars: int | None = None,
        timeout_s: float | None = None,
        strict: bool = False,
        index: str | None = None,
        prompt: AnswerPrompt | None = None,
        diversity: float = 0.0,
    ) -> Answer:
        """Answer ``question`` from the index, citing the documents: one :meth:`search` (same validation,
        filters, tenancy and degraded model; ``limit`` hits, default ``settings.answer_limit``), a context of
        ``ENTRY #id`` blocks within ``max_context_chars`` (default ``settings.answer_context_chars``; also
        within the model's window when it is known; ``diversity`` as in :meth:`search`), one chat completion
        (``prompt``: another :class:`AnswerPrompt`), and the citations checked against the context
        (``answer.invented_citations`` are ids the model made up, never sources).

        The whole call ends within ``timeout_s`` (default ``settings.answer_timeout_s``). A chat model down, slow
        or answering garbage gives ``answer=None``, the entries, ``degraded`` and an ``llm_*`` reason
        (``strict=True`` raises instead, and makes the search strict). Nothing found: no chat call. Needs a chat
        model (``llm=`` or ``LLM_PROVIDER``): :class:`ConfigurationError` otherwise, before any request."""
        return await self._answerer.answer(_request(AnswerRequest, locals()))

    def answer_stream(
        self,
        question: str,
        *,
        mode: SearchMode = "hybrid",
        filters: FilterInput = None,
        tenant_id: str | None = None,
        limit: int | None = None,
        rerank: bool | None = None,
        max_context_chars: int | None = None,
        timeout_s: float | None = None,
        strict: bool = False,
        index: str | None = None,
        prompt: AnswerPrompt | None = None,
        diversity: float = 0.0,
    ) -> AsyncIterator[AnswerEvent]:
        """:meth:`answer`, streamed: :class:`AnswerDelta` events with the text as the model writes it, then one
        :class:`AnswerDone` with the whole :class:`Answer` (citations, entries, timings with
        ``first_token_ms``). If the model fails mid-way the last event says so (``answer.answer`` is None):
        replace the text shown. Use ``contextlib.aclosing`` to stop early."""
        return self._answerer.stream(_request(AnswerRequest, locals()))

    async def search_page(
        self,
        query: str,
        *,
        cursor: str | None = None,
        mode: SearchMode = "hybrid",
        filters: FilterInput = None,
        tenant_id: str | None = None,
        limit: int = 10,
        window: int | None = None,
        fusion: FusionMethod | None = None,
        rrf_k: int | None = None,
        weights: Mapping[str, float] | None = None,
        highlight: bool = True,
        index: str | None = None,
        syntax: QuerySyntax = "plain",
        group_by: str | None = None,
        per_group: int = 1,
    ) -> SearchPage:
        """One page of ``limit`` hits of a stable walk through the fused results, past any fusion window.

        ``cursor=None`` opens a point-in-time; pass ``page.next_cursor`` back, with the same arguments, for the
        next page (None: the walk is over, its point-in-time closed; :meth:`close_cursor` ends one early). The
        order (``storage._paging.cursor``): the fusion of each leg's top ``window`` (default
        ``settings.walk_window``), then the remaining BM25 matches; every document once, writes made meanwhile
        neither appear nor shift pages. Strict: a failed leg raises (retry the same cursor); an expired
        point-in-time (``settings.pit_keep_alive`` between pages) is :class:`CursorExpired`. ``group_by``
        walks groups (``limit`` counts them; a group never comes back later; ``per_group`` hits each).
        """
        return await self._walker.search_page(_request(PageRequest, locals()))

    async def close_cursor(self, cursor: str) -> None:
        """End a walk early: close its point-in-time. Idempotent; an expired one is fine."""
        await self._walker.close_cursor(cursor)

    def walk(
        self,
        query: str,
        *,
        mode: SearchMode = "hybrid",
        filters: FilterInput = None,
        tenant_id: str | None = None,
        limit: int = 10,
        window: int | None = None,
        fusion: FusionMethod | None = None,
        rrf_k: int | None = None,
        weights: Mapping[str, float] | None = None,
        highlight: bool = True,
        index: str | None = None,
        syntax: QuerySyntax = "plain",
        group_by: str | None = None,
        per_group: int = 1,
    ) -> AsyncIterator[SearchPage]:
        """Every page of a walk (:meth:`search_page`'s arguments). Use ``contextlib.aclosing`` so that leaving
        the loop early closes the point-in-time at once::

            async with aclosing(client.walk("q", limit=50)) as pages:
                async for page in pages: ...
        """
        return self._walker.walk(_request(PageRequest, locals()))


def _request(kind: Callable[..., R], arguments: dict[str, Any]) -> R:
    """A request value object from a method's parameters (``locals()`` at its start; ``self`` left out): the
    method's keywords are its request type's fields (``tests/unit/test_public_api.py`` pins that)."""
    return kind(**{name: value for name, value in arguments.items() if name != "self"})


async def _close_all(closers: Sequence[Callable[[], Awaitable[None]]]) -> None:
    """Call every closer, whatever the others do; then raise the first failure, if any."""
    failures: list[Exception] = []
    for close in closers:
        try:
            await close()
        except Exception as exc:
            failures.append(exc)
    if failures:
        raise failures[0]


def _closers(
    es: AsyncElasticsearch | None, *providers: Embedder | Reranker | LLM | None
) -> tuple[Callable[[], Awaitable[None]], ...]:
    """How to close ``es`` and the ``providers`` given (None: nothing to close)."""
    return (*((es.close,) if es is not None else ()), *(p.aclose for p in providers if p is not None))
