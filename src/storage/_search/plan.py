"""Stage 1, **plan**: a :class:`SearchRequest` in, a validated :class:`Plan` out. Pure: no I/O.

Everything a caller can get wrong is found here, before any request is sent, and is an
:class:`InvalidQuery` naming the argument (or a :class:`ConfigurationError` for rerank without a reranker).
Defaults come from :class:`SearchSettings`; the fusion below the call from ``storage._fusion.setting``;
the filters and the tenant become the plan's :class:`~storage._dsl.tenancy.Scope`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, get_args

from .._dsl.aggregations import FacetSpec, parse_facets
from .._dsl.filters import to_es_filters
from .._dsl.mapping import valid_target
from .._dsl.queries import BM25_FIELDS, HIGHLIGHT_LIMIT
from .._dsl.syntax import parse_query
from .._dsl.tenancy import Scope, read_scope
from .._dsl.text import CleanQuery, clean_query
from .._errors import ConfigurationError, InvalidQuery
from .._fusion.methods import FusionMethod
from .._fusion.setting import FusionInForce, FusionSetting, FusionSource, fusion_in_force
from .._settings import SearchSettings
from .._types.models import Leg, SearchMode, is_metadata_field
from .._types.requests import QuerySyntax, RoundTrip, SearchRequest
from ..passages import HEAD_FIRST_PASSAGE_WEIGHT

__all__ = ["Plan", "QuerySyntax", "plan_search"]

_MODES: tuple[str, ...] = get_args(SearchMode)
_FUSIONS: tuple[str, ...] = get_args(FusionMethod)
_ROUND_TRIPS: tuple[str, ...] = get_args(RoundTrip)


@dataclass(frozen=True, slots=True)
class Plan:
    """A validated search: everything the later stages and the log event need."""

    text: str
    mode: SearchMode
    legs: tuple[Leg, ...]
    #: What every request of the search may see: the filters, the tenant, the query's field prefixes.
    scope: Scope
    target: str
    method: FusionMethod
    k: int
    weights: dict[str, float]
    window: int
    candidates: int
    #: The fusion setting in force (method, k, both weights, window): what the response reports.
    fusion: FusionSetting
    similarity: float | None
    highlight: bool
    limit: int
    offset: int
    strict: bool
    round_trip: RoundTrip
    adjustments: list[str]
    original_length: int
    #: What the kNN leg embeds (the text, or a parsed query's positive words and phrases).
    embed_text: str = ""
    #: The parsed query's BM25 clause (syntax="boolean"), None for plain text.
    bm25_clause: dict[str, Any] | None = None
    #: Clauses from the query syntax (kept when a scope tier replaces the caller's filters).
    syntax_clauses: list[dict[str, Any]] = field(default_factory=list)
    recover: bool = False
    #: Rerank the first ``rerank_candidates`` fused hits (0 when the stage is off).
    rerank_candidates: int = 0
    #: Where each fusion parameter came from: ``call``, ``settings``, ``index`` (tuned and stored with the
    #: index) or ``default``.
    fusion_sources: dict[str, FusionSource] = field(default_factory=dict)
    #: A deep-paging walk's legs run on this point-in-time (id, keep-alive) instead of ``target``.
    pit: tuple[str, str] | None = None
    #: The tenant every result must belong to (the scope's; checked again on the results).
    tenant_id: str | None = None
    #: The target is read in passages: the kNN leg searches them and returns each hit's best this many.
    passages: int = 0
    #: The target holds its passages' text: BM25 scores a document by its whole text plus its best passage.
    passage_text: bool = False
    #: Every head is indexed flat (passages since mapping version 4; or no passages): storage._dsl.queries.
    head_vectors: bool = True
    #: What a long document's best passage weighs against its head in the kNN leg: 1 (the better of the
    #: two), or less where the target's long documents agree with their heads (``storage.passages``).
    passage_weight: float = 1.0
    #: Facets counted over the match set (storage._dsl.aggregations), alongside the legs.
    facets: tuple[FacetSpec, ...] = ()
    #: Collapse to the best ``per_group`` hits per value of this field; ``limit``/``offset`` count groups.
    group_by: str | None = None
    per_group: int = 1
    #: Maximal marginal relevance over the ranked window (0: off).
    diversity: float = 0.0
    #: Where the diversity stage reads each candidate's head vector: ``_source`` (every index of the target
    #: keeps it there), else its doc values (storage._dsl.mapping.vectors_in_source_for).
    vectors_in_source: bool = True
    #: Every shown hit's similarity, the kNN leg's or measured for the hits it did not reach.
    similarities: bool = False
    #: The caller's query vector (searched instead of the embedded text), its length checked by the engine.
    query_vector: tuple[float, ...] | None = None
    #: How far into a text the fetch's highlighter reads (the target's ``index.highlight.max_analyzed_offset``).
    highlight_limit: int = HIGHLIGHT_LIMIT

    @property
    def doc_fields(self) -> tuple[str, ...]:
        """Doc values each leg's hits carry beyond the scope's: the grouping field."""
        return (self.group_by,) if self.group_by else ()

    @property
    def passages_at_fetch(self) -> bool:
        """The shown hits' best passages come with the fetch (found among their own passages only) instead of
        with the kNN leg's every hit: an index with flat heads, outside a walk's point-in-time."""
        return self.passages > 0 and self.head_vectors and self.pit is None

    @property
    def rerank(self) -> bool:
        return self.rerank_candidates > 0

    def keeps_hits(self, leg: str) -> bool:
        """Whether ``leg`` keeps its hits as Elasticsearch sent them, beyond its ranking (ids and scores): for
        the tenant check, groups and diversity, a walk (its sort values) and the kNN leg's passages.
        Otherwise the leg's parsed response is let go as soon as the leg has read its ranking."""
        return (
            self.tenant_id is not None
            or self.pit is not None
            or self.group_by is not None
            or self.diversity > 0.0
            or (leg == "knn" and self.passages > 0 and not self.passages_at_fetch)
        )

    @property
    def filter_fields(self) -> tuple[str, ...]:
        """The filtered field names (never their values), for telemetry's "top filters"."""
        return self.scope.fields

    def on_pit(self, pit_id: str, keep_alive: str) -> Plan:
        """The same plan, its legs and fetch run on a point-in-time (a walk's page)."""
        return dataclasses.replace(self, pit=(pit_id, keep_alive))

    def widened(self, filters: Any) -> Plan:
        """The same plan with other filters (a zero-result scope tier): the tenant and the query's field
        prefixes are kept."""
        return dataclasses.replace(self, scope=self.scope.widened(filters, self.syntax_clauses))


def plan_search(
    request: SearchRequest,
    settings: SearchSettings,
    *,
    has_reranker: bool,
    below: FusionInForce,
    passages: bool = False,
    passage_text: bool = False,
    head_first: bool = False,
    head_vectors: bool = True,
    vectors_in_source: bool = True,
    metadata_types: Mapping[str, str] | None = None,
    highlight_limit: int = HIGHLIGHT_LIMIT,
) -> Plan:
    """Validate every argument before anything is sent; :class:`InvalidQuery` names the bad one. ``below``:
    the fusion below the call (``storage._fusion.setting.configured_fusion``); ``passages``: the target is
    read in passages (``passage_text``: and holds their text; ``head_first``: its long documents agree with
    their heads; ``head_vectors``: with every head indexed flat, storage._dsl.mapping); ``vectors_in_source``:
    its indices keep their vectors in ``_source``; ``metadata_types``: its ``metadata.<key>`` mappings (for facets);
    ``highlight_limit``: how far into a text its highlighter may read."""
    s, r = settings, request
    if r.mode not in _MODES:
        raise InvalidQuery(f"mode must be one of {_MODES}, got {r.mode!r}")
    if not (
        type(r.limit) is int
        and type(r.offset) is int
        and (r.window is None or type(r.window) is int)
        and (r.rrf_k is None or type(r.rrf_k) is int)
        and (r.num_candidates is None or type(r.num_candidates) is int)
    ):  # (the common case in one expression; the search path counts instructions)
        _check_whole_numbers(r)
    in_force, sources = fusion_in_force(below, method=r.fusion, k=r.rrf_k, weights=r.weights, window=r.window)
    method: FusionMethod = in_force.method
    if method not in _FUSIONS:
        raise InvalidQuery(f"fusion must be one of {_FUSIONS}, got {method!r}")
    trip: RoundTrip = r.round_trip or s.round_trip
    if trip not in _ROUND_TRIPS:
        raise InvalidQuery(f"round_trip must be one of {_ROUND_TRIPS}, got {trip!r}")
    win = in_force.window
    k = in_force.k
    candidates = r.num_candidates if r.num_candidates is not None else s.num_candidates
    if not 1 <= win <= 10_000:
        raise InvalidQuery("window must be between 1 and 10000")
    if k < 1:
        raise InvalidQuery("rrf_k must be >= 1")
    if r.limit < 1 or r.offset < 0:
        raise InvalidQuery("limit must be >= 1 and offset >= 0")
    if r.offset + r.limit > win:
        # More results than the window holds: a window the call chose is kept (and refused); otherwise the
        # window grows to fit, for this call only (each leg then reads offset + limit candidates).
        if r.offset + r.limit > 10_000:
            raise InvalidQuery(
                f"offset + limit = {r.offset + r.limit} is more than one search fuses (10000): walk the results "
                "with search_page()"
            )
        if r.window is not None:
            raise InvalidQuery(
                f"offset + limit = {r.offset + r.limit} is beyond the fusion window ({win}); pass a larger "
                "window= (up to 10000) or walk the results with search_page()"
            )
        win = r.offset + r.limit
        sources = {**sources, "window": "limit"}
    if not win <= candidates <= 10_000:
        candidates = min(max(candidates, win), 10_000)
    rerank_candidates = _rerank_candidates(r, s, has_reranker)
    leg_weights = in_force.weights
    if r.weights:
        unknown = set(r.weights) - set(leg_weights)
        if unknown:
            raise InvalidQuery(f"weights for unknown legs: {sorted(unknown)}; legs are bm25 and knn")
        leg_weights.update(r.weights)
    for w in leg_weights.values():
        if not isinstance(w, int | float) or not 0 <= w < math.inf:  # (NaN compares False)
            raise InvalidQuery("weights must be finite numbers >= 0")
    scope = read_scope(r.filters, r.tenant_id, what="search", multi_tenant=s.multi_tenant)
    legs: tuple[Leg, ...] = ("bm25", "knn") if r.mode == "hybrid" else (r.mode,)
    query_vector = _query_vector(r.query_vector, legs)
    vector_only = query_vector is not None and r.mode == "knn" and isinstance(r.query, str) and not r.query.strip()
    cleaned = CleanQuery("", 0) if vector_only else clean_query(r.query)
    embed_text, bm25_clause, syntax_clauses = cleaned.text, None, []
    if r.syntax == "boolean" and not vector_only:
        parsed = parse_query(cleaned.text, fields=BM25_FIELDS)
        embed_text, bm25_clause = parsed.embed_text, parsed.clause
        syntax_clauses = to_es_filters(parsed.filters)
    elif r.syntax != "plain":
        raise InvalidQuery(f"syntax must be 'plain' or 'boolean', got {r.syntax!r}")
    return Plan(
        text=cleaned.text,
        mode=r.mode,
        legs=legs,
        scope=scope.plus(syntax_clauses) if syntax_clauses else scope,
        tenant_id=scope.tenant_id,
        target=valid_target(r.index) if r.index is not None else s.index,
        method=method,
        k=k,
        weights={leg: leg_weights[leg] for leg in legs},
        window=win,
        candidates=candidates,
        fusion=FusionSetting(method, k, leg_weights["bm25"], leg_weights["knn"], win),
        similarity=r.similarity,
        highlight=r.highlight,
        limit=r.limit,
        offset=r.offset,
        strict=r.strict,
        round_trip=trip,
        adjustments=list(cleaned.adjustments),
        original_length=cleaned.original_length,
        embed_text=embed_text,
        bm25_clause=bm25_clause,
        syntax_clauses=syntax_clauses,
        recover=r.recover,
        rerank_candidates=rerank_candidates,
        fusion_sources=sources,
        passages=settings.passages_shown if passages else 0,
        passage_text=passage_text,
        head_vectors=head_vectors,
        passage_weight=HEAD_FIRST_PASSAGE_WEIGHT if head_first else 1.0,
        facets=parse_facets(r.facets, metadata_types or {}) if r.facets else (),
        group_by=_group_by(r.group_by, r.per_group),
        per_group=r.per_group,
        diversity=_diversity(r.diversity),
        vectors_in_source=vectors_in_source,
        similarities=_similarities(r.similarities, legs),
        query_vector=query_vector,
        highlight_limit=highlight_limit,
    )


def _check_whole_numbers(r: SearchRequest) -> None:
    """``limit``, ``offset``, ``window``, ``rrf_k`` and ``num_candidates`` are whole numbers (``"3"``, ``True``
    or ``2.5`` is the caller's mistake, said as such, never a TypeError deeper down)."""
    for name in ("limit", "offset", "window", "rrf_k", "num_candidates"):
        value = getattr(r, name)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise InvalidQuery(f"{name} must be a whole number, got {type(value).__name__} {value!r}")


_GROUP_FIELDS = ("ticker", "source", "doc_type")


def _group_by(field: str | None, per_group: int) -> str | None:
    if not isinstance(per_group, int) or not 1 <= per_group <= 100:
        raise InvalidQuery("per_group must be between 1 and 100")
    if field is None:
        return None
    if field in _GROUP_FIELDS or is_metadata_field(field):
        return field
    raise InvalidQuery(f"group_by must be one of {', '.join(_GROUP_FIELDS)} or metadata.<key>, got {field!r}")


def _query_vector(given: Sequence[float] | None, legs: Sequence[str]) -> tuple[float, ...] | None:
    if given is None:
        return None
    if "knn" not in legs:
        raise InvalidQuery("query_vector needs the kNN leg (mode 'hybrid' or 'knn')")
    if isinstance(given, str | bytes) or not isinstance(given, Sequence) or not given:
        raise InvalidQuery("query_vector must be a non-empty sequence of numbers")
    if not all(isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) for x in given):
        raise InvalidQuery("query_vector must hold finite numbers only")
    return tuple(float(x) for x in given)


def _similarities(asked: bool, legs: Sequence[str]) -> bool:
    if asked and "knn" not in legs:
        raise InvalidQuery("similarities needs the kNN leg (mode 'hybrid' or 'knn'); a bm25 search has no vector")
    return bool(asked)


def _diversity(value: float) -> float:
    if not isinstance(value, int | float) or not 0.0 <= value <= 1.0:  # (NaN compares False)
        raise InvalidQuery("diversity must be between 0 (the ranked order) and 1")
    return float(value)


def _rerank_candidates(r: SearchRequest, s: SearchSettings, has_reranker: bool) -> int:
    wanted = r.rerank if r.rerank is not None else s.rerank
    if not wanted:
        return 0
    if not has_reranker:
        raise ConfigurationError(
            "rerank=True but no reranker is configured: pass reranker= to the SearchClient, or set "
            "RERANKER_PROVIDER=http (RERANKER_URL, RERANKER_API, RERANKER_MODEL) or cross-encoder "
            "(RERANKER_MODEL_DIR)"
        )
    n = r.rerank_candidates if r.rerank_candidates is not None else s.rerank_candidates
    if not 1 <= n <= 1000:
        raise InvalidQuery("rerank_candidates must be between 1 and 1000")
    if r.offset + r.limit > n:
        raise InvalidQuery(
            f"offset + limit = {r.offset + r.limit} is beyond the reranked candidates ({n}); "
            "pass a larger rerank_candidates="
        )
    return n
