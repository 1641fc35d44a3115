"""Errors raised by model providers (embedders and rerankers).

::

    ProviderError                       base of everything a provider raises (alias: EmbeddingError)
    ├── ProviderConfigError             wrong set-up, found at start-up: dimension mismatch between
    │   │                               settings and model, missing API key or model, unknown local model
    │   │                               (alias: EmbeddingConfigError)
    │   ├── ModelUnavailable            a local model's files are not here and cannot be fetched; the
    │   │                               message says what to fetch and where to put it
    │   └── ModelIntegrityError         a local model's file (or its artifact) has the wrong size or sha256:
    │                                   tampered, truncated, another file; never loaded
    ├── ProviderUnavailable             no response (transient); .kind: refused, timeout, disconnected (the
    │                                   server closed the connection mid-request: crashed), unreachable
    │                                   (alias: EmbeddingUnavailable)
    ├── ProviderResponseError           the provider answered with an error status (.status, .retry_after);
    │                                   transient for 408/409/429/5xx, see .transient
    │                                   (alias: EmbeddingResponseError)
    └── InvalidResponse                 an answer that is not valid for the inputs sent: undecodable body,
        │                               wrong count, index out of range, NaN/inf (.input_index names the input)
        └── InvalidEmbedding            ... of an embedder: wrong count, wrong dimension, NaN/inf

The ``Embedding*`` names predate the rerankers and stay as the same classes, so ``except EmbeddingError``
keeps catching everything an embedder raises. A retry policy needs one test:
``isinstance(exc, ProviderUnavailable) or getattr(exc, "transient", False)``.
"""

from __future__ import annotations

from typing import Literal

__all__ = [
    "ContextTooLong",
    "EmbeddingConfigError",
    "EmbeddingError",
    "EmbeddingResponseError",
    "EmbeddingUnavailable",
    "InvalidEmbedding",
    "InvalidResponse",
    "ModelIntegrityError",
    "ModelUnavailable",
    "ProviderConfigError",
    "ProviderError",
    "ProviderResponseError",
    "ProviderUnavailable",
    "UnavailableKind",
    "unavailable",
]

#: HTTP statuses worth retrying: timeout, conflict (the SDKs treat it as a lock), rate limit, server errors.
TRANSIENT_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})


def retry_after(headers: object) -> float | None:
    """Seconds from a ``Retry-After`` header (any mapping-like headers, or None); None when absent or an HTTP
    date (rare for model APIs, and the backoff policy covers it)."""
    get = getattr(headers, "get", None)
    value = get("retry-after") if get is not None else None
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        return None


class ProviderError(Exception):
    """Base class: anything a model provider raises."""

    #: Whether trying again later may succeed.
    transient: bool = False


class ProviderConfigError(ProviderError):
    """The provider is set up wrongly (found at start-up, before any document is touched)."""


class ModelUnavailable(ProviderConfigError):
    """A local model's files are not here and could not be fetched. The message says what to fetch and where
    to put it."""


class ModelIntegrityError(ProviderConfigError):
    """A local model's file (or the artifact holding it) is not the pinned one: wrong size or sha256."""


UnavailableKind = Literal["refused", "timeout", "disconnected", "unreachable"]


class ProviderUnavailable(ProviderError):
    """No answer from the provider. ``kind`` says how: ``refused`` (nothing listens at the address),
    ``timeout``, ``disconnected`` (the server took the request and closed the connection without a whole
    answer: it crashed, or was stopped, mid-request), or ``unreachable`` (anything else: DNS, TLS, routing)."""

    transient = True

    def __init__(self, message: str, *, kind: UnavailableKind = "unreachable") -> None:
        super().__init__(message)
        self.kind = kind


class ProviderResponseError(ProviderError):
    """The provider answered with an error status."""

    def __init__(self, message: str, *, status: int, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after
        self.transient = status in TRANSIENT_STATUSES


class ContextTooLong(ProviderResponseError):
    """The chat model refused the prompt: it does not fit the window the server really has."""


class InvalidResponse(ProviderError):
    """An answer that is not valid for the inputs sent; nothing from it is used."""

    def __init__(self, message: str, *, input_index: int | None = None) -> None:
        super().__init__(message)
        self.input_index = input_index


class InvalidEmbedding(InvalidResponse):
    """An answer that is not a valid embedding for the inputs sent; nothing from it is used."""


# The names the embedders have always raised: the same classes.
EmbeddingError = ProviderError
EmbeddingConfigError = ProviderConfigError
EmbeddingUnavailable = ProviderUnavailable
EmbeddingResponseError = ProviderResponseError


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and its causes (``raise ... from`` and the implicit context), outermost first."""
    out: list[BaseException] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        out.append(current)
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return out


def unavailable(what: str, exc: BaseException, where: str | None = None) -> ProviderUnavailable:
    """A provider's failure to answer (``exc``: its SDK's or its HTTP transport's error) as a
    :class:`ProviderUnavailable` whose ``kind`` and message say how it failed and where: ``what`` names the
    provider ("chat model"), ``where`` its address."""
    chain = _chain(exc)
    names = [type(e).__name__ for e in chain]
    at = f" at {where}" if where else ""
    if any("Timeout" in name for name in names):
        return ProviderUnavailable(f"{what}{at} timed out ({names[0]})", kind="timeout")
    if any("refused" in str(e).lower() or isinstance(e, ConnectionRefusedError) for e in chain):
        return ProviderUnavailable(
            f"{what}{at} refused the connection: nothing is listening there (is the server running?)", kind="refused"
        )
    if any(name in ("RemoteProtocolError", "ReadError", "WriteError", "ConnectionResetError") for name in names):
        return ProviderUnavailable(
            f"{what}{at} closed the connection without a whole answer: the server crashed or was stopped "
            "mid-request (see its log)",
            kind="disconnected",
        )
    return ProviderUnavailable(f"{what}{at} unreachable: {names[0]}: {exc}", kind="unreachable")
