"""OpenTelemetry spans for searches, legs and embedding calls — only when the application asks for them.

The library depends on the OpenTelemetry *API* only (the ``otel`` extra) and never configures a tracer
provider: with no provider set (or the API not installed), :func:`span` is a no-op that builds nothing.
Spans nest through contextvars, so the two legs started by ``asyncio.gather`` are children of the search
span, and elasticsearch-py's own request spans become children of the legs. (elasticsearch-py opens one
per request whenever OpenTelemetry is importable; a search's requests skip it while no provider is set:
:attr:`storage._transport.backend.Backend.leg_es`, :func:`without_request_spans`.)

Attributes follow the logging fields (``search.mode``, ``search.query_hash``…); never query text, vectors
or credentials.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from elasticsearch import AsyncElasticsearch

__all__ = ["SpanLike", "decided_once", "span", "tracing", "without_request_spans"]

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


class _NoSpanContext:
    """What :func:`span` returns while no tracer provider is set: stateless, shared, builds nothing."""

    def __enter__(self) -> SpanLike:
        return _NO_SPAN

    def __exit__(self, *exc: object) -> None:
        return None


_NO_SPAN_CONTEXT = _NoSpanContext()


#: Inside :class:`decided_once`: whether spans record, as checked when it was entered.
_decided: ContextVar[bool | None] = ContextVar("storage_tracing_decided", default=None)


def _provider_set() -> bool:
    return _trace is not None and not isinstance(_trace.get_tracer_provider(), _UNSET)


def tracing() -> bool:
    """Is a tracer provider set (would a span record anything)? Inside :class:`decided_once`, the answer
    taken when it was entered; elsewhere checked per call, so a provider set later is used from then on."""
    known = _decided.get()
    return _provider_set() if known is None else known


class decided_once:  # noqa: N801 - used as a function-like context manager: ``with decided_once():``
    """One operation's spans (a search opens six) ask whether a provider is set once, when it starts; every
    span inside reads that answer, in the tasks the operation starts too (they copy the context).

    The check is OpenTelemetry's ``get_tracer_provider()``: with no provider set, it looks an environment
    variable up through ``os.environ``, which raises and catches a ``KeyError`` (about 1 µs). A provider set
    while an operation runs is used from the next one on. One instance per operation (it holds its token).
    """

    __slots__ = ("_token",)

    def __enter__(self) -> bool:
        recording = _provider_set()
        self._token: Token[bool | None] = _decided.set(recording)
        return recording

    def __exit__(self, *exc: object) -> None:
        _decided.reset(self._token)


def span(name: str, attributes: Mapping[str, AttrValue] | None = None) -> AbstractContextManager[SpanLike]:
    """A span named ``name`` under the current one; exceptions mark it as an error (and propagate).

    ``CancelledError`` is recorded as cancellation, not as an error of the dependency. With no provider set
    every span would be non-recording: a shared no-op context is returned instead (a search opens ten).
    """
    if not tracing():
        return _NO_SPAN_CONTEXT
    return _recording_span(name, attributes)


@contextmanager
def _recording_span(name: str, attributes: Mapping[str, AttrValue] | None) -> Iterator[SpanLike]:
    assert _trace is not None
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


def without_request_spans(es: AsyncElasticsearch) -> AsyncElasticsearch:
    """``es`` with elasticsearch-py's per-request OpenTelemetry span turned off. Its only switch is an
    environment variable read when a client is made (a process-wide setting, not ours to change), so the
    client's instrumentation object is replaced by a disabled one; an elasticsearch-py without it is left as
    it is (tests/unit/test_tracing_checks.py fails if that object moves)."""
    try:
        from elasticsearch._otel import OpenTelemetry
    except ImportError:  # pragma: no cover - an elasticsearch-py without its OpenTelemetry module
        return es
    if isinstance(getattr(es, "_otel", None), OpenTelemetry):
        es._otel = OpenTelemetry(enabled=False)
    return es
