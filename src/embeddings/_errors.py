"""Errors raised by embedding providers.

::

    EmbeddingError                      base of everything an embedder raises
    ├── EmbeddingConfigError            wrong set-up, found at start-up: model file checksum, dimension
    │                                   mismatch between settings and model, missing API key
    ├── EmbeddingUnavailable            no response: connection refused or reset, timeout  (transient)
    ├── EmbeddingResponseError          the provider answered with an error status (.status, .retry_after);
    │                                   transient for 408/409/429/5xx, see .transient
    └── InvalidEmbedding                an answer that is not a valid embedding: wrong count, wrong
                                        dimension, NaN/inf, undecodable body (.input_index names the input)

A retry policy needs one test: ``isinstance(exc, EmbeddingUnavailable) or getattr(exc, "transient", False)``.
"""

from __future__ import annotations

__all__ = [
    "EmbeddingConfigError",
    "EmbeddingError",
    "EmbeddingResponseError",
    "EmbeddingUnavailable",
    "InvalidEmbedding",
]

#: HTTP statuses worth retrying: timeout, conflict (the SDKs treat it as a lock), rate limit, server errors.
TRANSIENT_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})


class EmbeddingError(Exception):
    """Base class: anything an embedder raises."""

    #: Whether trying again later may succeed.
    transient: bool = False


class EmbeddingConfigError(EmbeddingError):
    """The embedder is set up wrongly (found at start-up, before any document is touched)."""


class EmbeddingUnavailable(EmbeddingError):
    """No answer from the provider: connection refused or reset, or a timeout."""

    transient = True


class EmbeddingResponseError(EmbeddingError):
    """The provider answered with an error status."""

    def __init__(self, message: str, *, status: int, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after
        self.transient = status in TRANSIENT_STATUSES


class InvalidEmbedding(EmbeddingError):
    """An answer that is not a valid embedding for the inputs sent; nothing from it is used."""

    def __init__(self, message: str, *, input_index: int | None = None) -> None:
        super().__init__(message)
        self.input_index = input_index
