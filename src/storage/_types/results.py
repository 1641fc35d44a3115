"""What a search returns: the response, its hits (with their provenance and best passages), each leg's
report, the rerank stage's, and a page of a deep-paging walk."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypedDict

from pydantic import BaseModel, ConfigDict, Field, computed_field

from .._fusion.setting import FusionSetting
from .models import Document, Leg, SearchMode, stored_document

__all__ = [
    "Completeness",
    "Degradation",
    "Facet",
    "FacetBucket",
    "FacetReport",
    "HighlightSource",
    "HitGroup",
    "LegReport",
    "Passage",
    "PassageFields",
    "RerankReport",
    "ScoreExplanation",
    "SearchHit",
    "SearchHitFields",
    "SearchPage",
    "SearchResponse",
    "ShardReport",
    "relevant",
    "similarity_floor",
]

#: What a hit's ``highlights`` are: ``bm25`` (query terms; the BM25 leg found the hit), ``followup`` (query
#: terms in a hit only the kNN leg found), ``passage`` (a kNN-only hit of a document read in passages: the
#: start of its best passage), ``snippet`` (no query term in it: the text's start).
HighlightSource = Literal["bm25", "followup", "passage", "snippet"]


class ShardReport(BaseModel):
    """Elasticsearch's ``_shards`` and ``timed_out`` for one request: how much of the index answered."""

    model_config = ConfigDict(frozen=True)

    total: int = 0
    successful: int = 0
    failed: int = 0
    skipped: int = 0
    #: The server-side ``timeout`` ran out: some shards returned what they had found so far.
    timed_out: bool = False
    #: The first shard failure's type and reason (e.g. ``no_shard_available_action_exception: ...``).
    failure: str | None = None

    @property
    def partial(self) -> bool:
        """Some shards did not answer (failed) or not fully (timed out): the hits may be incomplete."""
        return self.failed > 0 or self.timed_out

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> ShardReport | None:
        """From a search response body (None when it has no ``_shards``, e.g. a scripted peer). A report
        without failures is one of a few shapes (every shard answered, say 1 of 1) and the model is frozen:
        those are built once and shared (a search reads three reports; validating one costs ~3 µs)."""
        shards = body.get("_shards")
        if not isinstance(shards, Mapping):
            return None
        failures = shards.get("failures") or []
        key: tuple[object, ...] | None = None
        if not failures:
            key = (
                shards.get("total"),
                shards.get("successful"),
                shards.get("failed"),
                shards.get("skipped"),
                body.get("timed_out"),
            )
            known = _COMMON_REPORTS.get(key)  # (a list or an object here: TypeError, as int() below would)
            if known is not None:
                return known
        failure = None
        if failures and isinstance(failures[0], Mapping):
            reason = failures[0].get("reason")
            if isinstance(reason, Mapping):
                failure = f"{reason.get('type', 'error')}: {str(reason.get('reason', ''))[:200]}"
            else:
                failure = str(reason)[:200]
        report = cls(
            total=int(shards.get("total") or 0),
            successful=int(shards.get("successful") or 0),
            failed=int(shards.get("failed") or 0),
            skipped=int(shards.get("skipped") or 0),
            timed_out=bool(body.get("timed_out")),
            failure=failure,
        )
        if key is not None and len(_COMMON_REPORTS) < 64:
            _COMMON_REPORTS[key] = report
        return report


#: Shard reports without failures, by (total, successful, failed, skipped, timed_out) as Elasticsearch sent
#: them; bounded (a cluster has a few shard counts).
_COMMON_REPORTS: dict[tuple[object, ...], ShardReport] = {}


class LegReport(BaseModel):
    """What one leg did: hits returned, latency, and why it failed if it did."""

    model_config = ConfigDict(frozen=True)

    leg: Leg
    ok: bool
    hits: int = 0
    latency_ms: float = 0.0
    #: Elasticsearch's own ``took`` (server time) when the leg succeeded.
    took_ms: int | None = None
    #: kNN only: time spent embedding the query.
    embed_ms: float | None = None
    reason: str | None = None
    error: str | None = None
    #: How many shards answered (None when the leg failed before an answer).
    shards: ShardReport | None = None
    #: kNN only: the candidates each shard considered (Elasticsearch's ``num_candidates``).
    num_candidates: int | None = None

    @property
    def partial(self) -> bool:
        return self.shards is not None and self.shards.partial


class RerankReport(BaseModel):
    """What the rerank stage did (``SearchResponse.rerank``; None when the stage was off)."""

    model_config = ConfigDict(frozen=True)

    ok: bool
    model: str
    #: Fused hits the reranker was asked to score.
    candidates: int
    latency_ms: float = 0.0
    #: Why it failed (``timeout``, ``connection_error``, ``circuit_open``, ``http_error``, ``bad_response``).
    reason: str | None = None
    error: str | None = None


class Passage(BaseModel):
    """One of a hit's best passages (a document read in passages): where it is in the text, what it says, and
    which leg found it — ``knn`` (one of the document's vectors matched; ``score`` is its similarity) or
    ``bm25`` (it holds a fragment the BM25 leg highlighted; no score of its own)."""

    model_config = ConfigDict(frozen=True)

    start: int
    end: int
    text: str
    leg: Leg
    score: float | None = None


class PassageFields(TypedDict):
    """A :class:`Passage`'s fields, validated inside the response that holds them."""

    start: int
    end: int
    text: str
    leg: str
    score: float | None


class SearchHit(BaseModel):
    """One fused hit with its provenance."""

    model_config = ConfigDict(frozen=True)

    id: str
    #: What the list is ordered by: the rerank score when the rerank stage ran (``response.ordered_by ==
    #: "rerank"``), else the fused score. Only comparable within one response.
    score: float
    #: In [0, 1]: the fused score relative to the best score possible; comparable across queries.
    normalized_score: float
    #: The fusion's score (RRF: Σ w / (k + rank)), whatever ordered the list. None only in old payloads.
    fused_score: float | None = None
    #: The reranker's score for this hit; None when the hit was not reranked.
    rerank_score: float | None = None
    #: 1-based rank in each leg that found it (a leg that did not find it is absent).
    ranks: dict[str, int] = Field(default_factory=dict)
    #: Each leg's raw score (BM25 score, kNN similarity score).
    leg_scores: dict[str, float] = Field(default_factory=dict)
    #: The query's similarity to this document in [0, 1], comparable across queries (a threshold means the
    #: same for every query): Elasticsearch's kNN score, (1 + cosine) / 2, of the document's vector (its best
    #: passage's, when it is read in passages). The kNN leg's score where the leg found the hit; a hit it did
    #: not reach has one only when the search asked for ``similarities=True``. None in ``bm25`` mode.
    similarity: float | None = None
    source: dict[str, Any] = Field(default_factory=dict)
    #: field -> fragments with the matches in ``<em>``.
    highlights: dict[str, list[str]] = Field(default_factory=dict)
    #: What ``highlights`` are (see :data:`HighlightSource`), or None (highlights not requested).
    highlight_source: HighlightSource | None = None
    #: The document's best passages, when it is read in passages (a document longer than the model's window,
    #: in an index with passages): each leg's, best first. Empty for a document that is one passage.
    passages: list[Passage] = Field(default_factory=list)
    #: Deep paging only: the 1-based position of this hit in the whole walk.
    position: int | None = None

    @property
    def title(self) -> str:
        return str(self.source.get("title", ""))

    @property
    def text(self) -> str:
        return str(self.source.get("text", ""))

    @property
    def document(self) -> Document:
        """The hit's stored document, typed as it was indexed (``source`` is Elasticsearch's ``_source``
        dict; ``document.source`` is the document's origin field), as ``client.documents.get()`` gives it."""
        return stored_document(self.id, self.source)


def relevant(hit: SearchHit, min_similarity: float) -> bool:
    """A hit worth showing: one the keyword leg found, or a semantic match at least ``min_similarity`` similar
    (0: every hit). Nonsense has nearest neighbours too; every surface that hides them (the agent tool, MCP,
    the command line) applies this one rule."""
    if min_similarity <= 0 or "bm25" in hit.ranks:
        return True
    return hit.leg_scores.get("knn", 0.0) >= min_similarity


def similarity_floor(embedder: object) -> float:
    """The relevance floor an embedder declares for its own similarities (the local models: measured per
    model, see embeddings' catalogue), 0 when it declares none."""
    return float(getattr(embedder, "similarity_floor", 0.0))


class SearchHitFields(TypedDict):
    """A :class:`SearchHit`'s fields as a plain dict: what the search and the deep walk build for each shown
    hit. They are validated inside the :class:`SearchResponse` / :class:`SearchPage` that holds them: one
    validation for the page, half the time of one :class:`SearchHit` per hit."""

    id: str
    score: float
    normalized_score: float
    fused_score: float
    rerank_score: float | None
    ranks: dict[str, int]
    leg_scores: dict[str, float]
    similarity: float | None
    source: dict[str, Any]
    highlights: dict[str, list[str]]
    highlight_source: HighlightSource | None
    position: int | None
    passages: list[PassageFields]


class FacetBucket(BaseModel):
    """One value (or interval, or range) of a facet, and how many of the matches have it."""

    model_config = ConfigDict(frozen=True)

    value: str
    count: int


class Facet(BaseModel):
    """Counts of one field over a search's matches (see ``storage._dsl.aggregations`` for what matched means)."""

    model_config = ConfigDict(frozen=True)

    field: str
    kind: str
    buckets: list[FacetBucket]


class ScoreExplanation(BaseModel):
    """Elasticsearch's explanation of a score: its value, what it is, and the parts it is made of (for BM25:
    each query term's weight, its idf and term frequency, the field lengths)."""

    model_config = ConfigDict(frozen=True)

    value: float
    description: str
    details: list[ScoreExplanation] = Field(default_factory=list)


class HitGroup(BaseModel):
    """One group of a ``group_by`` search: its value (None: hits without the field, one per group), the ids
    of its best hits (as in ``hits``), and how many of the fused candidates share the value."""

    model_config = ConfigDict(frozen=True)

    value: str | None
    ids: list[str]
    known_matches: int


class Degradation(BaseModel):
    """Why a result is degraded: a leg failed (the hits are what the other gave) or the rerank stage did
    (the hits are in fused order)."""

    model_config = ConfigDict(frozen=True)

    #: The legs that failed; empty when only the rerank stage failed.
    legs_failed: list[str] = Field(default_factory=list)
    #: The first failed leg's reason tag (``timeout``, ``circuit_open``...), or ``rerank_<reason>`` when only
    #: the rerank stage failed.
    reason: str


class Completeness(BaseModel):
    """Whether every shard answered. A partial result is not a degraded one: every leg answered, but some
    shards did not (failed, or timed out server-side), so its hits, and the fused list, may be incomplete."""

    model_config = ConfigDict(frozen=True)

    #: The requests some shards did not answer: legs, and ``fetch`` (the request for the page's documents,
    #: whose missing hits are then left out). ``SearchResponse.legs[leg].shards`` says how much answered.
    partial_legs: list[str] = Field(default_factory=list)
    #: False when highlights were asked for but the page's fetch answered from only some shards.
    highlights_complete: bool = True


class FacetReport(BaseModel):
    """The facets a search asked for (``facets=``): the counts by field, over which legs' matches, or why
    they are missing (their request failed; the hits are unaffected)."""

    model_config = ConfigDict(frozen=True)

    #: field -> its counts; empty when the facets' request failed (``error``).
    counts: dict[str, Facet] = Field(default_factory=dict)
    #: The legs whose matches the counts cover (``["bm25", "knn"]`` in a hybrid search).
    over: list[str] = Field(default_factory=list)
    #: The counts cover fewer legs than the search ran (one failed).
    partial: bool = False
    error: str | None = None


class SearchResponse(BaseModel):
    """A search's page of hits and how it was made. Related facts are grouped: ``fusion`` (the setting in
    force, with ``fusion_sources``), ``degradation`` (None unless a leg or the rerank failed),
    ``completeness`` (shards that did not answer), ``facets`` (None unless asked for)."""

    model_config = ConfigDict(frozen=True)

    query: str
    mode: SearchMode
    hits: list[SearchHit]
    #: Fused candidates available for paging (``offset + limit`` within it).
    total_fused: int
    offset: int
    limit: int
    legs: dict[str, LegReport]
    #: Documents found by both legs among the candidates.
    overlap: int
    #: The fusion setting the search used (method, k, weights, window).
    fusion: FusionSetting
    #: Where each fusion parameter (method, k, weights, window) came from: ``call`` (an argument),
    #: ``settings`` (set explicitly: ``ES_FUSION``...), ``index`` (tuned and stored with the index by
    #: ``hybrid-search tune --apply``), ``limit`` (a window widened to reach the page) or ``default``.
    fusion_sources: dict[str, str] = Field(default_factory=dict)
    #: None unless a leg or the rerank stage failed: then what failed and why.
    degradation: Degradation | None = None
    #: Which shards answered (``completeness.partial``: some did not).
    completeness: Completeness = Field(default_factory=Completeness)
    #: What query hygiene changed: ``truncated``, ``control_chars_removed``, ``quotes_repaired``...
    query_adjustments: list[str] = Field(default_factory=list)
    #: Zero-result recovery that served this response: ``fuzzy`` (the BM25 leg found nothing and its fuzzy
    #: retry did), ``scope`` (a wider filter tier served; see ``scope_tier``).
    recovery: list[str] = Field(default_factory=list)
    #: Which filter tier served: 0 = the filters given, n = ``scopes[n - 1]``.
    scope_tier: int = 0
    #: ``parallel`` (two concurrent requests) or ``msearch`` (both legs in one ``_msearch``).
    round_trip: str = "parallel"
    #: Which score ordered ``hits``: ``fusion`` or ``rerank``.
    ordered_by: Literal["fusion", "rerank"] = "fusion"
    #: The rerank stage's report; None when it did not run.
    rerank: RerankReport | None = None
    #: The second phase: the one request that fetched the shown hits' documents and highlights (ms; None
    #: when nothing was fetched). ``latency_ms`` minus the slower leg minus this is the client's own time.
    fetch_ms: float | None = None
    latency_ms: float = 0.0
    correlation_id: str | None = None
    #: The facets asked for (``facets=``); None when none were.
    facets: FacetReport | None = None
    #: ``group_by`` searches: the page's groups, best first (``hits`` holds their hits in the same order).
    groups: list[HitGroup] | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def degraded(self) -> bool:
        """A leg or the rerank stage failed (``degradation`` says which and why)."""
        return self.degradation is not None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def partial(self) -> bool:
        """Some shards did not answer (``completeness`` says which requests)."""
        return bool(self.completeness.partial_legs)

    @property
    def ids(self) -> list[str]:
        return [h.id for h in self.hits]


class SearchPage(BaseModel):
    """One page of a deep-paging walk (:meth:`SearchClient.search_page`)."""

    model_config = ConfigDict(frozen=True)

    query: str
    mode: SearchMode
    hits: list[SearchHit]
    #: 1-based page number within the walk.
    page: int
    #: Pass it back to get the next page; None when the walk is over (its point-in-time is then closed).
    next_cursor: str | None
    #: Hits returned by the walk so far, this page included.
    returned: int
    #: Whether this page reached into the BM25 tail (keyword matches ranked below ``depth``).
    in_tail: bool = False
    latency_ms: float = 0.0
    #: ``group_by`` walks: the page's groups, in walk order (``hits`` holds their hits in the same order).
    groups: list[HitGroup] | None = None

    @property
    def ids(self) -> list[str]:
        return [h.id for h in self.hits]
