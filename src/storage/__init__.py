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

from ._answer import AnswerPrompt
from ._client import ProgressCallback, QuerySyntax, SearchClient
from ._errors import (
    AccessDenied,
    AnalyzerUnavailable,
    AuthenticationFailed,
    CircuitOpen,
    ClientClosed,
    ConfigurationError,
    CursorExpired,
    DependencyError,
    DependencyUnavailable,
    DimensionMismatch,
    ElasticsearchNotConfigured,
    IncompatibleServer,
    IndexNotFound,
    InvalidDocument,
    InvalidQuery,
    ModelMismatch,
    Overloaded,
    PartialResults,
    SearchError,
    SearchFailed,
    TLSFailed,
)
from ._filters import Exists, Filter, Range, Term, Terms
from ._fusion import DEFAULT_RRF_K, FusedHit, FusionMethod, LegHit, fuse
from ._logging import configure_ecs_logging, correlation_id
from ._models import (
    Answer,
    AnswerDelta,
    AnswerDone,
    AnswerEntry,
    AnswerEvent,
    AnswerStatus,
    AnswerTimings,
    AnswerUsage,
    Document,
    FailedDocument,
    IndexProgress,
    IndexReport,
    LegReport,
    ReembedReport,
    RerankReport,
    SearchHit,
    SearchMode,
    SearchPage,
    SearchResponse,
    ShardReport,
    TuneReport,
    TuneRow,
)
from ._pipeline import SearchRequest
from ._settings import RoundTrip, SearchSettings
from ._syntax import QuerySyntaxError
from ._tune import Judgments, load_judgments, tune
from ._tuning import FusionSetting, default_grid

__all__ = [
    "DEFAULT_RRF_K",
    "AccessDenied",
    "AnalyzerUnavailable",
    "Answer",
    "AnswerDelta",
    "AnswerDone",
    "AnswerEntry",
    "AnswerEvent",
    "AnswerPrompt",
    "AnswerStatus",
    "AnswerTimings",
    "AnswerUsage",
    "AuthenticationFailed",
    "CircuitOpen",
    "ClientClosed",
    "ConfigurationError",
    "CursorExpired",
    "DependencyError",
    "DependencyUnavailable",
    "DimensionMismatch",
    "Document",
    "ElasticsearchNotConfigured",
    "Exists",
    "FailedDocument",
    "Filter",
    "FusedHit",
    "FusionMethod",
    "FusionSetting",
    "IncompatibleServer",
    "IndexNotFound",
    "IndexProgress",
    "IndexReport",
    "InvalidDocument",
    "InvalidQuery",
    "Judgments",
    "LegHit",
    "LegReport",
    "ModelMismatch",
    "Overloaded",
    "PartialResults",
    "ProgressCallback",
    "QuerySyntax",
    "QuerySyntaxError",
    "Range",
    "ReembedReport",
    "RerankReport",
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
    "configure_ecs_logging",
    "correlation_id",
    "default_grid",
    "fuse",
    "load_judgments",
    "tune",
]
