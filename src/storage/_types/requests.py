"""One request type per operation: what a search, a page of a walk, an answer and an ingest ask for. Pure.

The client's methods spell the same keywords out (``SearchClient.search(query, *, mode=..., ...)``: a test
pins that they agree) and build one of these, which the services below the client take. ``None`` means "the
client's setting". Frozen: a request can be kept, logged or sent again as it is —
``client.search(**request.arguments())``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, fields
from typing import Any, Literal

from .._dsl.aggregations import FacetSpec
from .._dsl.filters import FilterInput
from .._fusion.methods import FusionMethod
from .models import Document, IndexProgress, SearchMode
from .prompt import AnswerPrompt

__all__ = [
    "AnswerRequest",
    "IngestRequest",
    "PageRequest",
    "ProgressCallback",
    "QuerySyntax",
    "RoundTrip",
    "SearchRequest",
]

#: ``plain``: the text as words and "phrases" (default); ``boolean``: the query syntax of storage._dsl.syntax.
QuerySyntax = Literal["plain", "boolean"]
#: How a hybrid search reaches Elasticsearch: two concurrent requests, or one ``_msearch``.
RoundTrip = Literal["parallel", "msearch"]
#: Called with an :class:`IndexProgress` as documents are embedded and written.
ProgressCallback = Callable[[IndexProgress], None]


class _Arguments:
    """``arguments()``: the request's fields, as the client method of its operation takes them."""

    def arguments(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}  # type: ignore[arg-type]


@dataclass(frozen=True)
class SearchRequest(_Arguments):
    """Everything one search asks for (see :meth:`SearchClient.search`)."""

    query: str
    _: KW_ONLY
    #: ``hybrid`` (both legs, fused), ``bm25`` or ``knn``.
    mode: SearchMode = "hybrid"
    #: One filter model for both legs: ``{"ticker": "AAPL", "published_at": {"gte": "2024-01-01"}}``.
    filters: FilterInput = None
    limit: int = 10
    offset: int = 0
    #: The tenant every result belongs to (required by a multi-tenant client).
    tenant_id: str | None = None
    fusion: FusionMethod | None = None
    rrf_k: int | None = None
    weights: Mapping[str, float] | None = None
    #: Candidates per leg fused; ``offset + limit`` must fit inside it.
    window: int | None = None
    num_candidates: int | None = None
    similarity: float | None = None
    #: Every shown hit's ``similarity``, also of the hits the kNN leg did not reach (one more kNN request,
    #: restricted to them, alongside the page's fetch); ``hybrid`` or ``knn`` mode.
    similarities: bool = False
    #: The query's vector, made with the client's embedding model (its length is checked): the kNN leg searches
    #: it instead of embedding the text; a ``knn`` search with it needs no text.
    query_vector: Sequence[float] | None = None
    #: A failed leg (or partial shards) raises instead of degrading the result.
    strict: bool = False
    highlight: bool = True
    #: Explicit index or alias names (comma-separated) instead of the client's alias.
    index: str | None = None
    #: Retry an empty BM25 leg with fuzzy matching.
    recover: bool = False
    #: Wider filter sets tried in order while nothing is found (the tenant is kept in each).
    scopes: Sequence[FilterInput] | None = None
    round_trip: RoundTrip | None = None
    syntax: QuerySyntax = "plain"
    rerank: bool | None = None
    rerank_candidates: int | None = None
    #: Counts over what the query matched, computed alongside the legs (``storage._dsl.aggregations``): ``"ticker"``,
    #: ``"published_at:month"``, ``"metadata.region"``, or :class:`~storage.types.FacetSpec` objects.
    facets: Sequence[str | FacetSpec] | None = None
    #: Collapse the ranked list to the best ``per_group`` hits of each value of this field (``ticker``,
    #: ``source``, ``doc_type`` or ``metadata.<key>``); ``limit`` and ``offset`` then count groups.
    group_by: str | None = None
    per_group: int = 1
    #: 0 (today's order) to 1: maximal marginal relevance over the ranked window, so near-duplicates do not
    #: fill a page.
    diversity: float = 0.0


@dataclass(frozen=True)
class PageRequest(_Arguments):
    """One page of a stable walk through the fused results (see :meth:`SearchClient.search_page`)."""

    query: str
    _: KW_ONLY
    #: ``page.next_cursor`` of the previous page; None starts a walk.
    cursor: str | None = None
    mode: SearchMode = "hybrid"
    filters: FilterInput = None
    tenant_id: str | None = None
    #: Hits per page (groups, with ``group_by``).
    limit: int = 10
    #: Each leg's candidates fused into the walk's head (default ``settings.walk_window``).
    window: int | None = None
    fusion: FusionMethod | None = None
    rrf_k: int | None = None
    weights: Mapping[str, float] | None = None
    highlight: bool = True
    index: str | None = None
    syntax: QuerySyntax = "plain"
    #: Walk groups instead of hits (see :meth:`SearchClient.search_page`): ``limit`` counts groups, and
    #: a group never comes back on a later page.
    group_by: str | None = None
    per_group: int = 1


@dataclass(frozen=True)
class AnswerRequest(_Arguments):
    """An answer with citations (see :meth:`SearchClient.answer`)."""

    question: str
    _: KW_ONLY
    mode: SearchMode = "hybrid"
    filters: FilterInput = None
    tenant_id: str | None = None
    #: Hits retrieved for the context (default ``settings.answer_limit``).
    limit: int | None = None
    rerank: bool | None = None
    #: The context's characters at most (default ``settings.answer_context_chars``).
    max_context_chars: int | None = None
    #: The whole call's deadline (default ``settings.answer_timeout_s``).
    timeout_s: float | None = None
    strict: bool = False
    index: str | None = None
    prompt: AnswerPrompt | None = None
    #: 0 to 1: the context's entries chosen by maximal marginal relevance (fewer copies of one story).
    diversity: float = 0.0


@dataclass(frozen=True)
class IngestRequest(_Arguments):
    """Documents to embed and index (see :meth:`SearchClient.index_documents`)."""

    documents: Iterable[Document | Mapping[str, Any]]
    _: KW_ONLY
    #: Wait until the documents are searchable.
    refresh: bool = False
    progress: ProgressCallback | None = None
    #: Another index (a new version) or alias to write to; default the client's alias.
    index: str | None = None
    #: Stamp every document with this tenant (a document of another tenant is refused).
    tenant_id: str | None = None
    #: ``report``: an invalid document is failed and the others indexed; ``raise``: the first one raises and
    #: nothing is sent.
    on_invalid: Literal["report", "raise"] = "report"
    #: False: write only documents whose id the index does not hold (Elasticsearch's ``create``: atomic, so two
    #: writers racing on one id cannot both win); one it holds is reported failed with reason ``exists``.
    overwrite: bool = True
    #: True: write as a bulk load (refresh off while writing, restored, then merged to one segment per shard);
    #: None: when nothing was ever written to the index (an initial load; merged from 10,000 documents);
    #: False: never (storage._indexing.bulk_load).
    bulk_load: bool | None = None
