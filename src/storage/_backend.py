"""The dependencies of a client and the one place every call to them goes through.

:class:`Backend` holds the Elasticsearch client, the embedder, the optional reranker, the settings and one
resilience stack per dependency (:mod:`storage._resilience`). Index management, ingest, the search
pipeline and paging all call out through it, so every request is wrapped, error-mapped and counted the
same way, and an open breaker of one dependency never blocks another. It holds no per-request state.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, Literal, TypeVar

from elasticsearch import AsyncElasticsearch

from embeddings import LLM, ChatMessage, Completion, Embedder, InvalidResponse, ProviderError, Reranker, Vector

from ._errors import AccessDenied, ClientClosed, ConfigurationError, ModelMismatch, ProviderDependency, SearchError
from ._errors_map import map_es_error, map_provider_error
from ._resilience import Resilience, ResiliencePolicy
from ._settings import SearchSettings
from ._tracing import AttrValue, span, tracing
from ._tuning import FusionSetting

__all__ = ["FUSION_RECHECK_S", "Backend", "without_request_spans"]

T = TypeVar("T")

#: How long a client keeps the fusion stored with an index before it looks again (a search after that reads
#: the index's mapping once): a new ``tune --apply`` reaches running clients within this.
FUSION_RECHECK_S = 60.0
#: A lookup of an index's metadata that failed (the search went on without it) is tried again after this:
#: one lookup per few seconds while Elasticsearch struggles, not one per search.
LOOKUP_RETRY_S = 5.0
#: A metadata lookup is one attempt of at most this long (entering a client waits for one, at most this).
METADATA_TIMEOUT_S = 2.0


def without_request_spans(es: AsyncElasticsearch) -> AsyncElasticsearch:
    """``es`` with elasticsearch-py's per-request OpenTelemetry span turned off. Its only switch is an
    environment variable read when a client is made (a process-wide setting, not ours to change), so the
    client's instrumentation object is replaced by a disabled one; an elasticsearch-py without it is left as
    it is (tests/unit/test_tracing_checks.py fails if that object moves)."""
    try:
        from elasticsearch._otel import OpenTelemetry
    except ImportError:  # pragma: no cover - an elasticsearch-py without its OpenTelemetry module
        return es
    if isinstance(getattr(es, "_otel", None), OpenTelemetry):
        es._otel = OpenTelemetry(enabled=False)
    return es


class Backend:
    """Elasticsearch, the embedder and the reranker, each behind its own resilience stack."""

    def __init__(
        self,
        es: AsyncElasticsearch,
        embedder: Embedder,
        settings: SearchSettings,
        *,
        reranker: Reranker | None = None,
        es_policy: ResiliencePolicy | None = None,
        embeddings_policy: ResiliencePolicy | None = None,
        reranker_policy: ResiliencePolicy | None = None,
        llm: LLM | None = None,
        llm_policy: ResiliencePolicy | None = None,
    ) -> None:
        self.es = es
        self.embedder = embedder
        self.reranker = reranker
        self.llm = llm
        self.settings = settings
        self.closed = False
        self.es_resilience = Resilience("elasticsearch", es_policy or settings.es_policy())
        self.embed_resilience = Resilience("embeddings", embeddings_policy or settings.embeddings_policy())
        self.rerank_resilience = Resilience("reranker", reranker_policy or settings.reranker_policy())
        self.llm_resilience = Resilience("llm", llm_policy or settings.llm_policy())
        #: Concrete index -> the embedding model its vectors come from (its ``_meta``; None: not recorded, or
        #: not readable with these credentials). A concrete index's model never changes: kept for the
        #: client's life, so a search checks its kNN leg's index with a dict lookup.
        self.index_models: dict[str, str | None] = {}
        #: Search target -> (when to look again, the fusion setting stored with it or None): what a search
        #: uses for the parameters neither the call nor the settings fix (``storage._tuning``).
        self.stored_fusions: dict[str, tuple[float, FusionSetting | None]] = {}
        self._refreshing: dict[str, asyncio.Task[FusionSetting | None]] = {}

    @property
    def resilience(self) -> dict[str, Resilience]:
        stacks = {"elasticsearch": self.es_resilience, "embeddings": self.embed_resilience}
        if self.reranker is not None:
            stacks["reranker"] = self.rerank_resilience
        if self.llm is not None:
            stacks["llm"] = self.llm_resilience
        return stacks

    def close(self) -> None:
        """Mark closed and wake every call sleeping in a backoff (they end with ClientClosed); stop any
        background lookup."""
        self.closed = True
        for stack in (self.es_resilience, self.embed_resilience, self.rerank_resilience, self.llm_resilience):
            stack.close()
        for task in list(self._refreshing.values()):
            task.cancel()

    def check_open(self) -> None:
        if self.closed:
            raise ClientClosed("the SearchClient is closed")

    @functools.cached_property
    def _leg_clients(self) -> tuple[AsyncElasticsearch, AsyncElasticsearch]:
        """The legs' and the fetch's client, made once (``options()`` builds a whole client, forty namespaced
        sub-clients, per call: 0.7 ms per request when done per leg), twice: as is, and without
        elasticsearch-py's own request span. Their request timeout is the leg budget, but never above
        ``request_timeout_s``: the transport must time out before the attempt timeout (``request_timeout_s``
        + 0.5 s) cancels it, so that it marks the node dead and fails over."""
        timeout = min(self.settings.leg_timeout_s, self.settings.request_timeout_s)
        return self.es.options(request_timeout=timeout), without_request_spans(self.es.options(request_timeout=timeout))

    @property
    def leg_es(self) -> AsyncElasticsearch:
        """The client for a search's requests (legs, fetch, deep paging). elasticsearch-py opens an
        OpenTelemetry span per request whenever the API is importable, a tracer provider set or not (about
        6 µs each, three per search, for a span that records nothing): the search's requests open it only
        when one is set (:func:`~storage._tracing.tracing`), so that they still nest under the legs then."""
        traced, quiet = self._leg_clients
        return traced if tracing() else quiet

    # -- Elasticsearch ---------------------------------------------------------------------------------

    async def es_call(
        self,
        op: Callable[[], Awaitable[T]],
        *,
        deadline_s: float | None = None,
        attempt_timeout_s: float | None = None,
        within: asyncio.Timeout | None = None,
    ) -> T:
        """Every Elasticsearch request goes through here: error mapping inside the resilience stack
        (``within``: the caller's timeout scope, see :meth:`Resilience.call`)."""
        self.check_open()

        async def attempt() -> T:
            try:
                return await op()
            except SearchError:
                raise
            except Exception as exc:
                raise map_es_error(exc) from exc

        return await self.es_resilience.call(
            attempt, deadline_s=deadline_s, attempt_timeout_s=attempt_timeout_s, within=within
        )

    @functools.cached_property
    def _metadata_es(self) -> AsyncElasticsearch:
        """The client for the metadata a search can do without (made once): a short timeout, no retry."""
        return without_request_spans(self.es.options(request_timeout=METADATA_TIMEOUT_S, max_retries=0))

    async def _mappings(self, target: str) -> tuple[dict[str, Any] | None, bool]:
        """``GET <target>/_mapping`` outside the resilience stack: one attempt, :data:`METADATA_TIMEOUT_S`,
        no breaker counting (a search never depends on it, and a struggling cluster must not see more retries
        for it). Returns (the answer or None, whether a failure is lasting: no privilege, no such index)."""
        self.check_open()
        try:
            resp = await self._metadata_es.options(ignore_status=404).indices.get_mapping(index=target)
        except Exception as exc:
            return None, isinstance(map_es_error(exc), AccessDenied)
        if resp.meta.status != 200 or not isinstance(resp.body, dict):
            return None, resp.meta.status == 404
        return dict(resp.body), False

    async def index_model(self, index: str) -> str | None:
        """The embedding model recorded in ``index``'s ``_meta`` (looked up once, then cached). A lookup that
        fails skips the check, never the search: for good without the privilege to read it
        (``view_index_metadata``); otherwise the next search after :data:`LOOKUP_RETRY_S` tries again."""
        found, lasting = await self._mappings(index)
        if found is None and not lasting:
            self.index_models[index] = None
            asyncio.get_running_loop().call_later(LOOKUP_RETRY_S, self.index_models.pop, index, None)
            return None
        embedding = _meta_of(found or {}, index).get("embedding")
        recorded = embedding.get("model_id") if isinstance(embedding, dict) else None
        model = str(recorded) if recorded is not None else None
        self.index_models[index] = model
        return model

    async def stored_fusion(self, target: str) -> FusionSetting | None:
        """Read the fusion setting stored with ``target``'s index (``_meta.fusion``, written by ``tune
        --apply``) now, and keep it for :data:`FUSION_RECHECK_S` (:meth:`cached_fusion` serves it; a failed
        lookup keeps the last value for :data:`LOOKUP_RETRY_S`). None when there is none."""
        cached = self.stored_fusions.get(target)
        found, lasting = await self._mappings(target)
        if found is None and not lasting:
            stale = cached[1] if cached is not None else None
            self.stored_fusions[target] = (time.monotonic() + LOOKUP_RETRY_S, stale)
            return stale
        setting = stored_setting(found or {})
        self.stored_fusions[target] = (time.monotonic() + FUSION_RECHECK_S, setting)
        return setting

    async def fusion_for(self, target: str) -> FusionSetting | None:
        """The fusion stored with ``target``, as a search uses it: a dict lookup. Read (and waited for) once,
        when a client first searches a target it has not read it for (entering the client and
        ``ensure_index()`` read the alias's); then refreshed in the background once a minute."""
        cached = self.stored_fusions.get(target)
        if cached is None:
            return await self.stored_fusion(target)
        if cached[0] <= time.monotonic():
            self.refresh_fusion(target)
        return cached[1]

    def remember_fusion(self, target: str, mappings: dict[str, Any]) -> None:
        """Keep the fusion stored in ``mappings`` (a get-index or get-mapping answer the caller has anyway)."""
        self.stored_fusions[target] = (time.monotonic() + FUSION_RECHECK_S, stored_setting(mappings))

    def refresh_fusion(self, target: str) -> None:
        """Look the stored fusion up again in the background (a search never waits for it); one at a time per
        target, cancelled when the client closes."""
        if target in self._refreshing or self.closed:
            return
        task = asyncio.get_running_loop().create_task(self.stored_fusion(target), name="storage-fusion-refresh")
        self._refreshing[target] = task
        task.add_done_callback(lambda done: self._lookup_done(target, done))

    def _lookup_done(self, target: str, task: asyncio.Task[FusionSetting | None]) -> None:
        self._refreshing.pop(target, None)
        if not task.cancelled():
            task.exception()  # retrieved: a client closing under a lookup is nothing to report

    def check_vectors(self, index: str, model: str | None) -> None:
        """The kNN leg's index holds vectors of another model than the query's: its hits would be noise."""
        if model is not None and model != self.embedder.model_id:
            raise ModelMismatch(
                f"the kNN leg searched {index}, built with {model!r}, with a query embedded by "
                f"{self.embedder.model_id!r}: its hits are left out. Configure {model!r} (EMBEDDINGS_MODEL), or "
                "move the index to this model with `hybrid-search reembed` / `client.reembed()`."
            )

    # -- the embedder ----------------------------------------------------------------------------------

    async def embed_call(
        self,
        op: Callable[[], Awaitable[T]],
        *,
        kind: Literal["query", "documents"],
        count: int,
        deadline_s: float | None = None,
        attempt_timeout_s: float | None = None,
        within: asyncio.Timeout | None = None,
    ) -> T:
        """Every embedding call goes through here: its own stack, so one breaker never blocks the other."""
        attrs: dict[str, AttrValue] = {
            "embeddings.kind": kind,
            "embeddings.count": count,
            "embeddings.model": self.embedder.model_id,
        }
        return await self._provider_call(
            "embeddings",
            op,
            "hybrid_search.embed",
            attrs,
            deadline_s=deadline_s,
            attempt_timeout_s=attempt_timeout_s,
            within=within,
        )

    async def embed_documents(
        self, texts: Sequence[str], *, embedder: Embedder | None = None, stack: Resilience | None = None
    ) -> list[Vector]:
        """Documents' vectors: the client's embedder through its stack, or (a re-embedding into a new index
        version) another ``embedder`` through a ``stack`` of its own, so that its failures never open the
        breaker the client's searches embed through."""
        emb = embedder or self.embedder
        # A batch of documents may legitimately take longer than one query: half a second per text on top.
        budget = self.settings.embeddings_timeout_s + 0.5 * len(texts)
        attrs: dict[str, AttrValue] = {
            "embeddings.kind": "documents",
            "embeddings.count": len(texts),
            "embeddings.model": emb.model_id,
        }
        return await self._provider_call(
            "embeddings",
            lambda: emb.embed_documents(texts),
            "hybrid_search.embed",
            attrs,
            deadline_s=budget * 2,
            attempt_timeout_s=budget,
            stack=stack,
        )

    async def embed_query(
        self, text: str, *, deadline_s: float | None = None, within: asyncio.Timeout | None = None
    ) -> Vector:
        return await self.embed_call(
            lambda: self.embedder.embed_query(text), kind="query", count=1, deadline_s=deadline_s, within=within
        )

    async def probe_embedder(self) -> None:
        """At start-up: a wrong model or dimension is a ConfigurationError, not a failure at the first use."""
        try:
            await self.embedder.probe()
        except ProviderError as exc:
            raise map_provider_error(exc, "embeddings") from exc

    # -- the reranker ----------------------------------------------------------------------------------

    async def rerank(self, query: str, documents: Sequence[str], *, budget_s: float) -> list[float]:
        """One relevance score per document (input order), through the reranker's own stack."""
        reranker = self.reranker
        if reranker is None:
            raise ConfigurationError("no reranker configured: pass reranker= or set RERANKER_PROVIDER")
        attrs: dict[str, AttrValue] = {"rerank.count": len(documents), "rerank.model": reranker.model_id}
        return await self._provider_call(
            "reranker",
            lambda: reranker.rerank(query, documents),
            "hybrid_search.rerank",
            attrs,
            deadline_s=budget_s,
            attempt_timeout_s=budget_s,
        )

    # -- the chat model --------------------------------------------------------------------------------

    def require_llm(self) -> LLM:
        if self.llm is None:
            raise ConfigurationError(
                "no chat model configured: pass llm= to SearchClient, or set LLM_PROVIDER=openai and LLM_MODEL "
                "(LLM_BASE_URL for an OpenAI-compatible server; `python -m embeddings.local_llm start` runs one)"
            )
        return self.llm

    async def chat(self, messages: Sequence[ChatMessage], *, budget_s: float) -> Completion:
        """One chat completion through the chat model's own stack (retries of transient errors included)."""
        llm = self.require_llm()
        return await self._provider_call(
            "llm",
            lambda: llm.complete(messages),
            "hybrid_search.llm",
            {"llm.model": llm.model_id, "llm.messages": len(messages)},
            deadline_s=budget_s,
            attempt_timeout_s=budget_s,
        )

    async def open_chat_stream(
        self, messages: Sequence[ChatMessage], *, budget_s: float
    ) -> tuple[str | Completion, AsyncGenerator[str | Completion, None]]:
        """Start a streamed answer through the chat model's stack: retried (like :meth:`chat`) until its
        first event arrives, since nothing has been shown yet. Returns that event and the rest of the
        stream; errors after it are mapped but neither retried nor counted by the breaker (the caller has
        shown text by then)."""
        llm = self.require_llm()

        async def first() -> tuple[str | Completion, AsyncIterator[str | Completion]]:
            stream = llm.stream(messages)
            try:
                head = await anext(stream)
            except StopAsyncIteration:
                raise InvalidResponse("chat stream ended before its first event") from None
            except BaseException:
                await _close(stream)
                raise
            return head, stream

        head, stream = await self._provider_call(
            "llm",
            first,
            "hybrid_search.llm",
            {"llm.model": llm.model_id, "llm.messages": len(messages), "llm.stream": True},
            deadline_s=budget_s,
            attempt_timeout_s=budget_s,
        )
        return head, _mapped(stream)

    async def _provider_call(
        self,
        dependency: ProviderDependency,
        op: Callable[[], Awaitable[T]],
        span_name: str,
        attrs: dict[str, AttrValue],
        *,
        deadline_s: float | None,
        attempt_timeout_s: float | None,
        within: asyncio.Timeout | None = None,
        stack: Resilience | None = None,
    ) -> T:
        """A model provider's call: its errors mapped onto ours, inside its own stack (or ``stack``) and span."""
        self.check_open()

        async def attempt() -> T:
            try:
                return await op()
            except ProviderError as exc:
                raise map_provider_error(exc, dependency) from exc

        if stack is None:
            stacks = {"embeddings": self.embed_resilience, "reranker": self.rerank_resilience}
            stack = stacks.get(dependency, self.llm_resilience)
        with span(span_name, attrs):
            return await stack.call(attempt, deadline_s=deadline_s, attempt_timeout_s=attempt_timeout_s, within=within)


def stored_setting(mappings: dict[str, Any]) -> FusionSetting | None:
    """The fusion setting stored in a get-mapping (or get-index) answer: the newest version's that is valid."""
    for name in sorted(mappings, reverse=True):
        meta = _meta_of(mappings, name).get("fusion")
        if isinstance(meta, dict):
            try:
                return FusionSetting.from_meta(meta)
            except (TypeError, ValueError):
                continue
    return None


def _meta_of(mappings: Any, index: str) -> dict[str, Any]:
    """``index``'s ``_meta`` in a get-mapping answer (the first index's when ``index`` is not a key: an
    alias), or {} for anything else (a proxy's page, a stub's answer)."""
    if not isinstance(mappings, dict) or not mappings:
        return {}
    found = mappings.get(index, next(iter(mappings.values())))
    mapping = found.get("mappings") if isinstance(found, dict) else None
    meta = mapping.get("_meta") if isinstance(mapping, dict) else None
    return meta if isinstance(meta, dict) else {}


async def _close(stream: AsyncIterator[object]) -> None:
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()


async def _mapped(stream: AsyncIterator[str | Completion]) -> AsyncGenerator[str | Completion, None]:
    """The rest of a chat stream, its provider errors mapped onto ours."""
    try:
        async for item in stream:
            yield item
    except ProviderError as exc:
        raise map_provider_error(exc, "llm") from exc
    finally:
        await _close(stream)
