"""The engine: every read path's entry points, and a search wired from them. Holds no per-request state.

::

    SearchRequest ─plan─▶ Plan ─retrieve─▶ LegOutcomes (ids, scores) ─fuse─▶ Fused ─rerank─▶ Ranked
                  ─fetch─▶ hits (one request: documents, highlights) ─respond─▶ SearchResponse

The other read paths are built on the same entry points — :meth:`Engine.plan`, :meth:`Engine.retrieve`,
:meth:`Engine.fuse`, :meth:`Engine.fetch` — never on copies of them: the deep walk (``storage._paging.walk``)
plans, runs the legs on a point-in-time, fuses and fetches a page; the answer (``storage._rag.answerer``) runs a
search; tuning and evaluation (``storage.evaluation``) read each query's legs through the client's
``retrieve()``. With ``scopes`` (the zero-result cascade), retrieve → fetch runs once per filter tier until
one finds something; the response says which tier served.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping
from typing import Any

from embeddings import Vector

from .._dsl.aggregations import FacetSpec
from .._dsl.mapping import valid_target
from .._dsl.tenancy import tenants_of
from .._errors import InvalidQuery, PartialResults, SearchError
from .._fusion.methods import LegHit
from .._fusion.setting import FusionInForce, FusionSetting, configured_fusion
from .._observability.log import query_hash
from .._observability.tracing import AttrValue, decided_once, span
from .._transport.backend import Backend
from .._types.requests import SearchRequest
from .._types.results import SearchResponse
from .arrange import Group, arranged_page
from .enrich import Enricher, Fetched, knn_passages, page_hits
from .facets import FacetOutcome, FacetStage
from .fuse import Fused, fuse_legs, raise_if_failed
from .plan import Plan, plan_search
from .rerank import RerankStage
from .respond import build_response, extras, log_search, mark_span
from .retrieve import Retriever, bm25_body
from .state import LegOutcome, SearchState

__all__ = ["Engine"]


class Engine:
    def __init__(self, backend: Backend) -> None:
        self._b = backend
        self._retriever = Retriever(backend)
        self._reranker = RerankStage(backend)
        self._enricher = Enricher(backend)
        self._facets = FacetStage(backend)
        #: The fusion below the call, per stored setting (configured_fusion): resolved once, not per search.
        self._below: dict[FusionSetting | None, FusionInForce] = {}

    # -- the entry points ----------------------------------------------------------------------------------

    def below_call(self, stored: FusionSetting | None) -> FusionInForce:
        """The fusion a search of a target with ``stored`` uses where the call says nothing (settings, then
        the stored setting, then the defaults)."""
        below = self._below.get(stored)
        if below is None:  # once per stored value: the settings never change
            s = self._b.settings
            below = self._below[stored] = configured_fusion(s.fusion_setting(), s.fusion_explicit(), stored)
        return below

    async def fusion_in_force(self, target: str | None = None) -> FusionInForce:
        """The fusion a search of ``target`` (default the alias) uses when the call passes none, read now."""
        stored = (await self._b.metadata.read_target(target or self._b.settings.index)).fusion
        return self.below_call(stored)

    async def plan(self, request: SearchRequest) -> Plan:
        """Stage 1: the request validated against the settings and the fusion stored with its target."""
        b = self._b
        # The target is checked before anything is sent for it (its mapping is looked up next).
        target = await b.metadata.target(valid_target(request.index) if request.index is not None else b.settings.index)
        stored = target.fusion
        below = self._below.get(stored) or self.below_call(stored)
        plan = plan_search(
            request,
            b.settings,
            has_reranker=b.reranker is not None,
            below=below,
            passages=target.searches_passages,
            # Head first (long documents that agree with their heads): BM25 reads the whole text only.
            passage_text=target.passage_text and target.searches_passages and not target.head_first,
            head_first=target.head_first,
            head_vectors=target.head_vectors,
            vectors_in_source=target.vectors_in_source,
            highlight_limit=target.highlight_limit,
            metadata_types=(await self._metadata_types(request, target.metadata_types))
            if request.facets
            else target.metadata_types,
        )
        if plan.query_vector is not None and len(plan.query_vector) != b.embedder.dimensions:
            raise InvalidQuery(
                f"query_vector has {len(plan.query_vector)} dimensions; this client's model "
                f"({b.embedder.model_id}) makes {b.embedder.dimensions}: make it with the same model"
            )
        return plan

    async def _metadata_types(self, request: SearchRequest, known: Mapping[str, str]) -> Mapping[str, str]:
        """The target's metadata mappings for a facet request; read again when a key asked for is not
        among them (a key added since they were read), so only a key truly unmapped is refused."""
        facets = request.facets or ()
        keys = {str(f.field if isinstance(f, FacetSpec) else f).partition(":")[0] for f in facets}
        wanted = {k.removeprefix("metadata.") for k in keys if k.startswith("metadata.")}
        if wanted <= set(known):
            return known
        return (await self._b.metadata.read_target(request.index or self._b.settings.index)).metadata_types

    async def retrieve(self, plan: Plan) -> tuple[dict[str, LegOutcome], list[str]]:
        """Stage 2: each leg's outcome (ids and scores; a failure is data), and the recovery that served."""
        return await self._retriever.retrieve(plan)

    def fuse(self, plan: Plan, outcomes: dict[str, LegOutcome]) -> Fused:
        """Stage 3: the legs fused, or the error when nothing acceptable is left (every leg failed, or one
        did or answered partially with ``strict=True``); hits of another tenant dropped (and logged)."""
        raise_if_failed(plan, outcomes)
        fused = fuse_legs(plan, outcomes)
        if fused.dropped:
            self.tenant_violation(fused.dropped)
        return fused

    def tenant_violation(self, dropped: int) -> None:
        """The second tenant check dropped hits (a search's or a walk's): one ERROR event."""
        self._b.events.emit(
            40, "results of another tenant dropped", "search.tenant_violation", {"search.dropped": dropped}
        )

    async def leg_lists(self, request: SearchRequest) -> dict[str, list[LegHit]]:
        """Each leg's ranked list before fusion (ids and raw scores), the tenant re-checked; a failed or
        partial leg raises (as a strict search does)."""
        self._b.check_open()
        plan = dataclasses.replace(await self.plan(request), strict=True)
        outcomes, _ = await self.retrieve(plan)
        raise_if_failed(plan, outcomes)
        tenant = plan.tenant_id
        out: dict[str, list[LegHit]] = {}
        for leg, o in outcomes.items():
            ranked = [LegHit(doc_id, float(score)) for doc_id, score in zip(o.ids, o.scores, strict=True)]
            if tenant is not None:
                tenant_of = tenants_of(o.kept())
                kept = [h for h in ranked if tenant_of.get(h.id) == tenant]
                if len(kept) != len(ranked):
                    self.tenant_violation(len(ranked) - len(kept))
                ranked = kept
            out[leg] = ranked
        return out

    async def explain_bm25(self, request: SearchRequest, doc_id: str) -> dict[str, Any] | None:
        """Elasticsearch's explanation of the BM25 leg's score for ``doc_id`` (the leg's own query: its
        filters, tenant and fields), or None when the document does not match it."""
        self._b.check_open()
        plan = await self.plan(request)
        query = bm25_body(plan)["query"]
        es = self._b.es.options(ignore_status=404)  # (an id the index does not hold: not matched)
        body = (await self._b.es_call(lambda: es.explain(index=plan.target, id=doc_id, query=query))).body
        return body.get("explanation") if body.get("matched") else None

    async def fetch(self, plan: Plan, ids: list[str]) -> Fetched:
        """Stage 5: the documents (and highlights) of ``ids``, in one request within the plan's scope."""
        return await self._enricher.fetch(plan, ids)

    # -- a search ------------------------------------------------------------------------------------------

    async def search(self, request: SearchRequest) -> SearchResponse:
        self._b.check_open()
        plan = await self.plan(request)
        with decided_once() as recording:  # whether the search's spans record: asked once, read by each
            return await self._search(request, plan, recording)

    async def _search(self, request: SearchRequest, plan: Plan, recording: bool) -> SearchResponse:
        state = SearchState(plan=plan)
        tiers = [plan] + [plan.widened(scope) for scope in (request.scopes or ())]
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
        events = self._b.events
        with span("hybrid_search.search", attrs) as search_span:
            for tier, tier_plan in enumerate(tiers):
                try:
                    response = await self._tier(state, tier_plan)
                except SearchError as exc:
                    log_search(events, state, state.outcomes, None, error=exc)
                    raise
                if response.total_fused or tier == len(tiers) - 1:
                    break
            if tier:  # (build_response measured latency_ms from the search's start, tiers included)
                response = response.model_copy(update={"scope_tier": tier, "recovery": [*response.recovery, "scope"]})
            log_search(events, state, state.outcomes, response)
            mark_span(search_span, response)
            return response

    async def _tier(self, state: SearchState, plan: Plan) -> SearchResponse:
        # (the stages are called directly here: this is the search's hot path, the entry points above wrap it)
        facets: FacetOutcome | None = None
        if plan.facets:  # alongside the legs; the kNN leg hands over the query's vector
            vector: asyncio.Future[Vector | None] | None = None
            if "knn" in plan.legs:
                vector = asyncio.get_running_loop().create_future()
            (state.outcomes, state.recovery), facets = await asyncio.gather(
                self._retriever.retrieve(plan, vector), self._facets.run(plan, vector)
            )
        else:
            state.outcomes, state.recovery = await self._retriever.retrieve(plan)
        raise_if_failed(plan, state.outcomes)
        fused = fuse_legs(plan, state.outcomes)
        if fused.dropped:
            self.tenant_violation(fused.dropped)
        # The documents (and highlights) of what is shown: with rerank, the candidates the reranker reads
        # (the page is among them); else the page. One request either way.
        fetched = Fetched()
        knn_leg = state.outcomes.get("knn")
        knn = knn_leg if plan.passages else None
        searched = knn.vector if knn is not None else None
        if plan.rerank and fused.hits:
            fetched = await self._enricher.fetch(plan, fused.hits.top_ids(plan.rerank_candidates), searched)
        ranked = await self._reranker.run(plan, fused.hits, fetched.sources)
        groups: list[Group] | None = None
        if plan.group_by is not None or plan.diversity > 0.0:
            candidates = {str(h["_id"]): h for o in state.outcomes.values() for h in reversed(o.kept())}
            page, groups = arranged_page(plan, ranked, candidates)
        else:
            page = ranked.page(plan.offset, plan.limit)
        # Similarities of the shown hits the kNN leg did not reach (asked for): measured alongside the fetch.
        probe = knn_leg.vector if plan.similarities and knn_leg is not None else None
        unreached = [hit[0] for hit, _ in page if "knn" not in hit[4]] if probe is not None else []
        measured: dict[str, float] | None = None
        if not plan.rerank:
            fetching = self._enricher.fetch(plan, [hit[0] for hit, _ in page], searched)
            if probe is not None and unreached:
                fetched, measured = await asyncio.gather(fetching, self._retriever.similarities(plan, probe, unreached))
            else:
                fetched = await fetching
        elif probe is not None and unreached:
            measured = await self._retriever.similarities(plan, probe, unreached)
        state.fetched = fetched
        if fetched.partial and plan.strict and fetched.shards is not None:
            raise PartialResults(
                f"fetch answered from {fetched.shards.successful} of {fetched.shards.total} shards"
                " (strict=True does not accept partial results)",
                shards={"fetch": fetched.shards},
            )
        passages = None
        if knn is not None and plan.passages_at_fetch:  # (the hits the kNN leg found: theirs)
            found = set(knn.ids)
            passages = knn_passages([h for i, h in fetched.hits.items() if i in found])
        elif knn is not None:
            passages = knn_passages(knn.kept())
        hits = page_hits(
            page, fetched, highlight=plan.highlight, knn=passages, shown=plan.passages, similarities=measured
        )
        response = build_response(plan, state, fused, ranked, hits)
        if facets is not None or groups is not None:
            response = response.model_copy(update=extras(plan, facets, groups, {h["id"] for h in hits}))
        return response
