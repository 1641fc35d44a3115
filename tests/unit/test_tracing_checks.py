"""Whether spans record is asked once per search: OpenTelemetry's provider lookup costs a raised and caught
``KeyError`` per call when no provider is set, and a search opens six spans."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, cast

import pytest
from elasticsearch import AsyncElasticsearch
from opentelemetry import trace

from storage import SearchSettings
from storage._observability.tracing import decided_once, span, tracing
from storage._transport.backend import Backend


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


def test_a_search_opens_elasticsearch_py_request_spans_only_when_a_provider_is_set(lookups: Lookups) -> None:
    """elasticsearch-py opens a span per request whenever the OpenTelemetry API is importable; with no
    provider set the search's requests go through a client that does not (the integration test
    test_observability checks that they nest under the legs when one is)."""

    async def clients() -> tuple[bool, bool, bool]:
        es = AsyncElasticsearch("http://127.0.0.1:9")
        backend = Backend(es, cast(Any, None), SearchSettings(url="http://127.0.0.1:9"))
        try:
            with decided_once():
                quiet = backend.leg_es._otel.enabled
            lookups.provider = object()  # a provider set
            with decided_once():
                traced = backend.leg_es._otel.enabled
            return quiet, traced, es._otel.enabled
        finally:
            await es.close()

    quiet, traced, default = asyncio.run(clients())
    assert quiet is False
    assert traced is default  # as elasticsearch-py decides (OTEL_PYTHON_INSTRUMENTATION_ELASTICSEARCH_ENABLED)
