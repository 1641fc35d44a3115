"""OpenTelemetry spans for searches, legs and embedding calls — only when the application asks for them.

The library depends on the OpenTelemetry *API* only (the ``otel`` extra) and never configures a tracer
provider: with no provider set (or the API not installed), :func:`span` is a no-op that builds nothing.
Spans nest through contextvars, so the two legs started by ``asyncio.gather`` are children of the search
span, and elasticsearch-py's own request spans (it emits them when OpenTelemetry is importable) become
children of the legs.

Attributes follow the logging fields (``search.mode``, ``search.query_hash``…); never query text, vectors
or credentials.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Protocol

__all__ = ["SpanLike", "span"]

try:  # the API is optional; tracing simply does nothing without it
    from opentelemetry import trace as _trace
    from opentelemetry.trace import NoOpTracerProvider, ProxyTracerProvider, Status, StatusCode

    _UNSET: tuple[type, ...] = (ProxyTracerProvider, NoOpTracerProvider)
except ImportError:  # pragma: no cover - depends on the environment
    _trace = None  # type: ignore[assignment]
    _UNSET = ()

_TRACER_NAME = "hybrid-search-es"
AttrValue = str | bool | int | float | list[str]


class SpanLike(Protocol):
    def set_attribute(self, key: str, value: Any) -> None: ...


class _NoSpan:
    def set_attribute(self, key: str, value: Any) -> None:
        return None


_NO_SPAN = _NoSpan()


@contextmanager
def span(name: str, attributes: Mapping[str, AttrValue] | None = None) -> Iterator[SpanLike]:
    """A span named ``name`` under the current one; exceptions mark it as an error (and propagate).

    ``CancelledError`` is recorded as cancellation, not as an error of the dependency.
    """
    if _trace is None or isinstance(_trace.get_tracer_provider(), _UNSET):
        # No provider was ever set: every span would be non-recording; skip building one (a search opens
        # five). Checked per call, so a provider set later is used from then on.
        yield _NO_SPAN
        return
    tracer = _trace.get_tracer(_TRACER_NAME)
    with tracer.start_as_current_span(
        name, attributes=dict(attributes or {}), record_exception=False, set_status_on_exception=False
    ) as current:
        try:
            yield current
        except BaseException as exc:
            if current.is_recording():
                current.set_attribute("error.type", type(exc).__name__)
                if isinstance(exc, Exception):
                    current.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"[:500]))
            raise


def mark_error(current: SpanLike, error: BaseException, *, reason: str | None = None) -> None:
    """Record a failure that was turned into data (a degraded leg) rather than raised."""
    current.set_attribute("error.type", type(error).__name__)
    if reason:
        current.set_attribute("search.leg.reason", reason)
    if _trace is not None and hasattr(current, "set_status"):
        current.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"[:500]))
