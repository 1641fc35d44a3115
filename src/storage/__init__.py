"""Hybrid search over Elasticsearch: BM25 ∥ kNN, fused in the client (works on the free Basic license).

The front door::

    from storage import Document, SearchClient

    async with SearchClient.from_settings() as client:
        await client.ensure_index()
        await client.index_documents([Document(id="1", title="...", text="...")], refresh=True)
        response = await client.search("revenue guidance cut", mode="hybrid", limit=10)
        answer = await client.answer("Why was the guidance cut?")   # needs a chat model (LLM_*)

Here: the client, its settings, a document, what a search, a page of a walk, an answer and an ingest return,
and every error (the tree is drawn in ``storage._errors``). The rest in namespaces: ``storage.filters`` (the
filter objects), ``storage.types`` (the other value types), ``storage.fusion`` (rank fusion as a library),
``storage.passages``, ``storage.evaluation`` (evaluate, tune), ``storage.agent``, ``storage.integrations``,
``storage.workbench``, ``storage.local_es``.
"""

from ._client import SearchClient
from ._dsl.syntax import QuerySyntaxError
from ._errors import (
    AccessDenied,
    AnalyzerUnavailable,
    AuthenticationFailed,
    CircuitOpen,
    ClientClosed,
    ConfigurationError,
    ContextTooLong,
    CursorExpired,
    DependencyError,
    DependencyUnavailable,
    DimensionMismatch,
    DocumentsNotIndexed,
    ElasticsearchNotConfigured,
    IncompatibleServer,
    IndexMismatch,
    IndexNotFound,
    IngestInterrupted,
    InvalidDocument,
    InvalidQuery,
    ModelMismatch,
    Overloaded,
    PartialResults,
    PassagesMismatch,
    SearchError,
    SearchFailed,
    TLSFailed,
    UsageError,
    WrongEventLoop,
)
from ._observability.log import configure_ecs_logging, correlation_id, query_hash
from ._settings import SearchSettings
from ._transport.compat import CompatibleTransport
from ._types.answers import Answer
from ._types.models import Document, IndexReport
from ._types.results import SearchHit, SearchPage, SearchResponse

__all__ = [
    "AccessDenied",
    "AnalyzerUnavailable",
    "Answer",
    "AuthenticationFailed",
    "CircuitOpen",
    "ClientClosed",
    "CompatibleTransport",
    "ConfigurationError",
    "ContextTooLong",
    "CursorExpired",
    "DependencyError",
    "DependencyUnavailable",
    "DimensionMismatch",
    "Document",
    "DocumentsNotIndexed",
    "ElasticsearchNotConfigured",
    "IncompatibleServer",
    "IndexMismatch",
    "IndexNotFound",
    "IndexReport",
    "IngestInterrupted",
    "InvalidDocument",
    "InvalidQuery",
    "ModelMismatch",
    "Overloaded",
    "PartialResults",
    "PassagesMismatch",
    "QuerySyntaxError",
    "SearchClient",
    "SearchError",
    "SearchFailed",
    "SearchHit",
    "SearchPage",
    "SearchResponse",
    "SearchSettings",
    "TLSFailed",
    "UsageError",
    "WrongEventLoop",
    "configure_ecs_logging",
    "correlation_id",
    "query_hash",
]
