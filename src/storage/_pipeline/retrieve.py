"""Stage 2, **retrieve**: a :class:`Plan` in, each leg's :class:`LegOutcome` out.

The legs run concurrently (``parallel``: the BM25 request is on the wire while the query is embedded) or
in one ``_msearch`` after the embedding. Each leg has its own budget (``leg_timeout_s``); a failed or late
leg becomes data (``outcome.error``), so the other leg's hits survive it. Zero-result recovery (opt-in)
retries an empty BM25 leg with fuzzy matching.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from .._backend import Backend
from .._errors import DependencyError, IndexNotFound, SearchError
from .._errors_map import error_type, shards_unavailable, timeout_error
from .._queries import bm25_fuzzy_request, bm25_request, knn_request, msearch_body
from .._settings import SearchSettings
from .._tracing import mark_error, span
from .plan import Plan
from .state import LegOutcome

__all__ = ["Retriever", "error_reason", "server_side"]


def server_side(body: dict[str, Any], settings: SearchSettings, remaining_s: float) -> dict[str, Any]:
    """``body`` with a server-side ``timeout`` (so Elasticsearch stops work the client has given up on: 90 %
    of what is left of the budget, unless ``search_timeout_s`` says otherwise) and, when partial results
    are not allowed, ``allow_partial_search_results: false`` (a request parameter, popped by the caller)."""
    timeout = settings.search_timeout_s if settings.search_timeout_s is not None else 0.9 * remaining_s
    out = {**body, "timeout": f"{max(int(timeout * 1_000_000), 1)}micros"}
    if not settings.allow_partial_search_results:
        out["allow_partial_search_results"] = False
    return out


class Retriever:
    """Runs the legs of a plan against Elasticsearch (and the embedder) through the backend."""

    def __init__(self, backend: Backend) -> None:
        self._b = backend

    async def retrieve(self, plan: Plan) -> tuple[dict[str, LegOutcome], list[str]]:
        """Each leg's outcome, and the recovery that served (``["fuzzy"]`` or ``[]``)."""
        if plan.round_trip == "msearch":
            outcomes = await self._legs_msearch(plan)
        else:
            outcomes = await self._legs_parallel(plan)
        bm25 = outcomes.get("bm25")
        if plan.recover and bm25 is not None and bm25.error is None and not bm25.hits:
            fuzzy = LegOutcome("bm25")
            body = bm25_fuzzy_request(
                plan.embed_text, filters=plan.clauses, size=plan.window, docvalue_fields=_doc_values(plan)
            )
            await self.run_leg(fuzzy, lambda scope: self._search_leg(fuzzy, plan.target, body, scope))
            if fuzzy.error is None and fuzzy.hits:
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
                outcome.hits = []
                outcome.error = timeout_error(outcome.leg, outcome.waiting_on, budget)
            except SearchError as exc:
                outcome.hits = []
                outcome.error = exc
            outcome.latency_ms = (time.perf_counter() - started) * 1000
            leg_span.set_attribute("search.leg.hits", len(outcome.hits))
            if outcome.error is not None:
                mark_error(leg_span, outcome.error, reason=outcome.error.reason)
        return outcome

    async def _legs_parallel(self, plan: Plan) -> dict[str, LegOutcome]:
        coros: list[Awaitable[LegOutcome]] = []
        if "bm25" in plan.legs:
            body = _bm25_body(plan)
            bm25 = LegOutcome("bm25")
            coros.append(self.run_leg(bm25, lambda scope: self._search_leg(bm25, plan.target, body, scope)))
        if "knn" in plan.legs:
            knn = LegOutcome("knn")
            coros.append(self.run_leg(knn, lambda scope: self._knn_leg(knn, plan, scope)))
        return {o.leg: o for o in await asyncio.gather(*coros)}

    async def _search_leg(self, out: LegOutcome, index: str, body: dict[str, Any], scope: asyncio.Timeout) -> None:
        es = self._b.leg_es
        budget = self._b.settings.leg_timeout_s
        full = server_side(body, self._b.settings, budget)
        resp = await self._b.es_call(lambda: es.search(index=index, **full), deadline_s=budget, within=scope)
        out.answered(resp.body)

    async def _knn_leg(self, out: LegOutcome, plan: Plan, scope: asyncio.Timeout) -> None:
        t0 = time.perf_counter()
        budget = self._b.settings.leg_timeout_s
        out.waiting_on = "embeddings"
        vector = await self._b.embed_query(plan.embed_text, deadline_s=budget, within=scope)
        out.embed_ms = (time.perf_counter() - t0) * 1000
        out.waiting_on = "elasticsearch"
        body = _knn_body(plan, vector)
        es = self._b.leg_es
        remaining = max(budget - (time.perf_counter() - t0), 0.001)
        full = server_side(body, self._b.settings, remaining)
        resp = await self._b.es_call(lambda: es.search(index=plan.target, **full), deadline_s=remaining, within=scope)
        out.answered(resp.body)
        await self.check_model(out.hits, scope)

    async def check_model(self, hits: Sequence[Mapping[str, Any]], scope: asyncio.Timeout | None) -> None:
        """The kNN leg's hits come from an index of the query's model (after a reembed promoted a version
        built with another one, a client still configured with the old model gets :class:`ModelMismatch`
        here, and a hybrid search its BM25 leg alone, instead of the nearest neighbours of a foreign
        vector). One dict lookup per search; the index's ``_meta`` is read once per index."""
        index = hits[0].get("_index") if hits else None
        if index is None:
            return
        models = self._b.index_models
        model = models[index] if index in models else await self._b.index_model(index)
        self._b.check_vectors(index, model)

    async def _legs_msearch(self, plan: Plan) -> dict[str, LegOutcome]:
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
                        vector = await self._b.embed_query(plan.embed_text, deadline_s=budget, within=scope)
                    knn.embed_ms = (time.perf_counter() - t0) * 1000
                    body = _knn_body(plan, vector)
                    searches += self._msearch_item(plan.target, body, budget - (time.perf_counter() - t0))
                    order.append("knn")
                except TimeoutError:
                    knn.error = timeout_error("knn", "embeddings", budget)
                except SearchError as exc:
                    knn.error = exc
                knn.waiting_on = "elasticsearch"
            if "bm25" in outcomes:
                body = _bm25_body(plan)
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
                            outcomes[leg].error = _msearch_item_error(item)
                        else:
                            outcomes[leg].answered(item)
                    if "knn" in order and outcomes["knn"].error is None:
                        try:
                            await self.check_model(outcomes["knn"].hits, None)
                        except SearchError as exc:
                            outcomes["knn"].hits, outcomes["knn"].error = [], exc
                except TimeoutError:
                    for leg in order:
                        outcomes[leg].error = timeout_error(leg, "elasticsearch", budget)
                except SearchError as exc:
                    for leg in order:
                        outcomes[leg].error = exc
            elapsed = (time.perf_counter() - t0) * 1000
            for o in outcomes.values():
                o.latency_ms = elapsed
                if o.error is not None:
                    mark_error(ms_span, o.error, reason=o.error.reason)
        return outcomes

    def _msearch_item(self, index: str, body: dict[str, Any], remaining_s: float) -> list[dict[str, Any]]:
        full = server_side(body, self._b.settings, max(remaining_s, 0.001))
        header: dict[str, Any] = {"index": index}
        if "allow_partial_search_results" in full:
            header["allow_partial_search_results"] = full.pop("allow_partial_search_results")
        return [header, msearch_body(full)]


def _bm25_body(plan: Plan) -> dict[str, Any]:
    """The BM25 leg's request, the same in both round-trip shapes."""
    return bm25_request(
        plan.text, filters=plan.clauses, size=plan.window, clause=plan.bm25_clause, docvalue_fields=_doc_values(plan)
    )


def _knn_body(plan: Plan, vector: Sequence[float]) -> dict[str, Any]:
    """The kNN leg's request, the same in both round-trip shapes."""
    return knn_request(
        vector,
        filters=plan.clauses,
        k=plan.window,
        num_candidates=plan.candidates,
        similarity=plan.similarity,
        docvalue_fields=_doc_values(plan),
    )


def _doc_values(plan: Plan) -> tuple[str, ...]:
    """What the legs return besides ids and scores: the tenant, for the fuse stage's second check."""
    return ("tenant_id",) if plan.tenant_id is not None else ()


def error_reason(body: Any) -> str:
    if isinstance(body, Mapping) and isinstance(body.get("error"), Mapping):
        return str(body["error"].get("reason", body["error"]))
    return str(body)


def _msearch_item_error(item: Mapping[str, Any]) -> SearchError:
    status = item.get("status")
    error = item.get("error")
    kind = error_type({"error": error}) if isinstance(error, Mapping) else None
    if status == 404 and kind == "index_not_found_exception":
        return IndexNotFound(f"index not found: {error_reason(item)}; call ensure_index()")
    message = f"Elasticsearch answered {status} for this leg: {kind or 'error'}: {error_reason(item)}"
    if kind == "search_phase_execution_exception" and status in (503, 504):
        return shards_unavailable(message, status)
    return DependencyError(
        message, dependency="elasticsearch", status=status if isinstance(status, int) else None, reason="http_error"
    )
