"""The resilience stack on its own, with a fake clock and fake sleep (no waiting, no server)."""

from __future__ import annotations

import asyncio
import logging
import random
import time

import pytest
from elastic_transport import SerializationError

from storage import CircuitOpen, ClientClosed, DependencyError, DependencyUnavailable, InvalidQuery, Overloaded
from storage._transport.connect import Serializer
from storage._transport.resilience import Resilience, ResiliencePolicy, counts_as_failure
from storage._transport.translate import map_es_error


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, delay: float) -> None:
        self.sleeps.append(delay)
        self.now += delay
        await asyncio.sleep(0)


def stack(t: FakeTime, **policy: float) -> Resilience:
    return Resilience("elasticsearch", ResiliencePolicy(**policy), clock=t.clock, sleep=t.sleep)  # type: ignore[arg-type]


def down() -> DependencyUnavailable:
    return DependencyUnavailable("refused", dependency="elasticsearch")


class Script:
    """An operation that fails with the scripted errors, then succeeds; counts its calls."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


async def test_transient_errors_are_retried_then_succeed() -> None:
    t = FakeTime()
    op = Script(down(), DependencyError("busy", dependency="elasticsearch", status=503))
    assert await stack(t).call(op) == "ok"
    assert op.calls == 3
    assert len(t.sleeps) == 2


async def test_at_most_n_attempts_and_the_typed_error_is_reraised() -> None:
    t = FakeTime()
    op = Script(*(down() for _ in range(10)))
    with pytest.raises(DependencyUnavailable):
        await stack(t, attempts=3).call(op)
    assert op.calls == 3


async def test_non_retryable_4xx_is_one_request_and_leaves_the_breaker_untouched() -> None:
    t = FakeTime()
    s = stack(t, fail_max=1)
    for status in (400, 404):
        op = Script(DependencyError("bad", dependency="elasticsearch", status=status))
        with pytest.raises(DependencyError):
            await s.call(op)
        assert op.calls == 1
    assert s.state == "closed"
    assert s.breaker.fail_counter == 0


async def test_breaker_opens_then_fails_fast_without_calling(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="storage")
    t = FakeTime()
    s = stack(t, attempts=1, fail_max=5)
    op = Script(*(down() for _ in range(100)))
    for _ in range(5):
        with pytest.raises(DependencyUnavailable):
            await s.call(op)
    assert s.state == "open"
    for _ in range(10):
        with pytest.raises(CircuitOpen):
            await s.call(op)
    assert op.calls == 5
    changes = [r for r in caplog.records if getattr(r, "event.action", "") == "resilience.breaker_state"]
    assert len(changes) == 1
    assert getattr(changes[0], "resilience.breaker.to") == "open"


async def test_recovery_lets_exactly_one_probe_through_then_closes() -> None:
    t = FakeTime()
    s = stack(t, attempts=1, fail_max=2, reset_timeout_s=30)
    for _ in range(2):
        with pytest.raises(DependencyUnavailable):
            await s.call(Script(down()))
    assert s.state == "open"
    t.now += 31
    gate = asyncio.Event()
    probes = 0

    async def slow_ok() -> str:
        nonlocal probes
        probes += 1
        await gate.wait()
        return "ok"

    tasks = [asyncio.create_task(s.call(slow_ok)) for _ in range(20)]
    await asyncio.sleep(0.01)
    gate.set()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert probes == 1
    assert sum(r == "ok" for r in results) == 1
    assert all(isinstance(r, CircuitOpen) for r in results if r != "ok")
    assert s.state == "closed"
    assert await s.call(Script()) == "ok"


async def test_a_failed_probe_reopens_the_breaker() -> None:
    t = FakeTime()
    s = stack(t, attempts=1, fail_max=1, reset_timeout_s=30)
    with pytest.raises(DependencyUnavailable):
        await s.call(Script(down()))
    t.now += 31
    with pytest.raises(DependencyUnavailable):
        await s.call(Script(down()))
    assert s.state == "open"
    with pytest.raises(CircuitOpen):
        await s.call(Script())


async def test_retry_after_is_honoured_within_the_deadline() -> None:
    t = FakeTime()
    op = Script(DependencyError("slow down", dependency="elasticsearch", status=429, retry_after=2.0))
    assert await stack(t, deadline_s=10).call(op) == "ok"
    assert t.sleeps[0] >= 2.0
    t2 = FakeTime()
    op2 = Script(DependencyError("slow down", dependency="elasticsearch", status=429, retry_after=60.0))
    with pytest.raises(DependencyError):
        await stack(t2, deadline_s=10).call(op2)
    assert t2.sleeps == []  # never sleeps past the deadline
    assert op2.calls == 1


async def test_retry_budget_bounds_extra_load_under_sustained_failure() -> None:
    t = FakeTime()
    s = stack(t, attempts=3, fail_max=10_000)
    op = Script(*(DependencyError("429", dependency="elasticsearch", status=429) for _ in range(10_000)))
    calls = 200
    for _ in range(calls):
        with pytest.raises(DependencyError):
            await s.call(op)
    print(f"{calls} calls -> {op.calls} requests ({op.calls / calls:.2f}x)")
    assert op.calls <= 1.2 * calls + s.policy.retry_budget_initial


async def test_slow_attempts_time_out_and_count_as_failures() -> None:
    t = FakeTime()
    s = stack(t, attempts=1, fail_max=1, attempt_timeout_s=0.05)

    async def hang() -> str:
        await asyncio.sleep(10)
        return "late"

    with pytest.raises(DependencyUnavailable) as info:
        await s.call(hang)
    assert info.value.reason == "timeout"
    assert s.state == "open"


async def test_an_attempt_inside_a_callers_earlier_scope_opens_no_timeout_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An attempt inside the caller's scope (a leg's budget) that the scope would end first opens no second
    timer. An attempt timeout shorter than the scope still fires (and counts)."""
    s = stack(FakeTime(), attempts=1, fail_max=1, attempt_timeout_s=10.0)
    opened: list[float | None] = []
    real_timeout = asyncio.timeout

    def counting(delay: float | None) -> asyncio.Timeout:
        opened.append(delay)
        return real_timeout(delay)

    async def hang() -> str:
        await asyncio.sleep(10)
        return "late"

    async with asyncio.timeout(5.0) as scope:
        monkeypatch.setattr(asyncio, "timeout", counting)
        assert await s.call(Script(), within=scope) == "ok"
    assert opened == []
    async with real_timeout(5.0) as scope:
        with pytest.raises(DependencyUnavailable) as info:
            await s.call(hang, attempt_timeout_s=0.05, within=scope)
    assert opened == [0.05]
    assert info.value.reason == "timeout"
    assert s.state == "open"


async def test_a_dependency_that_outlasts_the_callers_budget_counts_as_a_failure_and_opens_the_breaker() -> None:
    """A hung dependency: the leg's budget (the caller's scope) ends the attempt before its own timeout would.
    That expiry is the dependency's failure, exactly like an attempt timeout: after fail_max of them the
    breaker is open and the next call fails fast without waiting."""
    s = stack(FakeTime(), attempts=1, fail_max=3, attempt_timeout_s=10.0)

    async def hang() -> str:
        await asyncio.sleep(10)
        return "late"

    for _ in range(3):
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.02) as scope:
                await s.call(hang, within=scope)
    assert s.state == "open"
    started = time.perf_counter()
    with pytest.raises(CircuitOpen):
        async with asyncio.timeout(5.0) as scope:
            await s.call(hang, within=scope)
    assert time.perf_counter() - started < 1.0


async def test_a_callers_cancellation_inside_an_unexpired_budget_is_never_counted() -> None:
    s = stack(FakeTime(), attempts=1, fail_max=1, attempt_timeout_s=10.0)
    started = asyncio.Event()

    async def hang() -> str:
        started.set()
        await asyncio.sleep(10)
        return "never"

    async def caller() -> str:
        async with asyncio.timeout(5.0) as scope:
            return await s.call(hang, within=scope)

    task = asyncio.create_task(caller())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert s.state == "closed"
    assert s.breaker.fail_counter == 0


async def test_cancellation_during_an_attempt_is_unchanged_and_not_counted() -> None:
    t = FakeTime()
    s = stack(t, fail_max=1)
    started = asyncio.Event()

    async def hang() -> str:
        started.set()
        await asyncio.sleep(10)
        return "never"

    task = asyncio.create_task(s.call(hang))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert s.state == "closed"
    assert s.breaker.fail_counter == 0


class _LongestJitter(random.Random):
    """Full jitter that always draws its upper bound (a 5 s backoff really is 5 s)."""

    def uniform(self, a: float, b: float) -> float:
        return b


async def test_cancellation_during_backoff_is_unchanged_and_not_counted() -> None:
    policy = ResiliencePolicy(backoff_initial_s=5, backoff_max_s=5, fail_max=3)
    s = Resilience("elasticsearch", policy, rng=_LongestJitter())
    op = Script(down(), down())
    task = asyncio.create_task(s.call(op))
    await asyncio.sleep(0.05)  # the first attempt failed at once; now in backoff
    assert op.calls == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert s.breaker.fail_counter == 1  # the one real failure, nothing for the cancellation


async def test_a_cancellation_arriving_as_close_wakes_the_backoff_is_a_cancellation() -> None:
    """Python 3.11's wait_for swallowed a cancellation delivered in the loop pass where the awaited future
    completed; the call then ended in ClientClosed instead (and a task meant to stop could go on)."""
    s = Resilience("elasticsearch", ResiliencePolicy(backoff_initial_s=5, backoff_max_s=5), rng=_LongestJitter())
    task = asyncio.create_task(s.call(Script(down(), down())))
    await asyncio.sleep(0.05)  # in backoff
    s.close()
    task.cancel()  # the same pass: the close wake-up completes first
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_cancellation_arriving_as_a_bulkhead_slot_frees_is_a_cancellation_and_frees_the_slot() -> None:
    s = Resilience("embeddings", ResiliencePolicy(max_concurrency=1, max_wait_s=5))
    gate = asyncio.Event()
    waiters: list[asyncio.Task[str]] = []

    async def hold() -> str:
        await gate.wait()
        # Cancel the waiter in the pass after this call ends, the pass where its release wakes the waiter.
        asyncio.get_running_loop().call_soon(waiters[0].cancel)
        return "held"

    first = asyncio.create_task(s.call(hold))
    await asyncio.sleep(0)
    waiters.append(asyncio.create_task(s.call(Script())))
    await asyncio.sleep(0.01)  # waiting for the one slot
    gate.set()
    assert await first == "held"
    with pytest.raises(asyncio.CancelledError):
        await waiters[0]
    assert await asyncio.wait_for(s.call(Script()), 1) == "ok"  # the slot was not lost


async def test_closing_during_backoff_ends_the_call_promptly() -> None:
    s = Resilience("elasticsearch", ResiliencePolicy(backoff_initial_s=5, backoff_max_s=5))
    op = Script(DependencyError("429", dependency="elasticsearch", status=429, retry_after=5))
    task = asyncio.create_task(s.call(op))
    await asyncio.sleep(0.01)
    loop = asyncio.get_running_loop()
    started = loop.time()
    s.close()
    with pytest.raises(ClientClosed):
        await task
    assert loop.time() - started < 0.5


async def test_full_bulkhead_is_overloaded_and_not_counted_by_the_breaker() -> None:
    s = Resilience("embeddings", ResiliencePolicy(max_concurrency=1, max_wait_s=0.01, fail_max=1))
    gate = asyncio.Event()

    async def hold() -> str:
        await gate.wait()
        return "ok"

    first = asyncio.create_task(s.call(hold))
    await asyncio.sleep(0)
    with pytest.raises(Overloaded):
        await s.call(hold)
    gate.set()
    assert await first == "ok"
    assert s.state == "closed"


async def test_an_open_breaker_on_one_dependency_never_blocks_the_other() -> None:
    t = FakeTime()
    es = stack(t, attempts=1, fail_max=1)
    emb = Resilience("embeddings", ResiliencePolicy(), clock=t.clock, sleep=t.sleep)
    with pytest.raises(DependencyUnavailable):
        await es.call(Script(down()))
    assert es.state == "open"
    assert await emb.call(Script()) == "ok"


def test_a_request_that_cannot_be_written_is_the_callers_error_and_an_unreadable_answer_the_servers() -> None:
    written = SerializationError(
        "Unable to serialize to JSON: {'query': ...} (type: dict)",
        errors=(TypeError("str is not valid UTF-8: surrogates not allowed"),),
    )
    mapped = map_es_error(written)
    assert isinstance(mapped, InvalidQuery)
    assert "surrogates not allowed" in str(mapped)
    assert "nothing was sent" in str(mapped)
    assert not counts_as_failure(mapped)
    answer = b'{"hits": ' + b"x" * 100_000
    read = SerializationError(
        f"Unable to deserialize as JSON: {answer!r}", errors=(ValueError("unexpected character"),)
    )
    mapped = map_es_error(read)
    assert isinstance(mapped, DependencyError)
    assert mapped.reason == "bad_response"
    assert counts_as_failure(mapped)
    assert len(str(mapped)) < 500  # (not the whole answer)


def test_an_answer_with_a_lone_surrogate_escape_is_read_with_the_surrogate_replaced() -> None:
    answer = b'{"hits": [{"title": "cut \\ud83d", "ok": "\\ud83d\\ude00", "n": 1}], "k\\udc00": [1.5]}'
    assert Serializer().loads(answer) == {
        "hits": [{"title": "cut \ufffd", "ok": "\U0001f600", "n": 1}],
        "k\ufffd": [1.5],
    }
    with pytest.raises(SerializationError):
        Serializer().loads(b'{"hits": [')
