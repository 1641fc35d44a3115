"""The search pipeline: wires the stages together; holds no per-request state.

::

    SearchRequest ─plan─▶ Plan ─retrieve─▶ LegOutcomes ─fuse─▶ Fused ─rerank─▶ Ranked ─enrich─▶ hits
                  ─respond─▶ SearchResponse

With ``scopes`` (the zero-result cascade), retrieve → enrich runs once per filter tier until one finds
something; the response says which tier served.
"""

from __future__ import annotations

import dataclasses

from .._backend import Backend
from .._errors import SearchError
from .._logging import query_hash
from .._models import SearchResponse
from .._tracing import AttrValue, span
from .enrich import Enricher
from .fuse import fuse_legs, raise_if_failed
from .plan import Plan, SearchRequest, filter_clauses, plan_search
from .rerank import RerankStage
from .respond import build_response, log_search, mark_span
from .retrieve import Retriever
from .state import SearchState

__all__ = ["SearchPipeline"]


class SearchPipeline:
    def __init__(self, backend: Backend) -> None:
        self._b = backend
        self.retriever = Retriever(backend)
        self.reranker = RerankStage(backend)
        self.enricher = Enricher(backend)

    def plan(self, request: SearchRequest) -> Plan:
        return plan_search(request, self._b.settings, has_reranker=self._b.reranker is not None)

    async def run(self, request: SearchRequest) -> SearchResponse:
        self._b.check_open()
        state = SearchState(plan=self.plan(request))
        plan = state.plan
        tiers = [plan] + [
            dataclasses.replace(plan, clauses=filter_clauses(scope, plan.tenant_id) + plan.syntax_clauses)
            for scope in (request.scopes or ())
        ]
        attrs: dict[str, AttrValue] = {
            "search.mode": plan.mode,
            "search.query_hash": query_hash(plan.text),
            "search.fusion.method": plan.method,
            "search.window": plan.window,
            "search.limit": plan.limit,
            "search.round_trip": plan.round_trip,
            "search.rerank": plan.rerank,
        }
        with span("hybrid_search.search", attrs) as search_span:
            for tier, tier_plan in enumerate(tiers):
                try:
                    response = await self._run_tier(state, tier_plan)
                except SearchError as exc:
                    log_search(state, state.outcomes, None, error=exc)
                    raise
                if response.total_fused or tier == len(tiers) - 1:
                    break
            if tier:
                response = response.model_copy(update={"scope_tier": tier, "recovery": [*response.recovery, "scope"]})
            response = response.model_copy(update={"latency_ms": state.elapsed_s() * 1000})
            log_search(state, state.outcomes, response)
            mark_span(search_span, response)
            return response

    async def _run_tier(self, state: SearchState, plan: Plan) -> SearchResponse:
        state.outcomes, state.recovery = await self.retriever.retrieve(plan)
        retrieved_s = state.elapsed_s()
        raise_if_failed(plan, state.outcomes)
        fused = fuse_legs(plan, state.outcomes)
        ranked = await self.reranker.run(plan, fused.hits, fused.sources)
        page = ranked.hits[plan.offset : plan.offset + plan.limit]
        hits, complete = await self.enricher.enrich(
            page,
            fused,
            text=plan.embed_text,
            target=plan.target,
            filters=plan.clauses,
            highlight=plan.highlight,
            # What the legs left of their budget (the rerank stage has a budget of its own).
            budget_s=self._b.settings.leg_timeout_s - retrieved_s,
        )
        return build_response(plan, state, fused, ranked, hits, highlights_complete=complete)
