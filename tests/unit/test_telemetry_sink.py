"""The telemetry sink's shipper lifecycle, on a scripted Elasticsearch (no server: the race is in asyncio)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from storage._observability.telemetry import TelemetrySink


class _AcceptingES:
    """Answers the two calls the sink makes: the template, and bulk with every document created."""

    def __init__(self) -> None:
        self.bulks = 0
        self.indices = SimpleNamespace(put_index_template=self._template)

    async def _template(self, **_: Any) -> SimpleNamespace:
        return SimpleNamespace(body={"acknowledged": True})

    async def bulk(self, *, index: str, operations: list[dict[str, Any]]) -> SimpleNamespace:
        self.bulks += 1
        return SimpleNamespace(body={"items": [{"create": {"status": 201}} for _ in operations[::2]]})


async def test_closing_the_sink_in_the_pass_a_full_batch_wakes_it_stops_the_shipper() -> None:
    """On Python 3.11, ``wait_for`` swallowed a cancellation delivered in the loop pass where the awaited
    wake-up completed: ``aclose()`` then waited for a shipper that never stopped (a CI run hung on it)."""
    es = _AcceptingES()
    sink = TelemetrySink(es, batch_size=2, flush_interval_s=5.0)  # type: ignore[arg-type]
    await sink.start()
    await asyncio.sleep(0)  # the shipper is waiting for a wake-up
    sink.emit({"n": 1})
    sink.emit({"n": 2})  # a full batch: the wake-up is scheduled for the next pass ...
    await asyncio.sleep(0)  # ... which runs it; the shipper resumes in the pass aclose() cancels it
    async with asyncio.timeout(5):
        await sink.aclose()
    assert sink.shipped + sink.dropped == 2  # every event accounted for


class _SlowES(_AcceptingES):
    """Holds each bulk until released, so a batch can be caught on its way."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()
        self.sending = asyncio.Event()
        self.indexed: list[dict[str, Any]] = []

    async def bulk(self, *, index: str, operations: list[dict[str, Any]]) -> SimpleNamespace:
        self.sending.set()
        await self.release.wait()
        self.indexed += operations[1::2]
        return await super().bulk(index=index, operations=operations)


async def test_flush_returns_only_when_the_batch_the_shipper_has_in_flight_is_indexed() -> None:
    """A CI run read the data stream right after flush() and missed two events: the shipper's timer had
    taken them from the buffer, and flush() found it empty and returned while their bulk was on its way."""
    es = _SlowES()
    sink = TelemetrySink(es, flush_interval_s=0.01)  # type: ignore[arg-type]
    await sink.start()
    sink.emit({"n": 1})
    sink.emit({"n": 2})
    async with asyncio.timeout(5):
        await es.sending.wait()  # the shipper's timer took the batch from the buffer and sends it
    flushed = asyncio.create_task(sink.flush())
    await asyncio.sleep(0.05)
    assert not flushed.done()  # waiting for the batch in flight
    es.release.set()
    async with asyncio.timeout(5):
        await flushed
    assert es.indexed == [{"n": 1}, {"n": 2}]
    await sink.aclose()
    assert sink.shipped == 2
