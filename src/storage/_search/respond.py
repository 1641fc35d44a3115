"""Stage 6, **respond**: the per-request state in, the :class:`SearchResponse` out — plus the one log event
(``event.action=search``) and the search span's closing attributes. Pure, apart from logging.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from .._errors import SearchError
from .._observability.log import Events, get_correlation_id, query_hash
from .._observability.tracing import SpanLike
from .._types.results import (
    Completeness,
    Facet,
    FacetBucket,
    FacetReport,
    HitGroup,
    SearchHitFields,
    SearchResponse,
)
from .arrange import Group
from .facets import FacetOutcome
from .fuse import Fused
from .plan import Plan
from .rerank import Ranked
from .state import LegOutcome, SearchState

__all__ = ["build_response", "leg_fields", "log_search", "mark_span"]


def leg_fields(o: LegOutcome, plan: Plan | None = None) -> dict[str, Any]:
    """A :class:`~storage.types.LegReport`'s fields (validated with the response that holds them)."""
    error = o.error
    return {
        "num_candidates": plan.candidates if plan is not None and o.leg == "knn" else None,
        "leg": o.leg,
        "ok": error is None,
        "hits": len(o.ids),
        "latency_ms": round(o.latency_ms, 3),
        "took_ms": o.took_ms,
        "embed_ms": round(o.embed_ms, 3) if o.embed_ms is not None else None,
        "reason": error.reason if error else None,
        "error": f"{type(error).__name__}: {error}" if error else None,
        "shards": o.shards if error is None else None,
    }


def build_response(
    plan: Plan,
    state: SearchState,
    fused: Fused,
    ranked: Ranked,
    hits: list[SearchHitFields],
) -> SearchResponse:
    """The response, validated once: the hits and the leg reports go in as fields, not as models."""
    fetched = state.fetched
    partial_legs = sorted(leg for leg, o in state.outcomes.items() if o.partial)
    if fetched.partial:
        partial_legs.append("fetch")
    first_error = next(iter(fused.failed.values()), None)
    report = ranked.report
    rerank_failed = report is not None and not report.ok
    reason = first_error.reason if first_error else None
    if reason is None and report is not None and not report.ok:
        reason = f"rerank_{report.reason}"
    degradation = None
    if fused.failed or rerank_failed:
        degradation = {"legs_failed": sorted(fused.failed), "reason": reason}
    completeness = _COMPLETE
    highlights_complete = not (plan.highlight and fetched.partial)
    if partial_legs or not highlights_complete:
        completeness = Completeness(partial_legs=partial_legs, highlights_complete=highlights_complete)
    return SearchResponse.model_validate(
        {
            "query": plan.text,
            "mode": plan.mode,
            "hits": hits,
            "total_fused": len(fused.hits),
            "offset": plan.offset,
            "limit": plan.limit,
            "legs": {leg: leg_fields(o, plan) for leg, o in state.outcomes.items()},
            "overlap": fused.overlap,
            "fusion": plan.fusion,
            "fusion_sources": plan.fusion_sources,
            "degradation": degradation,
            "completeness": completeness,
            "query_adjustments": plan.adjustments,
            "recovery": list(state.recovery),
            "round_trip": plan.round_trip,
            "fetch_ms": round(fetched.latency_ms, 3) if fetched.shards is not None else None,
            "ordered_by": "rerank" if ranked.reranked else "fusion",
            "rerank": ranked.report,
            "latency_ms": state.elapsed_s() * 1000,
            "correlation_id": get_correlation_id(),
        }
    )


_COMPLETE = Completeness()


def log_search(
    events: Events,
    state: SearchState,
    outcomes: Mapping[str, LegOutcome],
    response: SearchResponse | None,
    *,
    error: SearchError | None = None,
) -> None:
    """The one event per search: ECS dotted fields, a query hash (never the text)."""
    level = 40 if error else (30 if response is not None and response.degraded else 20)
    if not events.wanted(level):
        return  # nobody listens: do not assemble some thirty fields
    plan = state.plan
    fields: dict[str, Any] = {
        "search.filters": list(plan.filter_fields),
        "search.mode": plan.mode,
        "search.query_hash": query_hash(plan.text),
        "search.query_length": len(plan.text),
        "event.duration": int((time.perf_counter() - state.started) * 1e9),
        "event.outcome": "failure" if error else "success",
    }
    if plan.facets:  # which facets, groupings and diversity callers use (Kibana: the fields' top values)
        fields["search.facets"] = [spec.name for spec in plan.facets]
    if plan.group_by is not None:
        fields["search.group_by"] = plan.group_by
    if plan.diversity:
        fields["search.diversity"] = plan.diversity
    for leg, o in outcomes.items():
        fields[f"search.legs.{leg}.latency_ms"] = round(o.latency_ms, 2)
        fields[f"search.legs.{leg}.hits"] = len(o.ids)
        if o.error is not None:
            fields[f"search.legs.{leg}.reason"] = o.error.reason
        elif o.partial and o.shards is not None:
            fields[f"search.legs.{leg}.shards_failed"] = o.shards.failed
            fields[f"search.legs.{leg}.timed_out"] = o.shards.timed_out
    if response is not None:
        fields["search.overlap"] = response.overlap
        fields["search.fusion.method"] = response.fusion.method
        fields["search.fusion.k"] = response.fusion.k
        fields["search.hits"] = len(response.hits)
        fields["search.degraded"] = response.degraded
        fields["search.partial"] = response.partial
        if response.partial:
            fields["search.partial_legs"] = response.completeness.partial_legs
        if response.degradation is not None:
            fields["search.legs_failed"] = response.degradation.legs_failed
            fields["search.degraded_reason"] = response.degradation.reason
        if "truncated" in response.query_adjustments:
            fields["search.query_truncated_from"] = plan.original_length
        if response.query_adjustments:
            fields["search.query_adjustments"] = response.query_adjustments
        if response.recovery:
            fields["search.recovery"] = response.recovery
            fields["search.scope_tier"] = response.scope_tier
        fields["search.round_trip"] = response.round_trip
        if response.fetch_ms is not None:
            fields["search.fetch.latency_ms"] = round(response.fetch_ms, 2)
        if not response.completeness.highlights_complete:
            fields["search.highlights_complete"] = False
        if response.rerank is not None:
            fields["search.rerank.ok"] = response.rerank.ok
            fields["search.rerank.latency_ms"] = response.rerank.latency_ms
            fields["search.rerank.candidates"] = response.rerank.candidates
            if response.rerank.reason:
                fields["search.rerank.reason"] = response.rerank.reason
    if error is not None:
        fields["error.type"] = type(error).__name__
        fields["error.message"] = str(error)
    events.emit(level, "search", "search", fields)


def mark_span(search_span: SpanLike, response: SearchResponse) -> None:
    search_span.set_attribute("search.hits", len(response.hits))
    search_span.set_attribute("search.degraded", response.degraded)
    search_span.set_attribute("search.partial", response.partial)
    search_span.set_attribute("search.ordered_by", response.ordered_by)
    if response.recovery:
        search_span.set_attribute("search.recovery", response.recovery)
    if response.degradation is not None:
        search_span.set_attribute("search.legs_failed", response.degradation.legs_failed)
        search_span.set_attribute("search.degraded_reason", response.degradation.reason)


def extras(plan: Plan, facets: FacetOutcome | None, groups: Sequence[Group] | None, shown: set[str]) -> dict[str, Any]:
    """The response's facets and groups (only for a search that asked for them)."""
    out: dict[str, Any] = {}
    if facets is not None:
        if facets.buckets is not None:
            kinds = {spec.name: spec.kind for spec in plan.facets}
            out["facets"] = FacetReport(
                counts={
                    name: Facet(
                        field=name, kind=kinds[name], buckets=[FacetBucket(value=v, count=c) for v, c in buckets]
                    )
                    for name, buckets in facets.buckets.items()
                },
                over=list(facets.over),
                partial=len(facets.over) < len(plan.legs),
            )
        elif facets.error is not None:
            out["facets"] = FacetReport(error=f"{facets.error.reason}: {facets.error}")
    if groups is not None:
        out["groups"] = [
            HitGroup(value=g.value, ids=[i for i in g.ids if i in shown], known_matches=g.known_matches) for g in groups
        ]
    return out
