"""Stage 2, **retrieve**: a :class:`Plan` in, each leg's :class:`LegOutcome` out.

The legs run concurrently (``parallel``: the kNN leg starts first, and the BM25 request is on the wire while
the query is embedded) or in one ``_msearch`` after the embedding. Each leg has its own budget
(``leg_timeout_s``); a failed or late leg becomes data (``outcome.error``), so the other leg's hits survive
it. Zero-result recovery (opt-in) retries an empty BM25 leg with fuzzy matching. A plan on a point-in-time
(a walk's page) runs its legs there, in a total order (``search_after`` can continue them).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from embeddings import Vector

from .._dsl.queries import (
    EXACT_CANDIDATES,
    bm25_fuzzy_request,
    bm25_request,
    knn_query_request,
    knn_request,
    msearch_body,
    on_pit,
)
from .._errors import SearchError
from .._observability.tracing import mark_error, span
from .._transport.backend import Backend
from .._transport.translate import msearch_item_error, timeout_error
from .plan import Plan
from .state import LegOutcome

__all__ = ["Retriever", "bm25_body"]


class Retriever:
    """Runs the legs of a plan against Elasticsearch (and the embedder) through the backend."""

    def __init__(self, backend: Backend) -> None:
        self._b = backend

    async def retrieve(
        self, plan: Plan, vector: asyncio.Future[Vector | None] | None = None
    ) -> tuple[dict[str, LegOutcome], list[str]]:
        """Each leg's outcome, and the recovery that served (``["fuzzy"]`` or ``[]``). ``vector``: where the
        kNN leg puts the query's vector as soon as it has it (None there when it could not be had), for a
        request that runs alongside the legs (the facets)."""
        try:
            if plan.round_trip == "msearch":
                outcomes = await self._legs_msearch(plan, vector)
            else:
                outcomes = await self._legs_parallel(plan, vector)
        finally:
            if vector is not None and not vector.done():
                vector.set_result(None)
        bm25 = outcomes.get("bm25")
        if plan.recover and bm25 is not None and bm25.error is None and not bm25.ids:
            fuzzy = LegOutcome("bm25")
            body = bm25_fuzzy_request(plan.embed_text, scope=plan.scope, size=plan.window)
            budget = self._b.settings.leg_timeout_s
            await self.run_leg(fuzzy, lambda scope: self._send(fuzzy, plan, body, budget, scope))
            if fuzzy.error is None and fuzzy.ids:
                fuzzy.latency_ms += bm25.latency_ms
                outcomes["bm25"] = fuzzy
                return outcomes, ["fuzzy"]
        return outcomes, []

    async def run_leg(self, outcome: LegOutcome, work: Callable[[asyncio.Timeout], Awaitable[None]]) -> LegOutcome:
        """Run one leg within its budget; its failure becomes data (``outcome.error``), never an exception.
        ``work`` gets the budget's timeout scope (for :meth:`Backend.es_call`'s ``within``)."""
        started = time.perf_counter()
        budget = self._b.settings.leg_timeout_s
        with span(f"hybrid_search.leg.{outcome.leg}", {"search.leg": outcome.leg}) as leg_span:
            try:
                async with asyncio.timeout(budget) as scope:
                    await work(scope)
            except TimeoutError:
                outcome.failed(timeout_error(outcome.leg, outcome.waiting_on, budget))
            except SearchError as exc:
                outcome.failed(exc)
            outcome.latency_ms = (time.perf_counter() - started) * 1000
            leg_span.set_attribute("search.leg.hits", len(outcome.ids))
            if outcome.error is not None:
                mark_error(leg_span, outcome.error, reason=outcome.error.reason)
        return outcome

    async def _legs_parallel(self, plan: Plan, shared: asyncio.Future[Vector | None] | None) -> dict[str, LegOutcome]:
        """The kNN leg starts first: its path is the longer (the embedder, then Elasticsearch), and the BM25
        request goes on the wire as soon as it waits on either. (Started second, the kNN request left 0.4 ms
        later, on the critical path: the slower leg in two searches of three, even with its vector at hand.)"""
        coros: list[Awaitable[LegOutcome]] = []
        if "knn" in plan.legs:
            knn = LegOutcome("knn")
            coros.append(self.run_leg(knn, lambda scope: self._knn_leg(knn, plan, scope, shared)))
        if "bm25" in plan.legs:
            body = bm25_body(plan)
            bm25 = LegOutcome("bm25")
            budget = self._b.settings.leg_timeout_s
            coros.append(self.run_leg(bm25, lambda scope: self._send(bm25, plan, body, budget, scope)))
        done = {o.leg: o for o in await asyncio.gather(*coros)}
        return {leg: done[leg] for leg in plan.legs}  # (in the plan's order: the response's and the log's)

    async def _send(
        self, out: LegOutcome, plan: Plan, body: dict[str, Any], remaining_s: float, scope: asyncio.Timeout
    ) -> None:
        """One leg's request, on the plan's target or its point-in-time (whose id may change on the way)."""
        es = self._b.leg_es
        full = self._b.server_side(body, remaining_s)
        if plan.pit is None:
            resp = await self._b.es_call(
                lambda: es.search(index=plan.target, **full), deadline_s=remaining_s, within=scope
            )
        else:
            full = on_pit(full, *plan.pit)
            resp = await self._b.es_call(lambda: es.search(**full), deadline_s=remaining_s, within=scope)
            out.pit_id = resp.body.get("pit_id")
        out.answered(resp.body, keep_hits=plan.keeps_hits(out.leg))

    async def _knn_leg(
        self,
        out: LegOutcome,
        plan: Plan,
        scope: asyncio.Timeout,
        shared: asyncio.Future[Vector | None] | None = None,
    ) -> None:
        t0 = time.perf_counter()
        budget = self._b.settings.leg_timeout_s
        out.waiting_on = "embeddings"
        given = plan.query_vector
        vector = list(given) if given else await self._b.embed_query(plan.embed_text, deadline_s=budget, within=scope)
        if shared is not None and not shared.done():
            shared.set_result(vector)
        out.embed_ms = (time.perf_counter() - t0) * 1000
        out.vector = vector
        out.waiting_on = "elasticsearch"
        remaining = max(budget - (time.perf_counter() - t0), 0.001)
        await self._send(out, plan, _knn_body(plan, vector), remaining, scope)
        await self.check_model(out.index)

    async def similarities(self, plan: Plan, vector: Sequence[float], ids: Sequence[str]) -> dict[str, float]:
        """The kNN scores of ``ids`` (hits the kNN leg did not reach) for the leg's own ``vector``: the leg's
        request restricted to them (with more candidates allowed than the filter leaves — documents, and in
        an index with passages every passage of theirs — Elasticsearch scores every one of them exactly), so
        each is the score the leg would have given it. A failure is logged and gives nothing:
        those hits keep ``similarity=None``; the search stands."""
        scope = plan.scope.plus([{"ids": {"values": list(ids)}}])
        body = knn_request(
            vector,
            scope=scope,
            k=len(ids),
            # (a long document's passages outnumber the ids: the most candidates keeps every passage scored)
            num_candidates=EXACT_CANDIDATES if plan.passages else len(ids),
            passages=plan.passages,
            head_vectors=plan.head_vectors,
            inner_hits=False,
            passage_weight=plan.passage_weight,
        )
        probe = LegOutcome("knn")
        budget = self._b.settings.leg_timeout_s
        await self.run_leg(probe, lambda within: self._send(probe, plan, body, budget, within))
        if probe.error is not None:
            self._b.events.emit(
                30,
                "similarities of the hits the kNN leg did not reach could not be measured",
                "search.similarities_failed",
                {"search.ids": len(ids), "error.type": type(probe.error).__name__, "error.reason": probe.error.reason},
            )
            return {}
        return {doc_id: float(score) for doc_id, score in zip(probe.ids, probe.scores, strict=True)}

    async def check_model(self, index: str | None) -> None:
        """The kNN leg's hits (``index``: the first hit's) come from an index of the query's model (after a
        reembed promoted a version built with another one, a client still configured with the old model gets
        :class:`ModelMismatch` here, and a hybrid search its BM25 leg alone, instead of the nearest neighbours
        of a foreign vector). One dict lookup per search; the index's ``_meta`` is read once per index."""
        if index is None:
            return
        known = self._b.metadata.embeddings
        meta = known[index] if index in known else await self._b.metadata.embedding(index)
        self._b.check_vectors(index, meta)

    async def _legs_msearch(self, plan: Plan, shared: asyncio.Future[Vector | None] | None) -> dict[str, LegOutcome]:
        """Both legs in one ``_msearch``: the query is embedded first (the kNN item needs the vector), then
        one request; a per-item error fails that leg only (the degraded-result machinery applies)."""
        budget = self._b.settings.leg_timeout_s
        t0 = time.perf_counter()
        outcomes: dict[str, LegOutcome] = {leg: LegOutcome(leg) for leg in plan.legs}
        with span("hybrid_search.msearch", {"search.legs": list(plan.legs)}) as ms_span:
            searches: list[dict[str, Any]] = []
            order: list[str] = []
            if "knn" in outcomes:
                knn = outcomes["knn"]
                knn.waiting_on = "embeddings"
                try:
                    async with asyncio.timeout(budget) as scope:
                        given = plan.query_vector
                        vector = (
                            list(given)
                            if given
                            else await self._b.embed_query(plan.embed_text, deadline_s=budget, within=scope)
                        )
                    if shared is not None and not shared.done():
                        shared.set_result(vector)
                    knn.embed_ms = (time.perf_counter() - t0) * 1000
                    knn.vector = vector
                    body = _knn_body(plan, vector)
                    searches += self._msearch_item(plan.target, body, budget - (time.perf_counter() - t0))
                    order.append("knn")
                except TimeoutError:
                    knn.failed(timeout_error("knn", "embeddings", budget))
                except SearchError as exc:
                    knn.failed(exc)
                knn.waiting_on = "elasticsearch"
            if "bm25" in outcomes:
                body = bm25_body(plan)
                item = self._msearch_item(plan.target, body, budget - (time.perf_counter() - t0))
                searches = [*item, *searches]
                order.insert(0, "bm25")
            if searches:
                remaining = max(budget - (time.perf_counter() - t0), 0.001)
                es = self._b.leg_es  # (made once: options() per call built a whole client, 0.1 ms)
                try:
                    async with asyncio.timeout(remaining) as scope:
                        resp = await self._b.es_call(
                            lambda: es.msearch(searches=searches), deadline_s=remaining, within=scope
                        )
                    for leg, item in zip(order, resp.body["responses"], strict=True):
                        if "error" in item:
                            outcomes[leg].failed(msearch_item_error(item))
                        else:
                            outcomes[leg].answered(item, keep_hits=plan.keeps_hits(leg))
                    if "knn" in order and outcomes["knn"].error is None:
                        try:
                            await self.check_model(outcomes["knn"].index)
                        except SearchError as exc:
                            outcomes["knn"].failed(exc)
                except TimeoutError:
                    for leg in order:
                        outcomes[leg].failed(timeout_error(leg, "elasticsearch", budget))
                except SearchError as exc:
                    for leg in order:
                        outcomes[leg].failed(exc)
            elapsed = (time.perf_counter() - t0) * 1000
            for o in outcomes.values():
                o.latency_ms = elapsed
                if o.error is not None:
                    mark_error(ms_span, o.error, reason=o.error.reason)
        return outcomes

    def _msearch_item(self, index: str, body: dict[str, Any], remaining_s: float) -> list[dict[str, Any]]:
        full = self._b.server_side(body, max(remaining_s, 0.001))
        header: dict[str, Any] = {"index": index}
        if "allow_partial_search_results" in full:
            header["allow_partial_search_results"] = full.pop("allow_partial_search_results")
        return [header, msearch_body(full)]


def bm25_body(plan: Plan) -> dict[str, Any]:
    """The BM25 leg's request, the same in every round-trip shape (on a point-in-time: ``window`` deep)."""
    body = bm25_request(
        plan.text,
        scope=plan.scope,
        size=plan.window,
        clause=plan.bm25_clause,
        passage_text=plan.passage_text,
        head_vectors=plan.head_vectors,
    )
    return _arranging(plan, body)


def _arranging(plan: Plan, body: dict[str, Any]) -> dict[str, Any]:
    """What the arrange stage needs of each candidate, brought by the legs: the grouping field's value (a
    doc value) and, for diversity, the document's head vector (from ``_source`` or its doc values)."""
    if plan.group_by is not None:
        body["docvalue_fields"] = [*body.get("docvalue_fields", ()), plan.group_by]
    if plan.diversity > 0.0 and plan.vectors_in_source:
        body["source"] = {"includes": ["embedding"]}
    elif plan.diversity > 0.0:  # (vectors left out of _source: their doc values, Elasticsearch 8.17+)
        body["docvalue_fields"] = [*body.get("docvalue_fields", ()), "embedding"]
    return body


def _knn_body(plan: Plan, vector: Sequence[float]) -> dict[str, Any]:
    """The kNN leg's request: the top-level ``knn`` section; on a point-in-time the ``knn`` query (the
    ``window`` nearest documents as an ordinary scored query, so a walk can page on with ``search_after``)."""
    if plan.pit is not None:
        return _arranging(
            plan,
            knn_query_request(
                vector,
                scope=plan.scope,
                depth=plan.candidates,
                size=plan.window,
                passages=plan.passages,
                head_vectors=plan.head_vectors,
                passage_weight=plan.passage_weight,
            ),
        )
    body = knn_request(
        vector,
        scope=plan.scope,
        k=plan.window,
        num_candidates=plan.candidates,
        similarity=plan.similarity,
        passages=plan.passages,
        head_vectors=plan.head_vectors,
        inner_hits=not plan.passages_at_fetch,
        passage_weight=plan.passage_weight,
    )
    return _arranging(plan, body) if plan.group_by is not None or plan.diversity > 0.0 else body
