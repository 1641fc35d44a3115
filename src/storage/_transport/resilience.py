"""One resilience stack per dependency (Elasticsearch, the embedder), outermost first:

1. **bulkhead** — at most ``max_concurrency`` calls in flight, a bounded wait for a slot; overflow is
   :class:`Overloaded` (not counted by the breaker: nothing was sent);
2. **deadline** — the whole operation, retries and backoff included;
3. **retry** (tenacity) — transient errors only (no response, timeouts, 429/502/503/504), exponential
   backoff with full jitter, ``Retry-After`` honoured, never a sleep that would cross the deadline, at most
   ``attempts`` attempts, and a **retry budget** (each call earns ``retry_ratio`` of a retry) so a sick
   dependency sees at most ~20 % extra load; ``reraise=True``: tenacity's own errors never escape;
4. **circuit breaker** (pybreaker's state machine, used from asyncio correctly) around each attempt:
   the attempt's outcome is replayed into the breaker synchronously after the await, so coroutines are
   really counted; half-open lets exactly one probe through; open → half-open is decided on the monotonic
   clock; listeners cannot replace the caller's error;
5. **attempt timeout** inside the breaker, so slow calls count as failures.

**Slow is a failure; the caller's cancellation is not.** An attempt counts as its dependency's failure when
it ends without an answer because *a timer* ran out: its own attempt timeout, or the budget of the leg or
stage that called it (passed as ``within``, see :meth:`Resilience.call`) — a hung Elasticsearch, embedder,
reranker or chat model opens its breaker after ``fail_max`` such calls, and from then on callers fail in
microseconds instead of each waiting out a budget. A cancellation that comes from anywhere else (the caller
gave up, the client closed) is never counted. Elasticsearch's requests carry a transport timeout shorter
than the leg budget when there is another node to try (``storage._transport.backend``): a hung node among healthy
ones is marked dead by the transport and the request fails over inside the budget, so it costs one
timeout, not the leg, and never reaches the breaker.

Defaults and their reasons: 3 attempts (one original + two retries covers a node restart or a blip
without multiplying load); backoff 0.2 s doubling to 2 s (jitter spreads synchronized clients);
fail_max 5 consecutive failures (one bad request never opens it; a dead dependency opens it within a
second or two of traffic); reset 30 s (Elasticsearch restarts in ~10-30 s; probing sooner mostly fails);
retry budget 20 % (the SRE-book figure: retries add at most a fifth to a struggling service's load).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import pybreaker
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt
from tenacity.stop import stop_base

from .._errors import (
    CircuitOpen,
    ClientClosed,
    Dependency,
    DependencyError,
    DependencyUnavailable,
    Overloaded,
    SearchError,
)
from .._observability.log import Events

__all__ = ["Resilience", "ResiliencePolicy", "RetryBudget"]

T = TypeVar("T")
_log = logging.getLogger("storage.resilience")
#: Breaker transitions remembered for inspection; the log and telemetry have every one.
_STATE_HISTORY = 64
#: pybreaker's own open → half-open timer runs on the wall clock; we decide on the monotonic clock instead.
_NEVER = 10 * 365 * 24 * 3600.0


@dataclass(frozen=True, slots=True)
class ResiliencePolicy:
    """Every knob of one dependency's stack (see the module docstring for the reasons of the defaults)."""

    max_concurrency: int = 32
    max_wait_s: float = 1.0
    deadline_s: float = 15.0
    attempt_timeout_s: float = 10.0
    attempts: int = 3
    backoff_initial_s: float = 0.2
    backoff_max_s: float = 2.0
    retry_ratio: float = 0.2
    retry_budget_initial: float = 3.0
    retry_budget_max: float = 10.0
    fail_max: int = 5
    reset_timeout_s: float = 30.0


class RetryBudget:
    """A token bucket: each call deposits ``ratio`` tokens (up to ``maximum``); each retry takes one."""

    def __init__(self, ratio: float, initial: float, maximum: float) -> None:
        self.ratio, self.maximum = ratio, maximum
        self.tokens = min(initial, maximum)

    def deposit(self) -> None:
        self.tokens = min(self.tokens + self.ratio, self.maximum)

    def try_spend(self) -> bool:
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


def is_transient(exc: BaseException) -> bool:
    """Worth another attempt: no response, or 429/502/503/504. Never an open breaker or a full bulkhead."""
    if isinstance(exc, CircuitOpen | Overloaded):
        return False
    if isinstance(exc, DependencyUnavailable):
        return True
    return isinstance(exc, DependencyError) and exc.transient


def counts_as_failure(exc: BaseException) -> bool:
    """What the breaker counts: no response, 429/5xx, undecodable answers. Not caller errors (4xx)."""
    if isinstance(exc, DependencyUnavailable):
        return True
    if isinstance(exc, DependencyError):
        if exc.reason == "shards_unavailable":  # the data's state, not the dependency's health
            return False
        return exc.status is None or exc.status == 429 or exc.status >= 500
    return False


class _Listener(pybreaker.CircuitBreakerListener):
    """Logs state changes; never raises (a raising listener would replace the caller's error)."""

    def __init__(self, owner: Resilience) -> None:
        self._owner = owner

    def state_change(self, cb: Any, old_state: Any, new_state: Any) -> None:
        try:
            self._owner._on_state_change(getattr(old_state, "name", None), new_state.name)
        except Exception:  # pragma: no cover - defensive
            _log.exception("breaker listener failed")


class Resilience:
    """The stack for one dependency. ``await stack.call(op)`` runs ``op()`` (a coroutine factory) through it.

    ``op`` must raise our error tree (map third-party errors inside it). ``clock`` and ``sleep`` are
    injectable so tests need not wait.
    """

    def __init__(
        self,
        dependency: Dependency,
        policy: ResiliencePolicy | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] | None = None,
        rng: random.Random | None = None,
        events: Events | None = None,
    ) -> None:
        self.dependency = dependency
        #: Where this stack's events go: its client's (the logger and the client's observers).
        self.events = events if events is not None else Events()
        self.policy = p = policy or ResiliencePolicy()
        self._clock = clock
        self._sleep_fn = sleep
        self._rng = rng or random.Random()
        self._semaphore = asyncio.Semaphore(p.max_concurrency)
        self.budget = RetryBudget(p.retry_ratio, p.retry_budget_initial, p.retry_budget_max)
        self.breaker = pybreaker.CircuitBreaker(
            fail_max=p.fail_max,
            reset_timeout=_NEVER,
            throw_new_error_on_trip=False,
            listeners=[_Listener(self)],
            name=dependency,
        )
        self._opened_at: float | None = None
        self._probing = False
        self._closed = asyncio.Event()
        # Counters for logs, tests and benchmarks.
        self.calls = 0
        self.attempts = 0
        self.retries = 0
        self.rejected_open = 0
        #: The last failure the breaker counted (its type and first line), for an operator: why it is open.
        self.last_failure: str | None = None
        #: The latest breaker transitions (bounded: a client lives as long as its process).
        self.state_changes: collections.deque[tuple[str | None, str]] = collections.deque(maxlen=_STATE_HISTORY)

    # -- lifecycle -------------------------------------------------------------------------------------
    def close(self) -> None:
        """Wake calls sleeping in backoff: they end with :class:`ClientClosed` at once."""
        self._closed.set()

    @property
    def state(self) -> str:
        return str(self.breaker.current_state)

    # -- the stack ---------------------------------------------------------------------------------------
    async def call(
        self,
        op: Callable[[], Awaitable[T]],
        *,
        deadline_s: float | None = None,
        attempt_timeout_s: float | None = None,
        within: asyncio.Timeout | None = None,
    ) -> T:
        """``within``: the caller's own ``asyncio.timeout`` scope around this call (a leg's or a stage's
        budget), if it has one. An attempt that would end no earlier than that scope opens no timeout of its
        own (the scope ends it first), and **the scope's expiry while an attempt waits counts as that
        attempt's failure** (a timeout), exactly as the attempt's own timeout would: a dependency that stops
        answering opens its breaker whichever timer notices first. A cancellation from anywhere else is the
        caller's and is never counted."""
        if self._closed.is_set():
            raise ClientClosed("the client is closed")
        p = self.policy
        self.calls += 1
        self.budget.deposit()
        try:
            if self._semaphore.locked():  # only a full bulkhead waits (a timeout scope costs a timer per call)
                async with asyncio.timeout(p.max_wait_s):  # never wait_for: see _sleep
                    await self._semaphore.acquire()
            else:
                await self._semaphore.acquire()  # returns at once: a free slot is taken without suspending
        except TimeoutError:
            raise Overloaded(
                f"{p.max_concurrency} {self.dependency} calls already in flight; none finished within "
                f"{p.max_wait_s:g} s",
                dependency=self.dependency,
            ) from None
        try:
            deadline = self._clock() + (deadline_s if deadline_s is not None else p.deadline_s)
            per_attempt = attempt_timeout_s if attempt_timeout_s is not None else p.attempt_timeout_s
            # The first attempt runs before any retry machinery is built (most calls succeed at once; a
            # tenacity loop costs ~40 µs per call). A failure worth retrying is replayed into tenacity as its
            # attempt 1, so stop, wait, budget and logging see exactly what they would have.
            try:
                return await self._attempt(op, min(per_attempt, max(deadline - self._clock(), 0.001)), within)
            except SearchError as exc:
                if not is_transient(exc):
                    raise
                replay: list[SearchError] = [exc]
            retrying = AsyncRetrying(
                stop=stop_after_attempt(p.attempts) | self._stop_at_deadline(deadline),
                wait=self._wait,
                retry=retry_if_exception(self._should_retry),
                sleep=self._sleep,
                before_sleep=self._log_retry,
                reraise=True,
            )
            async for attempt in retrying:
                with attempt:
                    if replay:
                        raise replay.pop()
                    return await self._attempt(op, min(per_attempt, max(deadline - self._clock(), 0.001)), within)
            raise AssertionError("unreachable")  # pragma: no cover
        finally:
            self._semaphore.release()

    async def _attempt(self, op: Callable[[], Awaitable[T]], timeout_s: float, within: asyncio.Timeout | None) -> T:
        probe = self._admit()
        self.attempts += 1
        try:
            if _ends_first(within, timeout_s):
                result = await op()
            else:
                async with asyncio.timeout(timeout_s):
                    result = await op()
        except TimeoutError:
            err = DependencyUnavailable(
                f"{self.dependency} attempt exceeded {timeout_s:.3g} s", dependency=self.dependency, reason="timeout"
            )
            self._record(err)
            self._log_attempt_failure(err)
            raise err from None
        except SearchError as exc:
            self._record(exc)
            self._log_attempt_failure(exc)
            raise
        except asyncio.CancelledError:
            if within is not None and within.expired():
                # The caller's budget ran out while the dependency had not answered: slow is a failure.
                err = DependencyUnavailable(
                    f"{self.dependency} did not answer within the caller's budget",
                    dependency=self.dependency,
                    reason="timeout",
                )
                self._record(err)
                self._log_attempt_failure(err)
            # Otherwise the caller's own cancellation: the dependency did nothing wrong; the breaker is untouched.
            raise
        else:
            self._record(None)
            return result
        finally:
            if probe:
                self._probing = False

    def _admit(self) -> bool:
        """Let an attempt through, or raise CircuitOpen. Returns True if this attempt is the half-open probe."""
        state = self.state
        if state == pybreaker.STATE_CLOSED:
            return False
        opened_at = self._opened_at if self._opened_at is not None else self._clock()
        if state == pybreaker.STATE_OPEN and self._clock() - opened_at < self.policy.reset_timeout_s:
            self.rejected_open += 1
            raise CircuitOpen(f"{self.dependency} circuit is open; failing fast", dependency=self.dependency)
        if self._probing:
            self.rejected_open += 1
            raise CircuitOpen(
                f"{self.dependency} circuit is half-open and its probe is in flight", dependency=self.dependency
            )
        self._probing = True
        if state == pybreaker.STATE_OPEN:
            self.breaker.half_open()
        return True

    def _record(self, exc: SearchError | None) -> None:
        """Replay the attempt's outcome into pybreaker synchronously (it cannot await a coroutine itself)."""
        if exc is None:
            if self.breaker.fail_counter == 0 and self.breaker.current_state == pybreaker.STATE_CLOSED:
                return  # a success while closed with no failures counted changes nothing: skip the lock
        elif not counts_as_failure(exc):
            return  # a caller error (4xx): the breaker is untouched
        else:
            self.last_failure = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else exc.reason}"
        try:
            with self.breaker.calling():
                if exc is not None:
                    raise exc
        except pybreaker.CircuitBreakerError:
            pass  # already open (a straggler's outcome): nothing to record
        except SearchError as replayed:
            if replayed is not exc:  # pragma: no cover - pybreaker re-raises what it was given
                raise

    # -- tenacity hooks ----------------------------------------------------------------------------------
    def _should_retry(self, exc: BaseException) -> bool:
        if not is_transient(exc):
            return False
        if not self.budget.try_spend():
            self.events.emit(
                logging.WARNING,
                "retry budget exhausted",
                "resilience.budget_exhausted",
                {"resilience.dependency": self.dependency, "error.type": type(exc).__name__},
            )
            return False
        return True

    def _wait(self, state: RetryCallState) -> float:
        p = self.policy
        cap = min(p.backoff_max_s, p.backoff_initial_s * 2 ** (state.attempt_number - 1))
        delay = self._rng.uniform(0, cap)  # full jitter
        exc = state.outcome.exception() if state.outcome is not None else None
        retry_after = getattr(exc, "retry_after", None)
        if isinstance(retry_after, int | float) and retry_after > 0:
            delay = max(delay, float(retry_after))
        return delay

    def _stop_at_deadline(self, deadline: float) -> stop_base:
        return _StopAtDeadline(self._clock, deadline)

    async def _sleep(self, delay: float) -> None:
        self.retries += 1
        if self._sleep_fn is not None:
            await self._sleep_fn(delay)
            if self._closed.is_set():
                raise ClientClosed("the client was closed during a retry backoff")
            return
        # asyncio.timeout, never wait_for: on Python 3.11 wait_for swallows a cancellation that arrives in the
        # loop pass where the awaited future completes (here: close() during the backoff).
        try:
            async with asyncio.timeout(delay):
                await self._closed.wait()
        except TimeoutError:
            return
        raise ClientClosed("the client was closed during a retry backoff")

    # -- logging -----------------------------------------------------------------------------------------
    def _on_state_change(self, old: str | None, new: str) -> None:
        if new == pybreaker.STATE_OPEN:
            self._opened_at = self._clock()
        self.state_changes.append((old, new))
        self.events.emit(
            logging.WARNING if new == pybreaker.STATE_OPEN else logging.INFO,
            f"{self.dependency} circuit {old} -> {new}",
            "resilience.breaker_state",
            {"resilience.dependency": self.dependency, "resilience.breaker.from": old, "resilience.breaker.to": new},
        )

    def _log_attempt_failure(self, exc: SearchError) -> None:
        self.events.emit(
            logging.INFO,
            f"{self.dependency} attempt failed",
            "resilience.attempt_failed",
            {
                "resilience.dependency": self.dependency,
                "resilience.attempt": self.attempts,
                "error.type": type(exc).__name__,
                "error.reason": exc.reason,
                "http.response.status_code": getattr(exc, "status", None),
            },
        )

    def _log_retry(self, state: RetryCallState) -> None:
        self.events.emit(
            logging.INFO,
            f"retrying {self.dependency}",
            "resilience.retry",
            {
                "resilience.dependency": self.dependency,
                "resilience.attempt": state.attempt_number,
                "resilience.sleep_s": round(state.upcoming_sleep, 3),
            },
        )


def _ends_first(scope: asyncio.Timeout | None, timeout_s: float) -> bool:
    """Does ``scope`` end no later than a timeout of ``timeout_s`` started now would?"""
    if scope is None:
        return False
    when = scope.when()
    return when is not None and when <= asyncio.get_running_loop().time() + timeout_s


class _StopAtDeadline(stop_base):
    """Like tenacity's ``stop_before_delay``, on our (injectable) clock and the operation's own deadline:
    tenacity computes the wait before asking ``stop``, so a sleep that would end past the deadline is never
    started."""

    def __init__(self, clock: Callable[[], float], deadline: float) -> None:
        self._clock, self._deadline = clock, deadline

    def __call__(self, retry_state: RetryCallState) -> bool:
        return self._clock() + (retry_state.upcoming_sleep or 0.0) >= self._deadline
