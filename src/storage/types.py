"""The value types the client takes and returns, beyond the few at the root of ``storage``: the parts of a
response (legs, degradation, completeness, rerank, shards, facets, groups, passages), an answer's parts and
events, the reports of writes and re-embedding, the request value objects
(``client.search(**SearchRequest(...).arguments())``), the breakers' status and the resilience policy. All
frozen."""

from ._dsl.aggregations import FacetSpec
from ._transport.resilience import ResiliencePolicy
from ._types.answers import (
    AnswerDelta,
    AnswerDone,
    AnswerEntry,
    AnswerEvent,
    AnswerStatus,
    AnswerTimings,
    AnswerUsage,
)
from ._types.models import FailedDocument, IndexProgress, ReembedReport, SearchMode, TuneReport, TuneRow
from ._types.prompt import AnswerPrompt
from ._types.requests import (
    AnswerRequest,
    IngestRequest,
    PageRequest,
    ProgressCallback,
    QuerySyntax,
    RoundTrip,
    SearchRequest,
)
from ._types.results import (
    Completeness,
    Degradation,
    Facet,
    FacetBucket,
    FacetReport,
    HitGroup,
    LegReport,
    Passage,
    RerankReport,
    ScoreExplanation,
    ShardReport,
)
from ._types.status import BreakerStatus, ClusterHealth, Health, IndexHealth

__all__ = [
    "AnswerDelta",
    "AnswerDone",
    "AnswerEntry",
    "AnswerEvent",
    "AnswerPrompt",
    "AnswerRequest",
    "AnswerStatus",
    "AnswerTimings",
    "AnswerUsage",
    "BreakerStatus",
    "ClusterHealth",
    "Completeness",
    "Degradation",
    "Facet",
    "FacetBucket",
    "FacetReport",
    "FacetSpec",
    "FailedDocument",
    "Health",
    "HitGroup",
    "IndexHealth",
    "IndexProgress",
    "IngestRequest",
    "LegReport",
    "PageRequest",
    "Passage",
    "ProgressCallback",
    "QuerySyntax",
    "ReembedReport",
    "RerankReport",
    "ResiliencePolicy",
    "RoundTrip",
    "ScoreExplanation",
    "SearchMode",
    "SearchRequest",
    "ShardReport",
    "TuneReport",
    "TuneRow",
]
