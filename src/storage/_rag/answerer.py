"""Answers with citations (RAG) on top of the search pipeline::

    question ─search─▶ SearchResponse ─context─▶ ENTRY #id blocks (budgeted) ─prompt─▶ messages
             ─chat model─▶ text ─citations─▶ Answer (cited ids in order, invented ids apart, reasoning)

One search (the same pipeline: validation, filters, tenancy, degraded legs), one chat completion: the same
question over the same index takes the same path. The pure parts — the prompt (:class:`AnswerPrompt`), the
reasoning text, and (in ``storage._rag.context``) the context assembly, its budget and the citation parser —
are functions; :class:`Answerer` is the thin shell that calls out (through ``Backend``, so the chat model
has its own resilience stack).

The chat model failing (down, slow, rate limited, answering garbage) never raises: the :class:`Answer`
then has ``answer=None``, the entries, ``degraded=True`` and an ``llm_*`` reason — unless ``strict=True``,
which raises the typed error. Nothing found means no chat call at all (``status="nothing_found"``).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from embeddings import ChatMessage, Completion

from .._errors import CircuitOpen, ContextTooLong, DependencyError, DependencyUnavailable, InvalidQuery, SearchError
from .._observability.log import Events, query_hash
from .._search import Engine
from .._transport.backend import Backend
from .._transport.translate import timeout_error
from .._types.answers import (
    Answer,
    AnswerDelta,
    AnswerDone,
    AnswerEntry,
    AnswerEvent,
    AnswerStatus,
    AnswerTimings,
    AnswerUsage,
)
from .._types.prompt import AnswerPrompt
from .._types.requests import AnswerRequest, SearchRequest
from .._types.results import Degradation, SearchResponse
from .context import AssembledContext, CitationCheck, assemble_context, context_budget

__all__ = ["Answerer"]

_log = logging.getLogger("storage.answer")


def _llm_reason(error: SearchError) -> str:
    """The ``llm_*`` tag of a chat model failure."""
    if isinstance(error, ContextTooLong):
        return "llm_context_too_long"
    if isinstance(error, CircuitOpen):
        return "llm_circuit_open"
    if isinstance(error, DependencyUnavailable):
        # (disconnected: the server took the request and closed the connection without an answer — crashed)
        return {"timeout": "llm_timeout", "disconnected": "llm_disconnected"}.get(error.reason, "llm_unavailable")
    if isinstance(error, DependencyError):
        if error.reason == "bad_response":
            return "llm_bad_response"
        if error.status == 429:
            return "llm_rate_limited"
        return "llm_error"
    return "llm_error"


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


@dataclass(slots=True)
class _Run:
    """One answer in progress (per call, never stored on the shared client)."""

    question: str
    started: float = field(default_factory=time.perf_counter)
    deadline_s: float = 0.0
    search: SearchResponse | None = None
    search_ms: float = 0.0
    context: AssembledContext | None = None
    context_ms: float = 0.0
    messages: list[ChatMessage] = field(default_factory=list)

    def remaining_s(self) -> float:
        return self.deadline_s - (time.perf_counter() - self.started)


class Answerer:
    """Search → context → chat model → citations. Holds no per-request state."""

    def __init__(self, backend: Backend, engine: Engine) -> None:
        self._b = backend
        self._engine = engine

    def _search_request(self, r: AnswerRequest) -> SearchRequest:
        return SearchRequest(
            r.question,
            mode=r.mode,
            filters=r.filters,
            limit=r.limit if r.limit is not None else self._b.settings.answer_limit,
            tenant_id=r.tenant_id,
            strict=r.strict,
            # The model reads texts, not highlights; but in an index read in passages the BM25 leg's fragments
            # say which passages of a document it matched, and those are what the context is built from.
            highlight=True,
            index=r.index,
            rerank=r.rerank,
            diversity=r.diversity,
        )

    def _options(self, r: AnswerRequest) -> tuple[AnswerPrompt, int, float]:
        """The call's prompt, context size and deadline: what it gives (checked), else the settings'."""
        s = self._b.settings
        if r.max_context_chars is not None and (
            isinstance(r.max_context_chars, bool) or not isinstance(r.max_context_chars, int) or r.max_context_chars < 1
        ):
            raise InvalidQuery(f"max_context_chars must be a whole number >= 1, not {r.max_context_chars!r}")
        if r.timeout_s is not None and (
            isinstance(r.timeout_s, bool) or not isinstance(r.timeout_s, int | float) or not 0 < r.timeout_s < math.inf
        ):
            raise InvalidQuery(f"timeout_s must be a number of seconds > 0, not {r.timeout_s!r}")
        return (
            r.prompt or AnswerPrompt(),
            r.max_context_chars if r.max_context_chars is not None else s.answer_context_chars,
            r.timeout_s if r.timeout_s is not None else s.answer_timeout_s,
        )

    async def _prepare(self, request: AnswerRequest) -> tuple[_Run, AnswerPrompt]:
        llm = self._b.require_llm()  # before any search: a missing model is a set-up error
        prompt, max_context_chars, timeout_s = self._options(request)
        run = _Run(question=request.question, deadline_s=timeout_s)
        try:
            async with asyncio.timeout(timeout_s):
                run.search = await self._engine.search(self._search_request(request))
        except TimeoutError:
            raise timeout_error("answer", "elasticsearch", timeout_s) from None
        run.search_ms = _ms(time.perf_counter() - run.started)
        if not run.search.hits:
            return run, prompt
        t0 = time.perf_counter()
        budget = context_budget(
            max_context_chars,
            context_tokens=getattr(llm, "context_tokens", None),
            max_tokens=getattr(llm, "max_tokens", None),
            overhead_chars=prompt.overhead_chars(run.question),
        )
        run.context = assemble_context(run.search.hits, max_context_chars=budget)
        run.messages = prompt.messages(run.question, run.context.text)
        run.context_ms = _ms(time.perf_counter() - t0)
        return run, prompt

    async def answer(self, request: AnswerRequest) -> Answer:
        run, prompt = await self._prepare(request)
        if run.context is None:
            return self._finish(run, prompt, status="nothing_found")
        if not run.context.ids:  # found, but nothing fits the budget: a model with no entries would invent
            return self._finish(run, prompt, status="no_context")
        t0 = time.perf_counter()
        try:
            completion = await self._chat(run)
        except SearchError as exc:
            if request.strict:
                raise
            return self._finish(run, prompt, status="llm_failed", error=exc, llm_s=time.perf_counter() - t0)
        return self._finish(run, prompt, completion=completion, llm_s=time.perf_counter() - t0)

    async def stream(self, request: AnswerRequest) -> AsyncIterator[AnswerEvent]:
        run, prompt = await self._prepare(request)
        timeout_s = run.deadline_s
        if run.context is None or not run.context.ids:
            status: AnswerStatus = "nothing_found" if run.context is None else "no_context"
            yield AnswerDone(answer=self._finish(run, prompt, status=status))
            return
        t0 = time.perf_counter()
        first_token_s: float | None = None
        completion: Completion | None = None
        error: SearchError | None = None
        # The deadline is checked around each wait for the model, never across a ``yield``: a timeout scope
        # open while the caller runs would cancel the caller's code instead.
        budget = max(run.remaining_s(), 0.001)
        deadline = asyncio.get_running_loop().time() + budget
        try:
            async with asyncio.timeout_at(deadline) as scope:
                item, rest = await self._b.open_chat_stream(run.messages, budget_s=budget, within=scope)
        except TimeoutError:
            error = timeout_error("answer", "llm", timeout_s)
        except SearchError as exc:
            error = exc
        else:
            try:
                while True:
                    if isinstance(item, Completion):
                        completion = item
                    elif item:
                        if first_token_s is None:
                            first_token_s = time.perf_counter() - t0
                        yield AnswerDelta(text=item)
                    try:
                        async with asyncio.timeout_at(deadline):
                            item = await anext(rest)
                    except StopAsyncIteration:
                        break
            except TimeoutError:
                error = timeout_error("answer", "llm", timeout_s)
            except SearchError as exc:
                error = exc
            finally:
                await rest.aclose()
        if error is None and completion is None:
            error = DependencyError("chat stream ended without an answer", dependency="llm", reason="bad_response")
        if error is not None:
            if request.strict:
                raise error
            answer = self._finish(run, prompt, status="llm_failed", error=error, llm_s=time.perf_counter() - t0)
        else:
            answer = self._finish(run, prompt, completion=completion, llm_s=time.perf_counter() - t0)
        if first_token_s is not None:
            answer = answer.model_copy(
                update={"timings": answer.timings.model_copy(update={"first_token_ms": _ms(first_token_s)})}
            )
        yield AnswerDone(answer=answer)

    async def _chat(self, run: _Run) -> Completion:
        budget = max(run.remaining_s(), 0.001)
        try:
            async with asyncio.timeout(budget) as scope:
                completion = await self._b.chat(run.messages, budget_s=budget, within=scope)
        except TimeoutError:
            raise timeout_error("answer", "llm", run.deadline_s) from None
        if not completion.text.strip():
            raise DependencyError("the chat model answered with no text", dependency="llm", reason="bad_response")
        return completion

    def _finish(
        self,
        run: _Run,
        prompt: AnswerPrompt,
        *,
        status: AnswerStatus = "answered",
        completion: Completion | None = None,
        error: SearchError | None = None,
        llm_s: float | None = None,
    ) -> Answer:
        search = run.search
        assert search is not None
        t0 = time.perf_counter()
        context = run.context
        included = context.ids if context is not None else []
        hits = {h.id: (rank, h) for rank, h in enumerate(search.hits, start=1)}
        entries = [
            AnswerEntry(
                id=doc_id,
                title=hits[doc_id][1].title,
                source=hits[doc_id][1].source.get("source"),
                score=hits[doc_id][1].score,
                rank=hits[doc_id][0],
                truncated=context is not None and context.truncated and doc_id == included[-1],
                passages=context.spans.get(doc_id, []) if context is not None else [],
            )
            for doc_id in included
        ]
        text: str | None = None
        check = CitationCheck(cited=[], invented=[], fallback=False)
        if status == "nothing_found":
            text = f"Nothing was found for the question, so there is no answer. {prompt.no_answer}"
        elif status == "no_context":
            text = None
        elif completion is not None:
            text = completion.text.strip()
            said_no = prompt.no_answer.lower().rstrip(".") in text.lower()
            check = CitationCheck.of(text, included, allow_fallback=not said_no)
            if said_no and not check.cited:
                status = "not_in_entries"
        llm = self._b.llm
        reason = _llm_reason(error) if error is not None else search.degradation.reason if search.degradation else None
        usage = None
        if completion is not None:
            u = completion.usage
            usage = AnswerUsage(
                prompt_tokens=u.prompt_tokens, completion_tokens=u.completion_tokens, total_tokens=u.total_tokens
            )
        citations_ms = _ms(time.perf_counter() - t0)
        answer = Answer(
            question=run.question,
            answer=text,
            status=status,
            citations=check.cited,
            citations_fallback=check.fallback,
            invented_citations=check.invented,
            entries=entries,
            context_truncated=context.truncated if context is not None else False,
            context_chars=len(context.text) if context is not None else 0,
            degradation=(
                Degradation(
                    legs_failed=search.degradation.legs_failed if search.degradation is not None else [],
                    reason=reason,
                )
                if reason is not None
                else None
            ),
            error=f"{type(error).__name__}: {error}" if error is not None else None,
            search=search,
            model=llm.model_id if llm is not None else None,
            served_model=completion.model if completion is not None else None,
            finish_reason=completion.finish_reason if completion is not None else None,
            usage=usage,
            timings=AnswerTimings(
                search_ms=run.search_ms,
                context_ms=run.context_ms,
                llm_ms=_ms(llm_s) if llm_s is not None else None,
                citations_ms=citations_ms,
                total_ms=_ms(time.perf_counter() - run.started),
            ),
            reasoning=reasoning(search, context, status, check, llm.model_id if llm else None, llm_s, error),
            correlation_id=search.correlation_id,
        )
        _log_answer(self._b.events, answer)
        return answer


def reasoning(
    search: SearchResponse,
    context: AssembledContext | None,
    status: AnswerStatus,
    check: CitationCheck,
    model: str | None,
    llm_s: float | None,
    error: SearchError | None,
) -> str:
    """How the answer was produced, in plain sentences (what the replaced system returned). Pure."""
    legs = " + ".join(search.legs) or search.mode
    fused = f", fused by {search.fusion.method}" if len(search.legs) > 1 else ""
    parts = [f"{search.mode} search ({legs}{fused}) returned {len(search.hits)} hits"]
    if search.degradation is not None and search.degradation.legs_failed:
        failed = ", ".join(search.degradation.legs_failed)
        parts[-1] += f" with the {failed} leg failed ({search.degradation.reason})"
    if search.partial:
        parts[-1] += " from some shards only (partial)"
    if status == "nothing_found" or context is None:
        return parts[0] + "; nothing to answer from, so no chat model was asked."
    if status == "no_context":
        return (
            parts[0] + "; none of them fit the context budget (the model's window and the prompt), so no chat "
            "model was asked."
        )
    cut = ", the last one cut to fit" if context.truncated else ""
    parts.append(f"{len(context.ids)} went into the context ({len(context.text):,} characters{cut})")
    took = f" after {llm_s:.1f} s" if llm_s is not None else ""
    if error is not None:
        parts.append(
            f"the chat model {model} failed{took} ({error.reason}); the entries are returned without an answer"
        )
        return "; ".join(parts) + "."
    if status == "not_in_entries":
        parts.append(f"{model} answered{took} that the entries do not contain the answer")
    elif check.fallback:
        parts.append(f"{model} answered{took} without citing an entry, so every entry counts as cited")
    else:
        parts.append(f"{model} answered{took} citing {', '.join('#' + c for c in check.cited)}")
    if check.invented:
        parts.append(f"it also cited {', '.join('#' + c for c in check.invented)}, not in the context: dropped")
    return "; ".join(parts) + "."


def _log_answer(events: Events, answer: Answer) -> None:
    level = logging.WARNING if answer.status == "llm_failed" else logging.INFO
    events.emit(
        level,
        "answer failed; entries returned without one" if answer.status == "llm_failed" else "answer",
        "search.answer",
        {
            "search.query_hash": query_hash(answer.question),
            "answer.status": answer.status,
            "answer.model": answer.model,
            "answer.entries": len(answer.entries),
            "answer.citations": len(answer.citations),
            "answer.invented_citations": len(answer.invented_citations),
            "answer.citations_fallback": answer.citations_fallback,
            "answer.degraded_reason": answer.degradation.reason if answer.degradation is not None else None,
            "answer.search_ms": answer.timings.search_ms,
            "answer.llm_ms": answer.timings.llm_ms,
            "answer.latency_ms": answer.timings.total_ms,
            "answer.prompt_tokens": answer.usage.prompt_tokens if answer.usage else None,
            "answer.completion_tokens": answer.usage.completion_tokens if answer.usage else None,
        },
        _log,
    )
