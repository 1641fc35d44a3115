"""The telemetry sink's shipper lifecycle, on a scripted Elasticsearch (no server: the race is in asyncio)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from storage._telemetry import TelemetrySink


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
