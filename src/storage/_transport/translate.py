"""Translation of third-party exceptions into our error tree (one place, so nothing foreign leaks)."""

from __future__ import annotations

import importlib.metadata
import ssl
from collections.abc import Mapping
from typing import Any, Literal

import elasticsearch
from elastic_transport import ConnectionTimeout, SerializationError, TlsError, TransportError

from embeddings import ContextTooLong as ProviderContextTooLong
from embeddings import (
    InvalidEmbedding,
    InvalidResponse,
    ProviderConfigError,
    ProviderError,
    ProviderResponseError,
    ProviderUnavailable,
)

from .._dsl.text import clip
from .._errors import (
    AccessDenied,
    AuthenticationFailed,
    ConfigurationError,
    ContextTooLong,
    DependencyError,
    DependencyUnavailable,
    IncompatibleServer,
    IndexNotFound,
    InvalidQuery,
    ProviderDependency,
    SearchError,
    TLSFailed,
)

__all__ = [
    "error_reason",
    "error_type",
    "incompatible_server",
    "map_es_error",
    "map_provider_error",
    "msearch_item_error",
    "shards_unavailable",
    "timeout_error",
]


_CLIENT_VERSION = importlib.metadata.version("elasticsearch")


def _retry_after(headers: Any) -> float | None:
    try:
        value = headers.get("retry-after") if headers is not None else None
        return max(float(value), 0.0) if value is not None else None
    except (TypeError, ValueError):
        return None


def error_reason(body: Any) -> str:
    """The ``error.reason`` of an Elasticsearch error body (the whole body as text when it has none)."""
    if isinstance(body, Mapping) and isinstance(body.get("error"), Mapping):
        return str(body["error"].get("reason", body["error"]))
    return str(body)


def error_type(body: Any) -> str | None:
    if isinstance(body, Mapping) and isinstance(body.get("error"), Mapping):
        value = body["error"].get("type")
        return str(value) if value is not None else None
    return None


def _missing_index(body: Any) -> str | None:
    """The index an ``index_not_found_exception`` names."""
    error = body.get("error") if isinstance(body, Mapping) else None
    index = error.get("index") if isinstance(error, Mapping) else None
    return str(index) if index else None


def _root_cause(body: Any) -> str:
    """The first root cause, which often says more than the top-level type (e.g. an expired PIT)."""
    try:
        cause = body["error"]["root_cause"][0]
        return f" ({cause['type']}: {clip(str(cause.get('reason', '')), 300)})"
    except (KeyError, IndexError, TypeError):
        return ""


def _root(exc: BaseException) -> BaseException:
    seen = exc
    for _ in range(10):
        nxt = seen.__cause__ or seen.__context__
        if nxt is None:
            break
        seen = nxt
    return seen


def _tls_cause(exc: BaseException) -> bool:
    """Certificate verification and fingerprint pinning failures, however the transport wrapped them."""
    cause: BaseException | None = exc
    for _ in range(10):
        if cause is None:
            return False
        if isinstance(cause, ssl.SSLError) or type(cause).__name__ in ("ServerFingerprintMismatch", "ClientSSLError"):
            return True
        cause = cause.__cause__ or cause.__context__
    return False


def _chain_text(exc: BaseException) -> str:
    """Every message along the exception's cause chain, lower case."""
    parts, seen = [], exc
    for _ in range(10):
        parts.append(str(seen))
        nxt = seen.__cause__ or seen.__context__
        if nxt is None:
            break
        seen = nxt
    return " ".join(parts).lower()


def _first_line(exc: BaseException) -> str:
    return clip((str(exc).splitlines() or [type(exc).__name__])[0], 300)


def incompatible_server(body: Any) -> IncompatibleServer | None:
    """The 9.x Python client sends ``compatible-with=9`` on every request; an 8.x server rejects it with a
    ``media_type_header_exception`` (the 8.x client works with both, through REST API compatibility)."""
    if error_type(body) != "media_type_header_exception":
        return None
    return IncompatibleServer(
        f"this Elasticsearch server rejects the client's API version{_root_cause(body)}: the installed "
        f"`elasticsearch` Python client is {_CLIENT_VERSION}. Clients SearchClient.from_settings() builds adapt "
        "to the server; for an AsyncElasticsearch you build yourself, pass "
        "transport_class=storage.CompatibleTransport (or install the 8.x client: "
        "`pip install 'elasticsearch[async]>=8.14,<9'`, which also works with 9.x servers)"
    )


#: What a refused connection's message says to do about it.
START_ONE = (
    "Is it running? Start a local one with `python -m storage.local_es start` (no Docker; it prints the ES_URL "
    "to export), or set ES_URL to yours"
)
_PLAIN_HTTP = ("wrong version number", "wrong_version_number", "record layer failure", "packet length too long")


def map_es_error(exc: BaseException, *, where: str | None = None) -> SearchError:
    """Map an elasticsearch / elastic-transport exception (or anything unexpected) onto our tree. ``where``:
    the node URLs the client talks to, for the messages of errors that are about reaching them."""
    at = f" at {where}" if where else ""
    if isinstance(exc, SearchError):
        return exc
    if isinstance(exc, elasticsearch.UnsupportedProductError):  # an ApiError subclass: test it first
        return DependencyError(
            f"the server is not Elasticsearch (or not a supported version): {exc.message}",
            dependency="elasticsearch",
            reason="bad_response",
        )
    if isinstance(exc, elasticsearch.AuthenticationException):
        return AuthenticationFailed(
            f"Elasticsearch rejected the credentials (401{_root_cause(exc.body)}): check ES_API_KEY, or "
            "ES_USERNAME / ES_PASSWORD (a key may also be expired or revoked)"
        )
    if isinstance(exc, elasticsearch.AuthorizationException):
        return AccessDenied(f"Elasticsearch refused the action (403{_root_cause(exc.body)})")
    if isinstance(exc, TlsError) or _tls_cause(exc):
        if any(mark in _chain_text(exc) for mark in _PLAIN_HTTP):
            return TLSFailed(
                f"the server{at} answers plain HTTP, not TLS: use http:// in ES_URL (TLS settings such as "
                "ES_CA_CERTS do not apply to it)"
            )
        return TLSFailed(
            f"TLS with Elasticsearch failed: {_first_line(exc)}. Set ES_CA_CERTS to the cluster's CA certificate "
            "(or ES_SSL_ASSERT_FINGERPRINT), and use https:// for a TLS port"
        )
    if isinstance(exc, elasticsearch.ApiError):
        status = exc.meta.status if exc.meta is not None else None
        if (mismatch := incompatible_server(exc.body)) is not None:
            return mismatch
        if status == 404 and error_type(exc.body) == "index_not_found_exception":
            return IndexNotFound.named(_missing_index(exc.body))
        if error_type(exc.body) == "search_phase_execution_exception" and status in (503, 504):
            return shards_unavailable(
                f"Elasticsearch refused a search with missing shards ({status}): {exc.message}", status
            )
        return DependencyError(
            f"Elasticsearch answered {status}: {exc.message}{_root_cause(exc.body)}",
            dependency="elasticsearch",
            status=status,
            reason="http_error",
            retry_after=_retry_after(exc.meta.headers if exc.meta is not None else None),
        )
    if isinstance(exc, SerializationError):
        why = exc.errors[0] if exc.errors else exc
        if exc.message.startswith("Unable to serialize"):  # (elastic-transport's dumps): the caller's values
            return InvalidQuery(
                f"a value of the request cannot be written as JSON ({type(why).__name__}: {_first_line(why)}); "
                "nothing was sent"
            )
        return DependencyError(
            f"Elasticsearch sent a response that could not be decoded ({type(why).__name__}: {_first_line(why)})"
            f": {clip(exc.message, 300)}",
            dependency="elasticsearch",
            reason="bad_response",
        )
    if isinstance(exc, ConnectionTimeout):
        return DependencyUnavailable(f"Elasticsearch timed out: {exc}", dependency="elasticsearch", reason="timeout")
    if isinstance(exc, TransportError):
        cause = _root(exc)
        detail = f"{type(cause).__name__}: {_first_line(cause)}" if cause is not exc else _first_line(exc)
        hint = " (an https:// port reached with http:// looks like this)" if "disconnected" in detail.lower() else ""
        refused = "refused" in detail.lower() or "cannot connect" in detail.lower()
        advice = f". {START_ONE}" if refused else ""
        return DependencyUnavailable(
            f"cannot reach Elasticsearch{at}: {detail}{hint}{advice}",
            dependency="elasticsearch",
            reason="connection_error",
        )
    if isinstance(exc, TimeoutError):
        return DependencyUnavailable("Elasticsearch call timed out", dependency="elasticsearch", reason="timeout")
    if isinstance(exc, (KeyError, TypeError, ValueError)):
        return DependencyError(
            f"unexpected response shape from Elasticsearch: {type(exc).__name__}: {exc}",
            dependency="elasticsearch",
            reason="bad_response",
        )
    return DependencyUnavailable(
        f"Elasticsearch call failed: {type(exc).__name__}: {exc}", dependency="elasticsearch", reason="error"
    )


def shards_unavailable(message: str, status: int | None) -> DependencyError:
    """Elasticsearch refused a search because shards are missing (``allow_partial_search_results=false``,
    or a point-in-time over them). A definitive answer about the data, not a sick transport: neither
    retried (a shard recovers in minutes, not in a backoff) nor counted by the breaker (one red index must
    not fail every search of the client fast)."""
    err = DependencyError(message, dependency="elasticsearch", status=status, reason="shards_unavailable")
    err.transient = False
    return err


def map_provider_error(exc: ProviderError, dependency: ProviderDependency) -> SearchError:
    """Map a model-provider error onto our tree (the original stays as ``__cause__``)."""
    what = {"embeddings": "embedding provider", "reranker": "reranker", "llm": "chat model"}[dependency]
    if isinstance(exc, ProviderConfigError):
        return ConfigurationError(str(exc))
    if isinstance(exc, ProviderUnavailable):
        reason = {"timeout": "timeout", "disconnected": "disconnected"}.get(exc.kind, "connection_error")
        return DependencyUnavailable(f"{what} unavailable: {exc}", dependency=dependency, reason=reason)
    if isinstance(exc, ProviderContextTooLong):
        return ContextTooLong(
            f"{what} refused the prompt: it does not fit the model's context window ({exc}). Set LLM_CONTEXT_TOKENS "
            "to the window the server really has (the answer's context is then cut to fit), or lower "
            "ES_ANSWER_CONTEXT_CHARS",
            dependency=dependency,
            status=exc.status,
            reason="context_too_long",
        )
    if isinstance(exc, ProviderResponseError):
        return DependencyError(
            f"{what} answered {exc.status}: {exc}",
            dependency=dependency,
            status=exc.status,
            reason="http_error",
            retry_after=exc.retry_after,
        )
    if isinstance(exc, InvalidEmbedding):
        return DependencyError(f"invalid embedding: {exc}", dependency=dependency, reason="bad_response")
    if isinstance(exc, InvalidResponse):
        return DependencyError(f"invalid {what} answer: {exc}", dependency=dependency, reason="bad_response")
    return DependencyError(f"{what} failed: {exc}", dependency=dependency, reason="error")


def msearch_item_error(item: Mapping[str, Any]) -> SearchError:
    """One failed item of an ``_msearch`` answer (the others may have succeeded)."""
    status = item.get("status")
    error = item.get("error")
    kind = error_type({"error": error}) if isinstance(error, Mapping) else None
    if status == 404 and kind == "index_not_found_exception":
        return IndexNotFound.named(_missing_index(item))
    message = f"Elasticsearch answered {status} for this leg: {kind or 'error'}: {error_reason(item)}"
    if kind == "search_phase_execution_exception" and status in (503, 504):
        return shards_unavailable(message, status)
    return DependencyError(
        message, dependency="elasticsearch", status=status if isinstance(status, int) else None, reason="http_error"
    )


def timeout_error(
    leg: str, dependency: Literal["elasticsearch", "embeddings", "reranker", "llm"], budget_s: float
) -> SearchError:
    what = "stage" if leg in ("rerank", "answer") else "leg"
    return DependencyUnavailable(
        f"{leg} {what} exceeded its {budget_s:g} s budget while waiting on {dependency}",
        dependency=dependency,
        reason="timeout",
    )
