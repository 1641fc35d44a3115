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
    ├── ProviderUnavailable             no response: connection refused or reset, timeout  (transient)
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


class ProviderUnavailable(ProviderError):
    """No answer from the provider: connection refused or reset, or a timeout."""

    transient = True


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
