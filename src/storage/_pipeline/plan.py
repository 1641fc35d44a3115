"""Stage 1, **plan**: a :class:`SearchRequest` in, a validated :class:`Plan` out. Pure: no I/O.

Everything a caller can get wrong is found here, before any request is sent, and is an
:class:`InvalidQuery` naming the argument (or a :class:`ConfigurationError` for rerank without a reranker).
Defaults come from :class:`SearchSettings`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from .._errors import ConfigurationError, InvalidQuery
from .._filters import Filter, FilterInput, Term, parse_filters, to_es_filters
from .._fusion import FusionMethod
from .._models import Leg, SearchMode
from .._queries import BM25_FIELDS
from .._settings import RoundTrip, SearchSettings
from .._syntax import parse_query
from .._text import clean_query
from .._tuning import FusionSetting, FusionSource

__all__ = [
    "InForce",
    "Plan",
    "QuerySyntax",
    "SearchRequest",
    "configured_fusion",
    "filter_clauses",
    "fusion_in_force",
    "plan_search",
    "require_tenant",
    "valid_target",
]

#: ``plain``: the text as words and "phrases" (default); ``boolean``: the query syntax of storage._syntax.
QuerySyntax = Literal["plain", "boolean"]
_MODES: tuple[str, ...] = get_args(SearchMode)
_FUSIONS: tuple[str, ...] = get_args(FusionMethod)
_ROUND_TRIPS: tuple[str, ...] = get_args(RoundTrip)
_INDEX_NAME = re.compile(r"^[a-z0-9][a-z0-9_.\-]{0,254}$")


@dataclass(frozen=True, kw_only=True)
class SearchRequest:
    """Everything one search asks for (the keyword arguments of :meth:`SearchClient.search`).

    ``None`` means "the client's setting". Frozen: a request can be kept, logged or re-run as it is.
    """

    query: str
    mode: SearchMode = "hybrid"
    filters: FilterInput = None
    limit: int = 10
    offset: int = 0
    tenant_id: str | None = None
    fusion: FusionMethod | None = None
    rrf_k: int | None = None
    weights: Mapping[str, float] | None = None
    window: int | None = None
    num_candidates: int | None = None
    similarity: float | None = None
    strict: bool = False
    highlight: bool = True
    index: str | None = None
    recover: bool = False
    scopes: Sequence[FilterInput] | None = None
    round_trip: RoundTrip | None = None
    syntax: QuerySyntax = "plain"
    rerank: bool | None = None
    rerank_candidates: int | None = None


@dataclass(frozen=True, slots=True)
class Plan:
    """A validated search: everything the later stages and the log event need."""

    text: str
    mode: SearchMode
    legs: tuple[Leg, ...]
    clauses: list[dict[str, Any]]
    target: str
    method: FusionMethod
    k: int
    weights: dict[str, float]
    window: int
    candidates: int
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
    #: The filtered field names (never their values), for telemetry's "top filters".
    filter_fields: tuple[str, ...] = ()
    #: The tenant every result must belong to (checked again on the results).
    tenant_id: str | None = None
    #: Clauses from the query syntax (kept when a scope tier replaces the caller's filters).
    syntax_clauses: list[dict[str, Any]] = field(default_factory=list)
    recover: bool = False
    #: Rerank the first ``rerank_candidates`` fused hits (0 when the stage is off).
    rerank_candidates: int = 0
    #: Where each fusion parameter came from: ``call``, ``settings``, ``index`` (tuned and stored with the
    #: index: ``hybrid-search tune --apply``) or ``default``.
    fusion_sources: dict[str, FusionSource] = field(default_factory=dict)

    @property
    def rerank(self) -> bool:
        return self.rerank_candidates > 0


def require_tenant(tenant_id: str | None, what: str, *, multi_tenant: bool) -> str | None:
    if tenant_id is not None and (not isinstance(tenant_id, str) or not tenant_id.strip()):
        raise InvalidQuery("tenant_id must be a non-empty string")
    if tenant_id is None and multi_tenant:
        raise InvalidQuery(f"this client is multi-tenant: {what}() needs tenant_id=")
    return tenant_id


def filter_clauses(filters: FilterInput, tenant_id: str | None) -> list[dict[str, Any]]:
    """The caller's filters (and the tenant) as Elasticsearch clauses, identical for both legs."""
    return to_es_filters(_with_tenant(filters, tenant_id))


def _with_tenant(filters: FilterInput, tenant_id: str | None) -> list[Filter]:
    """The caller's filters, validated, and the tenant's term."""
    parsed = parse_filters(filters)
    if tenant_id is not None:
        parsed.append(Term("tenant_id", tenant_id))
    return parsed


def valid_target(index: str) -> str:
    """Explicit names only (comma-separated): no wildcards, ``_all``, exclusions or remote clusters."""
    names = index.split(",")
    bad = [n for n in names if not _INDEX_NAME.match(n)]
    if bad:
        raise InvalidQuery(f"invalid index name(s) {bad}: lowercase letters, digits, '.', '_', '-'; no wildcards")
    return index


#: The settings fields behind each fusion parameter.
_FUSION_FIELDS = {
    "method": ("fusion",),
    "k": ("rrf_k",),
    "weights": ("bm25_weight", "knn_weight"),
    "window": ("window",),
}


#: A fusion setting and where each of its parameters came from.
InForce = tuple[FusionSetting, dict[str, FusionSource]]


def configured_fusion(settings: SearchSettings, stored: FusionSetting | None) -> InForce:
    """The fusion below the call: each parameter from an explicitly set setting (``ES_FUSION``..., or a field
    given to :class:`SearchSettings`), else the setting stored with the index (tuned), else the default.
    The same for every search of a client and a stored value (the pipeline keeps it)."""
    given = settings.model_fields_set
    sources: dict[str, FusionSource] = {
        param: "settings" if any(f in given for f in fields) else "index" if stored is not None else "default"
        for param, fields in _FUSION_FIELDS.items()
    }
    index = stored if stored is not None else FusionSetting()
    weights = (
        index.weights if sources["weights"] == "index" else {"bm25": settings.bm25_weight, "knn": settings.knn_weight}
    )
    setting = FusionSetting(
        method=index.method if sources["method"] == "index" else settings.fusion,
        k=index.k if sources["k"] == "index" else settings.rrf_k,
        bm25_weight=weights["bm25"],
        knn_weight=weights["knn"],
        window=index.window if sources["window"] == "index" else settings.window,
    )
    return setting, sources


def fusion_in_force(
    settings: SearchSettings,
    stored: FusionSetting | None,
    request: SearchRequest | None = None,
    *,
    configured: InForce | None = None,
) -> InForce:
    """The fusion a search uses, parameter by parameter: the call's argument, else :func:`configured_fusion`
    (``configured``, when the caller has it already). Returns it (the call's weights, a partial override
    validated by :func:`plan_search`, are not merged in) and where each parameter came from."""
    base, below = configured if configured is not None else configured_fusion(settings, stored)
    r = request
    if r is None or (r.fusion is None and r.rrf_k is None and r.weights is None and r.window is None):
        return base, below  # (shared, never written to)
    sources = dict(below)
    for param, value in (("method", r.fusion), ("k", r.rrf_k), ("weights", r.weights), ("window", r.window)):
        if value is not None:
            sources[param] = "call"
    setting = FusionSetting(
        method=r.fusion or base.method,
        k=r.rrf_k if r.rrf_k is not None else base.k,
        bm25_weight=base.bm25_weight,
        knn_weight=base.knn_weight,
        window=r.window if r.window is not None else base.window,
    )
    return setting, sources


def plan_search(
    request: SearchRequest,
    settings: SearchSettings,
    *,
    has_reranker: bool,
    stored: FusionSetting | None = None,
    configured: InForce | None = None,
) -> Plan:
    """Validate every argument before anything is sent; :class:`InvalidQuery` names the bad one. ``stored``:
    the fusion setting stored with the index, or ``configured`` its resolution (see :func:`fusion_in_force`)."""
    s, r = settings, request
    if r.mode not in _MODES:
        raise InvalidQuery(f"mode must be one of {_MODES}, got {r.mode!r}")
    in_force, sources = fusion_in_force(s, stored, r, configured=configured)
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
        raise InvalidQuery(
            f"offset + limit = {r.offset + r.limit} is beyond the fusion window ({win}); pass a larger window= "
            "or walk the results with search_page()"
        )
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
    tenant_id = require_tenant(r.tenant_id, "search", multi_tenant=s.multi_tenant)
    cleaned = clean_query(r.query)
    legs: tuple[Leg, ...] = ("bm25", "knn") if r.mode == "hybrid" else (r.mode,)
    parsed_filters = _with_tenant(r.filters, tenant_id)
    clauses = to_es_filters(parsed_filters)
    embed_text, bm25_clause, syntax_clauses = cleaned.text, None, []
    if r.syntax == "boolean":
        parsed = parse_query(cleaned.text, fields=BM25_FIELDS)
        embed_text, bm25_clause = parsed.embed_text, parsed.clause
        syntax_clauses = to_es_filters(parsed.filters)
    elif r.syntax != "plain":
        raise InvalidQuery(f"syntax must be 'plain' or 'boolean', got {r.syntax!r}")
    return Plan(
        text=cleaned.text,
        mode=r.mode,
        legs=legs,
        clauses=clauses + syntax_clauses,
        target=valid_target(r.index) if r.index else s.index,
        method=method,
        k=k,
        weights={leg: leg_weights[leg] for leg in legs},
        window=win,
        candidates=candidates,
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
        filter_fields=tuple(sorted({f.field for f in parsed_filters})) if parsed_filters else (),
        tenant_id=tenant_id,
        syntax_clauses=syntax_clauses,
        recover=r.recover,
        rerank_candidates=rerank_candidates,
        fusion_sources=sources,
    )


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
