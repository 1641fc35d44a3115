"""Opt-in search telemetry shipped into an Elasticsearch data stream, for the Kibana dashboard.

The documents are the library's own structured events (``event.action`` ``search`` and
``resilience.breaker_state``, the same fields as the log records) — so the dashboard and the logs can
never disagree on a field name. Shipping is asynchronous and bounded:

- ``emit`` never blocks and never raises: a full buffer drops the event and counts it (``dropped``);
- a background task sends batches with ``_bulk`` (``create`` into the data stream) through its **own**
  resilience stack (breaker, retries, timeouts), so a slow or failing sink never touches searches and never
  trips the search breaker;
- ``aclose()`` flushes what is buffered, within a deadline.

The index template (``hybrid-search-telemetry-<stream name without its namespace>``, one per data stream, so
clients shipping to different streams of one cluster never replace each other's) maps every field the
dashboard reads.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import threading
from datetime import UTC, datetime
from typing import Any

from elasticsearch import AsyncElasticsearch

from .._errors import SearchError
from .._transport.resilience import Resilience, ResiliencePolicy
from .._transport.translate import map_es_error

__all__ = ["DEFAULT_DATA_STREAM", "TELEMETRY_FIELDS", "TelemetryObserver", "TelemetrySink", "index_template"]

DEFAULT_DATA_STREAM = "logs-hybridsearch.search-default"
_TEMPLATE = "hybrid-search-telemetry"
_SHIPPED_ACTIONS = frozenset({"search", "resilience.breaker_state"})
_log = logging.getLogger("storage.telemetry")

#: Field -> Elasticsearch type, for every field a telemetry document may carry.
TELEMETRY_FIELDS: dict[str, str] = {
    "@timestamp": "date",
    "message": "text",
    "log.level": "keyword",
    "service.name": "keyword",
    "event.action": "keyword",
    "event.dataset": "keyword",
    "event.outcome": "keyword",
    "event.duration": "long",
    "trace.correlation_id": "keyword",
    "error.type": "keyword",
    "error.message": "text",
    "search.mode": "keyword",
    "search.query_hash": "keyword",
    "search.query_length": "integer",
    "search.hits": "integer",
    "search.overlap": "integer",
    "search.degraded": "boolean",
    "search.degraded_reason": "keyword",
    "search.partial": "boolean",
    "search.partial_legs": "keyword",
    "search.legs.bm25.shards_failed": "integer",
    "search.legs.bm25.timed_out": "boolean",
    "search.legs.knn.shards_failed": "integer",
    "search.legs.knn.timed_out": "boolean",
    "search.legs_failed": "keyword",
    "search.recovery": "keyword",
    "search.scope_tier": "integer",
    "search.round_trip": "keyword",
    "search.fetch.latency_ms": "float",
    "search.filters": "keyword",
    "search.facets": "keyword",
    "search.group_by": "keyword",
    "search.diversity": "float",
    "search.fusion.method": "keyword",
    "search.fusion.k": "integer",
    "search.query_adjustments": "keyword",
    "search.query_truncated_from": "integer",
    "search.highlights_complete": "boolean",
    "search.rerank.ok": "boolean",
    "search.rerank.latency_ms": "float",
    "search.rerank.candidates": "integer",
    "search.rerank.reason": "keyword",
    "search.legs.bm25.latency_ms": "float",
    "search.legs.bm25.hits": "integer",
    "search.legs.bm25.reason": "keyword",
    "search.legs.knn.latency_ms": "float",
    "search.legs.knn.hits": "integer",
    "search.legs.knn.reason": "keyword",
    "resilience.dependency": "keyword",
    "resilience.breaker.from": "keyword",
    "resilience.breaker.to": "keyword",
}


def index_template(pattern: str) -> dict[str, Any]:
    """A composable template for the data stream: every known field mapped, anything else ignored."""
    properties: dict[str, Any] = {}
    for name, kind in TELEMETRY_FIELDS.items():
        node = properties
        parts = name.split(".") if name != "@timestamp" else [name]
        for part in parts[:-1]:
            node = node.setdefault(part, {"properties": {}})["properties"]
        node[parts[-1]] = {"type": kind}
    return {
        "index_patterns": [pattern],
        "data_stream": {},
        "priority": 250,  # above the built-in logs-*-* template (100)
        "template": {
            "settings": {"index": {"number_of_shards": 1, "auto_expand_replicas": "0-1"}},
            "mappings": {"dynamic": False, "properties": properties},
        },
        "_meta": {"description": "hybrid-search-es search telemetry (see kibana/)"},
    }


class TelemetrySink:
    """Ships documents into ``data_stream`` in the background; see the module docstring."""

    def __init__(
        self,
        es: AsyncElasticsearch,
        *,
        data_stream: str = DEFAULT_DATA_STREAM,
        max_buffer: int = 10_000,
        batch_size: int = 500,
        flush_interval_s: float = 2.0,
        policy: ResiliencePolicy | None = None,
        service_name: str = "hybrid-search",
    ) -> None:
        self.es, self.data_stream = es, data_stream
        self.max_buffer, self.batch_size, self.flush_interval_s = max_buffer, batch_size, flush_interval_s
        self.service_name = service_name
        self.resilience = Resilience(
            "telemetry",
            policy
            or ResiliencePolicy(
                attempts=2, deadline_s=10.0, attempt_timeout_s=5.0, fail_max=3, reset_timeout_s=30.0, max_concurrency=1
            ),
        )
        self._buffer: collections.deque[dict[str, Any]] = collections.deque()
        self._lock = threading.Lock()
        self._wake = asyncio.Event()
        #: Held while a batch is on its way: flush() waits for the shipper's batch in flight too.
        self._sending = asyncio.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self.emitted = self.shipped = self.dropped = self.failed_batches = 0

    async def start(self) -> None:
        """Install the index template (idempotent) and start the background shipper."""
        prefix = self.data_stream.rsplit("-", 1)[0]
        name, template = f"{_TEMPLATE}-{prefix}", index_template(prefix + "-*")
        try:
            await self.resilience.call(lambda: self._call(self.es.indices.put_index_template(name=name, **template)))
        except SearchError as exc:  # telemetry never fails the application; documents are dropped instead
            _log.warning("telemetry template not installed: %s", exc)
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.create_task(self._run(), name="storage-telemetry")

    @staticmethod
    async def _call(aw: Any) -> Any:
        try:
            return await aw
        except Exception as exc:
            raise map_es_error(exc) from exc

    def emit(self, doc: dict[str, Any]) -> None:
        """Buffer one document; never blocks, never raises (a full buffer drops and counts)."""
        with self._lock:
            if self._closing or len(self._buffer) >= self.max_buffer:
                self.dropped += 1
                return
            self._buffer.append(doc)
            self.emitted += 1
            full = len(self._buffer) >= self.batch_size
        if full and self._loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed
                self._loop.call_soon_threadsafe(self._wake.set)

    async def flush(self) -> None:
        """Send everything emitted so far, and wait for it: what is buffered, and a batch the shipper has on
        its way (for tests and shutdown)."""
        while True:
            async with self._sending:
                if not self._buffer:
                    return
                await self._send_batch()

    async def _run(self) -> None:
        while True:
            # asyncio.timeout, never wait_for: on Python 3.11 wait_for swallows a cancellation that arrives in
            # the loop pass where the wake-up fires, and aclose() would then wait for this loop forever.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.flush_interval_s):
                    await self._wake.wait()
            self._wake.clear()
            while self._buffer:
                async with self._sending:
                    await self._send_batch()

    async def _send_batch(self) -> None:
        with self._lock:
            batch = [self._buffer.popleft() for _ in range(min(self.batch_size, len(self._buffer)))]
        if not batch:
            return
        operations: list[dict[str, Any]] = []
        for doc in batch:
            operations += [{"create": {}}, doc]
        accounted = False
        try:
            resp = await self.resilience.call(
                lambda: self._call(self.es.bulk(index=self.data_stream, operations=operations))
            )
            failed = sum(1 for item in resp.body.get("items", []) if item.get("create", {}).get("status", 500) >= 300)
            self.shipped += len(batch) - failed
            self.dropped += failed
            accounted = True
        except SearchError as exc:
            self.failed_batches += 1
            _log.debug("telemetry batch dropped: %s", exc)
        finally:
            if not accounted:  # failed, or cancelled in flight (shutdown): every event is counted
                self.dropped += len(batch)

    async def aclose(self, timeout_s: float = 5.0) -> None:
        """Flush what is buffered (within ``timeout_s``), then stop. Idempotent."""
        with self._lock:
            self._closing = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        try:
            async with asyncio.timeout(timeout_s):
                await self.flush()
        except TimeoutError:
            pass
        with self._lock:
            self.dropped += len(self._buffer)
            self._buffer.clear()
        self.resilience.close()


class TelemetryObserver:
    """Turns the library's search and breaker events into telemetry documents. Registered with
    :func:`storage._observability.log.add_observer` by :meth:`SearchClient.enable_telemetry`: it sees every event
    whatever the logging configuration, and adds no logging handler."""

    def __init__(self, sink: TelemetrySink) -> None:
        self.sink = sink

    def __call__(self, level: int, message: str, fields: dict[str, Any]) -> None:
        action = fields.get("event.action")
        if action not in _SHIPPED_ACTIONS:
            return
        if action == "resilience.breaker_state" and fields.get("resilience.dependency") == "telemetry":
            return  # the sink's own breaker: logged, not shipped through itself
        doc: dict[str, Any] = {
            "@timestamp": datetime.now(UTC).isoformat(),
            "message": message,
            "log.level": logging.getLevelName(level).lower(),
            "service.name": self.sink.service_name,
        }
        doc.update({k: v for k, v in fields.items() if k in TELEMETRY_FIELDS and v is not None})
        self.sink.emit(doc)
