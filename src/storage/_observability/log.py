"""Library logging etiquette: named loggers under ``storage``, a NullHandler, never handlers of our own.

Events carry ECS-style dotted fields in ``extra`` (``event.action``, ``search.*``, ``error.type``) so that
:func:`configure_ecs_logging` (opt-in, for applications) renders them as JSON documents Kibana can index.
No API keys, no vectors, and the raw query text only when ``log_query_text`` is enabled.
"""

from __future__ import annotations

import contextvars
import hashlib
import logging
import sys
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import IO, Any

__all__ = [
    "Events",
    "Observer",
    "configure_ecs_logging",
    "correlation_id",
    "event",
    "get_correlation_id",
    "query_hash",
]

#: Called with (level, message, fields) for an event, whatever the logging configuration (telemetry).
Observer = Callable[[int, str, dict[str, Any]], None]

logger = logging.getLogger("storage")
logger.addHandler(logging.NullHandler())

_correlation_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("storage_correlation_id", default=None)


def get_correlation_id() -> str | None:
    return _correlation_id.get()


@contextmanager
def correlation_id(value: str | None = None) -> Iterator[str]:
    """Tag every event logged inside the block (and in tasks it starts) with one correlation id."""
    cid = value or uuid.uuid4().hex
    token = _correlation_id.set(cid)
    try:
        yield cid
    finally:
        _correlation_id.reset(token)


def query_hash(text: str) -> str:
    """A short stable hash: lets operators group repeated queries without storing what users typed."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def event(
    level: int,
    message: str,
    action: str,
    fields: dict[str, Any],
    log: logging.Logger = logger,
    observers: Sequence[Observer] = (),
    stacklevel: int = 2,
) -> None:
    """One structured event: to ``log`` (if it is enabled for ``level``) and to ``observers`` (always)."""
    if not observers and not log.isEnabledFor(level):
        return
    extra: dict[str, Any] = {"event.action": action, "event.dataset": "storage." + action.split(".")[0]}
    cid = _correlation_id.get()
    if cid:
        extra["trace.correlation_id"] = cid
    extra.update(fields)
    for observer in list(observers):
        try:
            observer(level, message, extra)
        except Exception:  # an observer never breaks the caller
            log.debug("event observer failed", exc_info=True)
    if log.isEnabledFor(level):
        log.log(level, message, extra=extra, stacklevel=stacklevel)


class Events:
    """One client's events: every event goes to the logger, and to this client's observers only (its
    telemetry sink ships its own client's events, never another's)."""

    __slots__ = ("observers",)

    def __init__(self) -> None:
        self.observers: list[Observer] = []

    def add(self, observer: Observer) -> None:
        self.observers.append(observer)

    def remove(self, observer: Observer) -> None:
        if observer in self.observers:
            self.observers.remove(observer)

    def wanted(self, level: int, log: logging.Logger = logger) -> bool:
        """Would an event at ``level`` reach anyone (an observer, or a logger at that level)? Check it before
        assembling a large event's fields."""
        return bool(self.observers) or log.isEnabledFor(level)

    def emit(self, level: int, message: str, action: str, fields: dict[str, Any], log: logging.Logger = logger) -> None:
        event(level, message, action, fields, log, self.observers, stacklevel=3)


def configure_ecs_logging(
    level: int = logging.INFO, stream: IO[str] | None = None, logger_names: tuple[str, ...] = ("storage",)
) -> logging.Handler:
    """Opt-in for applications: ECS JSON lines on ``stream`` (stderr by default) for our loggers.

    Needs the ``ecs`` extra (``pip install hybrid-search-es[ecs]``). Returns the handler it added.
    """
    try:
        import ecs_logging
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise RuntimeError("configure_ecs_logging needs the 'ecs' extra: pip install 'hybrid-search-es[ecs]'") from exc
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(ecs_logging.StdlibFormatter(exclude_fields=["process", "log.original"]))
    for name in logger_names:
        lg = logging.getLogger(name)
        lg.addHandler(handler)
        lg.setLevel(level)
    return handler
