"""Every error ``storage`` raises. Nothing from elasticsearch, tenacity or pybreaker leaks past the API.

::

    SearchError                         base; .reason is a short machine tag (e.g. "timeout")
    ├── ConfigurationError              wrong set-up, found at start-up
    │   ├── ElasticsearchNotConfigured  no ES_URL; the message says how to start a local one
    │   ├── IndexMismatch               the index was built otherwise than this client: reembed() moves it
    │   │   ├── DimensionMismatch       its vectors have another length than the embedder's
    │   │   ├── ModelMismatch           another model built it (same length or not); writes are refused
    │   │   └── PassagesMismatch        it was cut into passages otherwise than the client's setting
    │   ├── AnalyzerUnavailable         the configured analyzer (ES_ANALYZER) does not exist on the server;
    │   │                               raised by ensure_index() before anything is created
    │   ├── IncompatibleServer          client and server majors cannot talk (9.x client, 8.x server)
    │   ├── AuthenticationFailed        401: credentials rejected (wrong, expired, revoked); never retried
    │   ├── AccessDenied                403: the credentials lack a privilege for this index or action
    │   └── TLSFailed                   the server's certificate could not be verified (or TLS mismatch)
    ├── UsageError                      the calling code's mistake: nothing was sent, no breaker counts it
    │   ├── ClientClosed                the SearchClient was closed (or never opened)
    │   └── WrongEventLoop              the SearchClient was used on an event loop other than its own
    ├── InvalidQuery                    bad caller input: empty query, unknown filter field, bad range;
    │   │                               raised before any request is sent
    │   └── QuerySyntaxError            (storage._dsl.syntax) the opt-in query syntax; .position, .token
    ├── InvalidDocument                 a document given to index_documents is invalid (.position);
    │                                   raised before any request is sent
    ├── DocumentsNotIndexed             a framework store's write left documents out (.failed: each one's
    │                                   id and reason; .indexed: the others, which were written)
    ├── IngestInterrupted               the documents given raised part-way: .report accounts for every one
    │                                   read before (indexed, failed, not sent); __cause__ is the input's
    ├── IndexNotFound                   the index / alias does not exist (call ensure_index())
    ├── CursorExpired                   a deep-paging walk's point-in-time expired: start the walk again
    ├── PartialResults                  some shards did not answer (failed or timed out) and partial
    │                                   results were not acceptable: strict=True, or a deep-paging walk;
    │                                   .shards maps leg -> ShardReport
    ├── DependencyUnavailable           NO RESPONSE from a dependency: refused, reset, timeout (transient)
    │   ├── CircuitOpen                 our breaker is open: failed fast, nothing was sent
    │   └── Overloaded                  our concurrency bound is full: failed fast, nothing was sent
    ├── DependencyError                 an ERROR RESPONSE: the dependency answered 4xx/5xx or garbage;
    │   │                               .status; .transient for 429/502/503/504
    │   └── ContextTooLong              the chat model's window is smaller than the answer's prompt
    └── SearchFailed                    every leg of a hybrid search failed (reason all_legs_failed), or one
                                        did in a strict search (leg_failed); .leg_errors: leg -> its error

``dependency`` on the transport errors is ``"elasticsearch"``, ``"embeddings"``, ``"reranker"`` or ``"llm"``.
Model-provider errors (``embeddings.ProviderError``) are mapped onto DependencyUnavailable /
DependencyError at the storage boundary, with the original as ``__cause__``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

__all__ = [
    "AccessDenied",
    "AnalyzerUnavailable",
    "AuthenticationFailed",
    "CircuitOpen",
    "ClientClosed",
    "ConfigurationError",
    "ContextTooLong",
    "CursorExpired",
    "DependencyError",
    "DependencyUnavailable",
    "DimensionMismatch",
    "DocumentsNotIndexed",
    "ElasticsearchNotConfigured",
    "IncompatibleServer",
    "IndexMismatch",
    "IndexNotFound",
    "IngestInterrupted",
    "InvalidDocument",
    "InvalidQuery",
    "ModelMismatch",
    "Overloaded",
    "PartialResults",
    "PassagesMismatch",
    "SearchError",
    "SearchFailed",
    "TLSFailed",
    "UsageError",
    "WrongEventLoop",
]

Dependency = Literal["elasticsearch", "embeddings", "reranker", "llm", "telemetry"]
#: The model providers (package ``embeddings``), each behind its own resilience stack.
ProviderDependency = Literal["embeddings", "reranker", "llm"]


class SearchError(Exception):
    """Base of every error raised by ``storage``."""

    reason: str = "error"


class ConfigurationError(SearchError):
    """The client or the index is set up wrongly."""

    reason = "configuration"


class ElasticsearchNotConfigured(ConfigurationError):
    """No Elasticsearch URL was given."""

    def __init__(self) -> None:
        super().__init__(
            "No Elasticsearch configured: set ES_URL (e.g. ES_URL=http://127.0.0.1:9200), or start a local one "
            "with `python -m storage.local_es start` (no Docker; it prints the ES_URL to export), or with Docker: "
            "`hybrid-search compose > docker-compose.yml && docker compose up -d`."
        )


class IndexMismatch(ConfigurationError):
    """The index was built otherwise than this client reads and writes it: ``reembed()`` (or
    ``hybrid-search reembed``) builds a version this client fits and moves the alias, with no downtime."""

    reason = "index_mismatch"


class DimensionMismatch(IndexMismatch):
    """The index holds vectors of another length than the embedder produces."""

    reason = "dimension_mismatch"


class ModelMismatch(IndexMismatch):
    """The index's vectors come from another embedding model than the client's (of the same length or not):
    never mixed. In a hybrid search the kNN leg fails with this (the result is BM25 only, degraded); a write is
    refused."""

    reason = "model_mismatch"


class PassagesMismatch(IndexMismatch):
    """The index was built with other passages (or none) than the passage setting this client was given
    explicitly (``ES_PASSAGES``, ``ES_PASSAGE_TOKENS``...). ``reembed()`` moves it."""

    reason = "passages_mismatch"


class AnalyzerUnavailable(ConfigurationError):
    """The analyzer configured for ``title``/``text`` does not exist on this server (nothing was created)."""

    reason = "analyzer_unavailable"


class IncompatibleServer(ConfigurationError):
    """The installed ``elasticsearch`` client cannot talk to this server's major version."""

    reason = "incompatible_server"


class AuthenticationFailed(ConfigurationError):
    """Elasticsearch rejected the credentials (401). The message never contains them."""

    reason = "authentication_failed"


class AccessDenied(ConfigurationError):
    """The credentials are valid but lack a privilege for this index or action (403)."""

    reason = "access_denied"


class TLSFailed(ConfigurationError):
    """TLS could not be established: certificate verification failed, or the scheme does not match."""

    reason = "tls_failed"


class UsageError(SearchError):
    """The client was used in a way it cannot be: a mistake in the calling code, not in the set-up or the
    input; nothing was sent, and no breaker counts it."""

    reason = "usage"


class ClientClosed(UsageError):
    """The client is closed (or was never opened)."""

    reason = "client_closed"


class WrongEventLoop(UsageError):
    """The client was called on an event loop other than the one it lives on (its connections are bound to
    that loop). Nothing was sent."""

    reason = "wrong_event_loop"


class InvalidQuery(SearchError):
    """The caller's input is invalid; nothing was sent."""

    reason = "invalid_query"


class IndexNotFound(SearchError):
    """The index or alias does not exist (``.index`` names it when known)."""

    reason = "index_not_found"

    def __init__(self, message: str, *, index: str | None = None) -> None:
        super().__init__(message)
        self.index = index

    @classmethod
    def named(cls, index: str | None) -> IndexNotFound:
        """The error for ``index``, saying how the library creates it."""
        what = f"index {index!r}" if index else "the index"
        return cls(f"{what} does not exist: create it with `await client.ensure_index()`", index=index)


class CursorExpired(SearchError):
    """A deep-paging cursor's point-in-time has expired (or was closed): start the walk again."""

    reason = "cursor_expired"


class PartialResults(SearchError):
    """Some shards did not answer and the caller did not accept partial results (``strict=True``, or a
    deep-paging walk, whose order must not change). ``.shards``: leg -> its ``ShardReport``."""

    reason = "partial_results"

    def __init__(self, message: str, *, shards: Mapping[str, object]) -> None:
        super().__init__(message)
        self.shards = dict(shards)


class DependencyUnavailable(SearchError):
    """No response from a dependency (refused, reset, timed out). Transient."""

    reason = "connection_error"
    transient = True

    def __init__(self, message: str, *, dependency: Dependency, reason: str | None = None) -> None:
        super().__init__(message)
        self.dependency = dependency
        if reason is not None:
            self.reason = reason


class CircuitOpen(DependencyUnavailable):
    """The dependency's circuit breaker is open: the call failed fast without a request."""

    reason = "circuit_open"

    def __init__(self, message: str, *, dependency: Dependency) -> None:
        super().__init__(message, dependency=dependency, reason="circuit_open")


class Overloaded(DependencyUnavailable):
    """Too many calls in flight to this dependency; the call failed fast without a request."""

    reason = "overloaded"

    def __init__(self, message: str, *, dependency: Dependency) -> None:
        super().__init__(message, dependency=dependency, reason="overloaded")


#: Error responses worth retrying (rate limited, bad gateway, unavailable, gateway timeout).
TRANSIENT_STATUSES = frozenset({429, 502, 503, 504})


class DependencyError(SearchError):
    """A dependency answered with an error (or with something that is not a valid answer)."""

    reason = "http_error"

    def __init__(
        self,
        message: str,
        *,
        dependency: Dependency,
        status: int | None = None,
        reason: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.dependency = dependency
        self.status = status
        self.retry_after = retry_after
        self.transient = status in TRANSIENT_STATUSES
        if reason is not None:
            self.reason = reason


class ContextTooLong(DependencyError):
    """The chat model refused the answer's prompt: the context does not fit the window the server really has
    (set ``LLM_CONTEXT_TOKENS`` to it, or lower ``ES_ANSWER_CONTEXT_CHARS``)."""

    reason = "context_too_long"


class SearchFailed(SearchError):
    """The search could not produce results: every leg failed (``reason`` ``all_legs_failed``), or a leg failed
    in a strict search (``leg_failed``). ``.leg_errors`` maps each failed leg to its error."""

    reason = "all_legs_failed"

    def __init__(self, message: str, *, leg_errors: Mapping[str, SearchError], every_leg: bool = True) -> None:
        super().__init__(message)
        self.leg_errors = dict(leg_errors)
        if not every_leg:
            self.reason = "leg_failed"


class InvalidDocument(SearchError):
    """A document given to ``index_documents`` is invalid; nothing was sent. ``.position`` names it."""

    reason = "invalid_document"

    def __init__(self, message: str, *, position: int | None = None) -> None:
        super().__init__(message)
        self.position = position


class IngestInterrupted(SearchError):
    """The documents given to ``index_documents`` raised an error part-way (a generator that failed): the
    ingest stopped there. ``.report`` accounts for every document read before it — indexed, failed, or
    not sent — and ``__cause__`` is the input's own error. Re-sending is safe (ids are explicit)."""

    reason = "input_failed"

    def __init__(self, message: str, *, report: Any) -> None:
        super().__init__(message)
        self.report = report


class DocumentsNotIndexed(SearchError):
    """A write that must index every document it was given (a framework store's) left some out: ``.failed``
    names each (id, reason, detail; see ``FailedDocument``), ``.indexed`` the ids that were written."""

    reason = "not_indexed"

    def __init__(self, failed: Sequence[Any], *, indexed: Sequence[str] = ()) -> None:
        first = failed[0] if failed else None
        what = f"{getattr(first, 'id', '?')}: {getattr(first, 'reason', '?')} {getattr(first, 'detail', '')}".strip()
        super().__init__(f"{len(failed)} document(s) not indexed (first {what}); {len(indexed)} indexed")
        self.failed = list(failed)
        self.indexed = list(indexed)
