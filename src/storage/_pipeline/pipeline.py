"""The search pipeline: wires the stages together; holds no per-request state.

::

    SearchRequest ─plan─▶ Plan ─retrieve─▶ LegOutcomes (ids, scores) ─fuse─▶ Fused ─rerank─▶ Ranked
                  ─enrich─▶ hits (one fetch: documents, highlights) ─respond─▶ SearchResponse

With ``scopes`` (the zero-result cascade), retrieve → enrich runs once per filter tier until one finds
something; the response says which tier served.
"""

from __future__ import annotations

import dataclasses

from .._backend import Backend
from .._errors import PartialResults, SearchError
from .._logging import query_hash
from .._models import SearchResponse
from .._tracing import AttrValue, decided_once, span
from .._tuning import FusionSetting
from .enrich import Enricher, Fetched, page_hits
from .fuse import fuse_legs, raise_if_failed
from .plan import InForce, Plan, SearchRequest, configured_fusion, filter_clauses, plan_search
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
        #: The fusion below the call, per stored setting (configured_fusion): resolved once, not per search.
        self._configured: dict[FusionSetting | None, InForce] = {}

    def plan(self, request: SearchRequest, stored: FusionSetting | None = None) -> Plan:
        configured = self._configured.get(stored)
        if configured is None:  # once per stored value: the settings never change
            configured = self._configured[stored] = configured_fusion(self._b.settings, stored)
        return plan_search(request, self._b.settings, has_reranker=self._b.reranker is not None, configured=configured)

    async def run(self, request: SearchRequest) -> SearchResponse:
        self._b.check_open()
        stored = await self._b.fusion_for(request.index or self._b.settings.index)
        with decided_once() as recording:  # whether the search's spans record: asked once, read by each
            return await self._run(request, recording, stored)

    async def _run(self, request: SearchRequest, recording: bool, stored: FusionSetting | None) -> SearchResponse:
        state = SearchState(plan=self.plan(request, stored))
        plan = state.plan
        tiers = [plan] + [
            dataclasses.replace(plan, clauses=filter_clauses(scope, plan.tenant_id) + plan.syntax_clauses)
            for scope in (request.scopes or ())
        ]
        attrs: dict[str, AttrValue] = {}
        if recording:  # the attributes (a query hash among them) only for a span that records
            attrs = {
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
            if tier:  # (build_response measured latency_ms from the search's start, tiers included)
                response = response.model_copy(update={"scope_tier": tier, "recovery": [*response.recovery, "scope"]})
            log_search(state, state.outcomes, response)
            mark_span(search_span, response)
            return response

    async def _run_tier(self, state: SearchState, plan: Plan) -> SearchResponse:
        state.outcomes, state.recovery = await self.retriever.retrieve(plan)
        raise_if_failed(plan, state.outcomes)
        fused = fuse_legs(plan, state.outcomes)
        # The documents (and highlights) of what is shown: with rerank, the candidates the reranker reads
        # (the page is among them); else the page. One request either way.
        fetched = Fetched()
        if plan.rerank and fused.hits:
            fetched = await self._fetch(plan, fused.hits.top_ids(plan.rerank_candidates))
        ranked = await self.reranker.run(plan, fused.hits, fetched.sources)
        page = ranked.page(plan.offset, plan.limit)
        if not plan.rerank:
            fetched = await self._fetch(plan, [hit[0] for hit, _ in page])
        state.fetched = fetched
        if fetched.partial and plan.strict and fetched.shards is not None:
            raise PartialResults(
                f"fetch answered from {fetched.shards.successful} of {fetched.shards.total} shards"
                " (strict=True does not accept partial results)",
                shards={"fetch": fetched.shards},
            )
        hits = page_hits(page, fetched, highlight=plan.highlight)
        return build_response(plan, state, fused, ranked, hits)

    async def _fetch(self, plan: Plan, ids: list[str]) -> Fetched:
        return await self.enricher.fetch(
            ids,
            text=plan.embed_text,
            highlight=plan.highlight,
            filters=plan.clauses,
            clause=plan.bm25_clause,
            index=plan.target,
        )
