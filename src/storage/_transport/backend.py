"""The dependencies of a client and the one place every call to them goes through.

:class:`Backend` holds the Elasticsearch client, the embedder, the optional reranker and chat model, the
settings, one resilience stack per dependency (:mod:`storage._transport.resilience`), the client's events (its
observers: telemetry) and what it knows of the indices' metadata (:mod:`storage._transport.targets`). Index
management, ingest, the engine and the services all call out through it, so every request is wrapped,
error-mapped and counted the same way, and an open breaker of one dependency never blocks another. It holds
no per-request state.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, TypeVar

from elasticsearch import AsyncElasticsearch

from embeddings import (
    LLM,
    ChatMessage,
    Completion,
    Embedder,
    InvalidResponse,
    ProviderError,
    Reranker,
    Vector,
    Windowed,
)

from .._dsl.queries import server_side
from .._errors import (
    ClientClosed,
    ConfigurationError,
    Dependency,
    ModelMismatch,
    ProviderDependency,
    SearchError,
    WrongEventLoop,
)
from .._observability.log import Events
from .._observability.tracing import AttrValue, span, tracing, without_request_spans
from .._settings import SearchSettings
from ..passages import PassageSetting
from .resilience import Resilience, ResiliencePolicy
from .targets import IndexMetadata
from .translate import map_es_error, map_provider_error

__all__ = ["Backend"]

T = TypeVar("T")


class Backend:
    """Elasticsearch, the embedder and the reranker, each behind its own resilience stack."""

    def __init__(
        self,
        es: AsyncElasticsearch,
        embedder: Embedder,
        settings: SearchSettings,
        *,
        reranker: Reranker | None = None,
        llm: LLM | None = None,
        policies: Mapping[Dependency, ResiliencePolicy] | None = None,
    ) -> None:
        self.es = es
        self.embedder = embedder
        self.reranker = reranker
        self.llm = llm
        self.settings = settings
        self.closed = False
        #: The event loop the client lives on: the first one it was used (or entered) on.
        self.loop: asyncio.AbstractEventLoop | None = None
        #: This client's events: the logger, and its own observers (its telemetry sink).
        self.events = Events()
        given = policies or {}
        self.es_resilience = Resilience(
            "elasticsearch", given.get("elasticsearch") or settings.es_policy(), events=self.events
        )
        self.embed_resilience = self.embeddings_stack(given.get("embeddings"))
        self.rerank_resilience = Resilience(
            "reranker", given.get("reranker") or settings.reranker_policy(), events=self.events
        )
        self.llm_resilience = Resilience("llm", given.get("llm") or settings.llm_policy(), events=self.events)
        #: The node URLs the client talks to, for the messages of errors about reaching them.
        self.where = ", ".join(str(n.base_url) for n in es.transport.node_pool.all()) or None
        self.metadata = IndexMetadata(es, self.check_open, assume_passages=self.writes_passages)
        #: Held while this client changes an index's ``_meta`` (``_indexing/meta.py``): one change at a time.
        self.meta_writes = asyncio.Lock()

    def passage_setting(self, embedder: Embedder | None = None) -> PassageSetting | None:
        """How a new index for ``embedder`` (default the client's) cuts long documents: the settings', when the
        model reads a window (an embedder that reads any length needs no passages)."""
        emb = embedder or self.embedder
        window = emb.window_tokens if isinstance(emb, Windowed) else None
        return self.settings.passage_setting() if window is not None else None

    @property
    def writes_passages(self) -> bool:
        return self.passage_setting() is not None

    def embeddings_stack(self, policy: ResiliencePolicy | None = None) -> Resilience:
        """A resilience stack for an embedder (the client's; or another model's during a reembed, whose
        failures must never open the breaker the client's searches embed through)."""
        return Resilience("embeddings", policy or self.settings.embeddings_policy(), events=self.events)

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
        self.metadata.close()

    def check_open(self) -> None:
        """Every operation's first step (inside the caller's loop): the client is open, and it is called on
        the event loop it lives on (the first it was used on: its connections belong to it). A call from
        another loop is the caller's mistake, refused here before anything is sent, so it can never reach
        (and open) a breaker."""
        if self.closed:
            raise ClientClosed("the SearchClient is closed")
        running = asyncio.get_running_loop()
        if running is not self.loop:
            if self.loop is None:
                self.loop = running
                return
            state = "has ended" if self.loop.is_closed() else "is another one"
            raise WrongEventLoop(
                "this SearchClient lives on the event loop it was first used on, which "
                f"{state}: its connections belong to that loop. Use one client per event loop (create it inside "
                "the loop, e.g. `async with SearchClient.from_settings(...)` in the coroutine asyncio.run() "
                "runs), or give it to the framework retrievers, which hand every call to its loop from any "
                "thread or loop"
            )

    def request_timeout(self, budget_s: float) -> float:
        """The transport timeout of a request that may take ``budget_s``: all of it on a single node, **half**
        of it when the transport has another node to fail over to (several hosts, or sniffing). A node that
        stops answering (a long GC pause, a half-open connection) then times out with half the budget left:
        the transport marks it dead and sends the request to another node, which answers in time."""
        return budget_s / 2 if self._failover else budget_s

    @functools.cached_property
    def _failover(self) -> bool:
        s = self.settings
        return len(self.es.transport.node_pool.all()) > 1 or s.sniff_on_start or s.sniff_on_node_failure

    @functools.cached_property
    def leg_request_timeout_s(self) -> float:
        """The transport timeout of each request of a search (legs, fetch, deep paging): the leg budget, or
        half of it where the transport can fail over (:meth:`request_timeout`), never above
        ``request_timeout_s``."""
        return min(self.request_timeout(self.settings.leg_timeout_s), self.settings.request_timeout_s)

    @functools.cached_property
    def _leg_clients(self) -> tuple[AsyncElasticsearch, AsyncElasticsearch]:
        """The legs' and the fetch's client, made once (``options()`` builds a whole client, forty namespaced
        sub-clients, per call: 0.7 ms per request when done per leg), twice: as is, and without
        elasticsearch-py's own request span. Their request timeout is :attr:`leg_request_timeout_s`: the
        transport times out first, so that it marks a hung node dead and fails over."""
        timeout = self.leg_request_timeout_s
        return self.es.options(request_timeout=timeout), without_request_spans(self.es.options(request_timeout=timeout))

    def server_side(self, body: dict[str, Any], remaining_s: float | None = None) -> dict[str, Any]:
        """``body`` as every scoring search of the client sends it (the legs, the facets, the walk's streams;
        the fetch by ids needs none): with the server-side ``timeout`` — ``search_timeout_s``, else 90 % of
        what one request may take (what is left of the leg budget, ``remaining_s``, all of it by default, and
        never more than :attr:`leg_request_timeout_s`), so the server stops and says so before the client
        gives up — and ``allow_partial_search_results``."""
        s = self.settings
        if s.search_timeout_s is not None:
            timeout = s.search_timeout_s
        else:
            timeout = 0.9 * min(s.leg_timeout_s if remaining_s is None else remaining_s, self.leg_request_timeout_s)
        return server_side(body, timeout_s=timeout, allow_partial=s.allow_partial_search_results)

    @property
    def leg_es(self) -> AsyncElasticsearch:
        """The client for a search's requests (legs, fetch, deep paging). elasticsearch-py opens an
        OpenTelemetry span per request whenever the API is importable, a tracer provider set or not (about
        6 µs each, three per search, for a span that records nothing): the search's requests open it only
        when one is set (:func:`~storage._observability.tracing.tracing`), so that they still nest under the
        legs then."""
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
                raise map_es_error(exc, where=self.where) from exc

        return await self.es_resilience.call(
            attempt, deadline_s=deadline_s, attempt_timeout_s=attempt_timeout_s, within=within
        )

    def check_vectors(self, index: str, embedding: Mapping[str, Any] | None) -> None:
        """The kNN leg's index holds vectors of another model than the query's (``embedding``: the index's
        ``_meta.embedding``): its hits would be noise."""
        model = embedding.get("model_id") if embedding is not None else None
        if model is not None and model != self.embedder.model_id:
            raise ModelMismatch(
                f"the kNN leg searched {index}, built with {model!r}, with a query embedded by "
                f"{self.embedder.model_id!r}: its hits are left out. Configure {model!r} (EMBEDDINGS_MODEL), or "
                "move the index to this model with `hybrid-search reembed` / `client.indices.reembed()`."
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

    async def probe_embedder(self, embedder: Embedder | None = None) -> None:
        """At start-up (or before a reembed with ``embedder``): a wrong model or dimension is a
        ConfigurationError, not a failure at the first use."""
        try:
            await (embedder or self.embedder).probe()
        except ProviderError as exc:
            raise map_provider_error(exc, "embeddings") from exc

    # -- the reranker ----------------------------------------------------------------------------------

    async def rerank(
        self, query: str, documents: Sequence[str], *, budget_s: float, within: asyncio.Timeout | None = None
    ) -> list[float]:
        """One relevance score per document (input order), through the reranker's own stack (``within``: the
        stage's budget scope, whose expiry counts as the reranker's failure)."""
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
            within=within,
        )

    # -- the chat model --------------------------------------------------------------------------------

    def require_llm(self) -> LLM:
        if self.llm is None:
            raise ConfigurationError(
                "no chat model configured: pass llm= to SearchClient, or set LLM_PROVIDER=openai and LLM_MODEL "
                "(LLM_BASE_URL for an OpenAI-compatible server; `python -m embeddings.local_llm start` runs one)"
            )
        return self.llm

    async def chat(
        self, messages: Sequence[ChatMessage], *, budget_s: float, within: asyncio.Timeout | None = None
    ) -> Completion:
        """One chat completion through the chat model's own stack (retries of transient errors included;
        ``within``: the answer's budget scope, whose expiry counts as the chat model's failure)."""
        llm = self.require_llm()
        return await self._provider_call(
            "llm",
            lambda: llm.complete(messages),
            "hybrid_search.llm",
            {"llm.model": llm.model_id, "llm.messages": len(messages)},
            deadline_s=budget_s,
            attempt_timeout_s=budget_s,
            within=within,
        )

    async def open_chat_stream(
        self, messages: Sequence[ChatMessage], *, budget_s: float, within: asyncio.Timeout | None = None
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
            within=within,
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
