"""Whether spans record is asked once per search: OpenTelemetry's provider lookup costs a raised and caught
``KeyError`` per call when no provider is set, and a search opens six spans."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest
from opentelemetry import trace

from storage._tracing import decided_once, span, tracing


@dataclass
class Lookups:
    """Stands in for ``trace.get_tracer_provider``: answers ``provider`` and counts the calls."""

    provider: object
    calls: int = 0

    def __call__(self) -> object:
        self.calls += 1
        return self.provider


@pytest.fixture
def lookups(monkeypatch: pytest.MonkeyPatch) -> Lookups:
    counted = Lookups(trace.ProxyTracerProvider())  # no provider set (another test module may have set one)
    monkeypatch.setattr(trace, "get_tracer_provider", counted)
    return counted


def test_spans_inside_one_operation_ask_for_the_provider_once_in_every_task_it_starts(lookups: Lookups) -> None:
    async def leg() -> bool:
        with span("leg"):
            return tracing()

    async def search() -> list[bool]:
        with decided_once() as recording, span("search"):
            return [recording, *await asyncio.gather(leg(), leg())]

    assert asyncio.run(search()) == [False, False, False]
    assert lookups.calls == 1


def test_a_provider_set_while_an_operation_runs_counts_from_the_next_check_outside_it(lookups: Lookups) -> None:
    async def search() -> tuple[bool, bool]:
        with decided_once() as before:
            lookups.provider = object()  # a provider set meanwhile (anything but the API's proxy / no-op)
            return before, tracing()

    assert asyncio.run(search()) == (False, False)
    assert tracing() is True
    assert lookups.calls == 2
