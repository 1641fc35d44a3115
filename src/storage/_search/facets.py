"""Stage 2b, **facets** (only when asked): counts over the search's match set, in one request sent
alongside the legs — the BM25 part at once, the kNN part as soon as the query's vector exists (the kNN leg
shares it: the query is embedded once). See ``storage._dsl.aggregations`` for what "matched" means.

A leg that fails leaves the facets over what answered (``over`` says which legs' matches they count, and
the response flags them partial); the facet request failing leaves the hits as they are, without facets
(``facets_error`` says why).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from embeddings import Vector

from .._dsl.aggregations import facet_aggregations, read_facets
from .._dsl.queries import facet_request
from .._errors import SearchError
from .._transport.backend import Backend
from .._transport.translate import timeout_error
from .._types.models import Leg
from .plan import Plan

__all__ = ["FacetOutcome", "FacetStage"]


@dataclass
class FacetOutcome:
    buckets: dict[str, list[tuple[str, int]]] | None = None
    #: The legs whose matches the counts are over.
    over: list[Leg] = field(default_factory=list)
    error: SearchError | None = None


class FacetStage:
    def __init__(self, backend: Backend) -> None:
        self._b = backend

    async def run(self, plan: Plan, vector: asyncio.Future[Vector | None] | None) -> FacetOutcome:
        """The facets of ``plan``; ``vector``: the kNN leg's query vector as it becomes known (None when it
        could not be had: the facets then count the BM25 matches alone)."""
        out = FacetOutcome()
        query_vector = await vector if vector is not None else None
        over: list[Leg] = []
        if "bm25" in plan.legs:
            over.append("bm25")
        if query_vector is not None:
            over.append("knn")
        if not over:
            return out
        body = facet_request(
            plan.text if "bm25" in plan.legs else "",
            query_vector,
            scope=plan.scope,
            aggs=facet_aggregations(plan.facets),
            k=plan.window,
            num_candidates=plan.candidates,
            clause=plan.bm25_clause,
            passages=bool(plan.passages),
            head_vectors=plan.head_vectors,
        )
        b = self._b
        budget = b.settings.leg_timeout_s
        full = b.server_side(body)
        es = b.leg_es
        try:
            async with asyncio.timeout(budget) as scope:
                resp = await b.es_call(lambda: es.search(index=plan.target, **full), deadline_s=budget, within=scope)
        except TimeoutError:
            out.error = timeout_error("facets", "elasticsearch", budget)
            return out
        except SearchError as exc:
            out.error = exc
            return out
        out.buckets = read_facets(resp.body.get("aggregations") or {}, plan.facets)
        out.over = over
        return out
