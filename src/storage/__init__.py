"""Hybrid search over Elasticsearch: BM25 ∥ kNN, fused in the client (works on the free Basic license).

The front door::

    from storage import Document, SearchClient

    async with SearchClient.from_settings() as client:
        await client.ensure_index()
        await client.index_documents([Document(id="1", title="...", text="...")], refresh=True)
        response = await client.search("revenue guidance cut", mode="hybrid", limit=10)
        answer = await client.answer("Why was the guidance cut?")   # needs a chat model (LLM_*)

    report = await storage.tune(client, "judged/", apply=True)   # fit the fusion to judged queries
"""

from ._answers import (
    Answer,
    AnswerDelta,
    AnswerDone,
    AnswerEntry,
    AnswerEvent,
    AnswerStatus,
    AnswerTimings,
    AnswerUsage,
)
from ._client import SearchClient
from ._compat import CompatibleTransport
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
    WrongEventLoop,
)
from ._facets import FacetSpec
from ._filters import AllOf, AnyOf, Exists, Filter, Not, Range, Term, Terms
from ._fusion import DEFAULT_RRF_K, FusedHit, FusionMethod, LegHit, fuse
from ._fusion_setting import FusionSetting, FusionSource
from ._logging import configure_ecs_logging, correlation_id, query_hash
from ._models import (
    Document,
    FailedDocument,
    IndexProgress,
    IndexReport,
    ReembedReport,
    SearchMode,
    TuneReport,
    TuneRow,
)
from ._prompt import AnswerPrompt
from ._requests import (
    AnswerRequest,
    IngestRequest,
    PageRequest,
    ProgressCallback,
    QuerySyntax,
    RoundTrip,
    SearchRequest,
)
from ._resilience import ResiliencePolicy
from ._results import (
    Facet,
    FacetBucket,
    HitGroup,
    LegReport,
    RerankReport,
    SearchHit,
    SearchPage,
    SearchResponse,
    ShardReport,
)
from ._settings import SearchSettings
from ._syntax import QuerySyntaxError
from .evaluation import Judgments, default_grid, load_judgments, tune

__all__ = [
    "DEFAULT_RRF_K",
    "AccessDenied",
    "AllOf",
    "AnalyzerUnavailable",
    "Answer",
    "AnswerDelta",
    "AnswerDone",
    "AnswerEntry",
    "AnswerEvent",
    "AnswerPrompt",
    "AnswerRequest",
    "AnswerStatus",
    "AnswerTimings",
    "AnswerUsage",
    "AnyOf",
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
    "Exists",
    "Facet",
    "FacetBucket",
    "FacetSpec",
    "FailedDocument",
    "Filter",
    "FusedHit",
    "FusionMethod",
    "FusionSetting",
    "FusionSource",
    "HitGroup",
    "IncompatibleServer",
    "IndexNotFound",
    "IndexProgress",
    "IndexReport",
    "IngestInterrupted",
    "IngestRequest",
    "InvalidDocument",
    "InvalidQuery",
    "Judgments",
    "LegHit",
    "LegReport",
    "ModelMismatch",
    "Not",
    "Overloaded",
    "PageRequest",
    "PartialResults",
    "PassagesMismatch",
    "ProgressCallback",
    "QuerySyntax",
    "QuerySyntaxError",
    "Range",
    "ReembedReport",
    "RerankReport",
    "ResiliencePolicy",
    "RoundTrip",
    "SearchClient",
    "SearchError",
    "SearchFailed",
    "SearchHit",
    "SearchMode",
    "SearchPage",
    "SearchRequest",
    "SearchResponse",
    "SearchSettings",
    "ShardReport",
    "TLSFailed",
    "Term",
    "Terms",
    "TuneReport",
    "TuneRow",
    "WrongEventLoop",
    "configure_ecs_logging",
    "correlation_id",
    "default_grid",
    "fuse",
    "load_judgments",
    "query_hash",
    "tune",
]
