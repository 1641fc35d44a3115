"""Deep paging: a stable walk through the fused results on a point-in-time (see :mod:`storage._paging`
for the walk's order and its cursor). Reuses the plan stage, the legs' runner, fusion and the fetch."""

from __future__ import annotations

import asyncio
import functools
import math
import time
from collections.abc import AsyncIterator, Awaitable, Mapping
from typing import Any

from ._backend import Backend
from ._errors import (
    ClientClosed,
    CursorExpired,
    DependencyError,
    IndexNotFound,
    InvalidQuery,
    PartialResults,
    SearchError,
    SearchFailed,
)
from ._filters import FilterInput
from ._fusion import FusionMethod, fused_list
from ._logging import event, query_hash
from ._models import SearchMode, SearchPage, ShardReport
from ._paging import decode_cursor, encode_cursor, fingerprint
from ._pipeline.enrich import Enricher, hit_fields
from ._pipeline.fuse import hit_columns, log_tenant_violation
from ._pipeline.plan import Plan, QuerySyntax, SearchRequest, plan_search
from ._pipeline.retrieve import Retriever, server_side
from ._pipeline.state import LegOutcome
from ._queries import bm25_request, knn_query_request, on_pit
from ._tracing import span

__all__ = ["Walker"]


class Walker:
    """Pages of a walk: :meth:`search_page`, :meth:`walk`, :meth:`close_cursor`."""

    def __init__(self, backend: Backend, retriever: Retriever, enricher: Enricher) -> None:
        self._b = backend
        self._retriever = retriever
        self._enricher = enricher

    async def search_page(
        self,
        query: str,
        *,
        cursor: str | None = None,
        mode: SearchMode = "hybrid",
        filters: FilterInput = None,
        tenant_id: str | None = None,
        page_size: int = 10,
        depth: int | None = None,
        fusion: FusionMethod | None = None,
        rrf_k: int | None = None,
        weights: Mapping[str, float] | None = None,
        highlight: bool = True,
        index: str | None = None,
        syntax: QuerySyntax = "plain",
    ) -> SearchPage:
        """One page of a walk; the public contract is documented on ``SearchClient.search_page``."""
        self._b.check_open()
        started = time.perf_counter()
        d = depth if depth is not None else self._b.settings.paging_depth
        if not 1 <= page_size <= 1000:
            raise InvalidQuery("page_size must be between 1 and 1000")
        if not 1 <= d <= 10_000:
            raise InvalidQuery("depth must be between 1 and 10000")
        request = SearchRequest(
            query=query,
            mode=mode,
            filters=filters,
            tenant_id=tenant_id,
            limit=min(page_size, d),
            fusion=fusion,
            rrf_k=rrf_k,
            weights=weights,
            window=d,
            num_candidates=d,
            strict=True,
            highlight=highlight,
            index=index,
            round_trip="parallel",
            syntax=syntax,
            rerank=False,
        )
        stored = await self._b.fusion_for(request.index or self._b.settings.index)
        plan = plan_search(request, self._b.settings, has_reranker=False, stored=stored)
        fp = fingerprint(
            {"q": plan.text, "s": plan.bm25_clause is not None, "m": plan.mode, "f": plan.clauses, "i": plan.target}
            | {"fu": plan.method}
            | {"k": plan.k, "w": plan.weights, "d": d}
        )
        keep_alive = self._b.settings.pit_keep_alive
        if cursor is None:
            try:
                opened = await self._b.es_call(
                    lambda: self._b.es.open_point_in_time(index=plan.target, keep_alive=keep_alive)
                )
            except DependencyError as exc:
                if exc.reason == "shards_unavailable":  # Elasticsearch opens no point-in-time over missing shards
                    raise PartialResults(
                        f"a deep-paging walk needs every shard of {plan.target}; some are unavailable: {exc}",
                        shards={},
                    ) from exc
                raise
            state: dict[str, Any] = {"pit": opened.body["id"], "o": 0, "t": None, "tr": 0, "td": False}
            state |= {"p": 0, "n": 0, "fp": fp}
        else:
            try:
                state = decode_cursor(cursor)
            except ValueError as exc:
                raise InvalidQuery(str(exc)) from None
            if state.get("fp") != fp:
                raise InvalidQuery(
                    "this cursor belongs to another search: pass the same query, mode, filters, tenant, index, "
                    "fusion and depth as for its first page"
                )
        with span("hybrid_search.page", {"search.mode": plan.mode, "search.page": int(state["p"]) + 1}):
            try:
                return await self._walk_page(plan, state, d, page_size, keep_alive, started)
            except DependencyError as exc:
                if _pit_missing(exc):
                    raise CursorExpired(
                        f"the walk's point-in-time has expired (kept {keep_alive} between pages); start again"
                    ) from exc
                raise

    async def close_cursor(self, cursor: str) -> None:
        """End a walk early: close its point-in-time. Idempotent; an expired one is fine."""
        try:
            pit = str(decode_cursor(cursor)["pit"])
        except (ValueError, KeyError) as exc:
            raise InvalidQuery(str(exc)) from None
        await self._close_pit(pit)

    async def walk(self, query: str, *, page_size: int = 10, **options: Any) -> AsyncIterator[SearchPage]:
        """Every page of a walk, closing its point-in-time if left early (see ``SearchClient.walk``)."""
        cursor: str | None = None
        try:
            while True:
                page = await self.search_page(query, cursor=cursor, page_size=page_size, **options)
                cursor = page.next_cursor
                yield page
                if cursor is None:
                    return
        finally:
            if cursor is not None and not self._b.closed:
                await self.close_cursor(cursor)

    async def _close_pit(self, pit: str) -> None:
        try:
            await self._b.es_call(lambda: self._b.es.options(ignore_status=404).close_point_in_time(id=pit))
        except SearchError as exc:  # it expires by itself; never fail the caller for it
            event(30, "could not close a point-in-time", "search.pit_close_failed", {"error.type": type(exc).__name__})

    async def _walk_page(
        self, plan: Plan, state: dict[str, Any], depth: int, page_size: int, keep_alive: str, started: float
    ) -> SearchPage:
        pit: str = state["pit"]
        # 1. The head: each leg's top `depth` (ids and scores only), on the point-in-time, fused.
        outcomes = {leg: LegOutcome(leg) for leg in plan.legs}
        coros: list[Awaitable[LegOutcome]] = []
        if "bm25" in outcomes:
            body = on_pit(
                bm25_request(plan.text, filters=plan.clauses, size=depth, clause=plan.bm25_clause),
                pit,
                keep_alive,
            )
            coros.append(
                self._retriever.run_leg(outcomes["bm25"], lambda scope: self._pit_leg(outcomes["bm25"], body, scope))
            )
        if "knn" in outcomes:
            coros.append(
                self._retriever.run_leg(
                    outcomes["knn"], lambda scope: self._knn_pit_leg(outcomes["knn"], plan, pit, keep_alive, scope)
                )
            )
        await asyncio.gather(*coros)
        failed: dict[str, SearchError] = {leg: o.error for leg, o in outcomes.items() if o.error is not None}
        if failed:
            for error in failed.values():
                if isinstance(error, IndexNotFound | ClientClosed) or _pit_missing(error):
                    raise error
            raise SearchFailed("; ".join(f"{leg} leg failed: {err}" for leg, err in failed.items()), leg_errors=failed)
        for leg, o in outcomes.items():
            _require_complete(leg, o.shards)
        pit = next((o.pit_id for o in outcomes.values() if o.pit_id), pit)
        fused = fused_list(
            {leg: hit_columns(o.hits) for leg, o in outcomes.items()},
            method=plan.method,
            k=plan.k,
            weights=plan.weights,
        )
        offset = int(state["o"])
        chosen = fused.provenances(offset, offset + page_size)
        offset += len(chosen)
        # 2. The BM25 tail, once the head is used up: matches below `depth`, minus the kNN head's ids.
        bm25 = outcomes.get("bm25")
        tail_possible = bm25 is not None and len(bm25.hits) >= depth
        tail_after = (
            state["t"] if state["t"] is not None else (bm25.hits[-1]["sort"] if tail_possible and bm25 else None)
        )
        tail_rank, tail_done = int(state["tr"]), bool(state["td"])
        knn_ids = {str(h["_id"]) for h in outcomes["knn"].hits} if "knn" in outcomes else set()
        best = math.fsum(w / (plan.k + 1) for w in plan.weights.values()) if plan.method == "rrf" else 1.0
        in_tail = False
        while len(chosen) < page_size and tail_possible and not tail_done:
            in_tail = True
            size = min(2 * (page_size - len(chosen)) + 10, 1000)
            body = on_pit(
                bm25_request(plan.text, filters=plan.clauses, size=size, clause=plan.bm25_clause),
                pit,
                keep_alive,
                tail_after,
            )
            full = server_side(body, self._b.settings, self._b.settings.leg_timeout_s)
            resp = await self._b.es_call(
                functools.partial(self._b.es.search, **full), deadline_s=self._b.settings.leg_timeout_s
            )
            _require_complete("bm25 tail", ShardReport.from_body(resp.body))
            pit = resp.body.get("pit_id") or pit
            hits = resp.body["hits"]["hits"]
            consumed = 0
            for h in hits:
                if len(chosen) == page_size:
                    break
                consumed += 1
                tail_rank += 1
                tail_after = h["sort"]
                if str(h["_id"]) in knn_ids:
                    continue  # already in the head
                rank = depth + tail_rank
                score = plan.weights["bm25"] / (plan.k + rank) if plan.method == "rrf" else 0.0
                leg_scores = {"bm25": float(h.get("_score") or 0.0)}
                chosen.append((str(h["_id"]), score, min(score / best, 1.0), {"bm25": rank}, leg_scores))
            if len(hits) < size and consumed == len(hits):
                tail_done = True
        # 3. The page's documents and highlights: one request on the same point-in-time.
        docs: dict[str, dict[str, Any]] = {}
        if chosen:
            found = await self._enricher.fetch(
                [c[0] for c in chosen],
                text=plan.embed_text,
                highlight=plan.highlight,
                filters=plan.clauses,
                clause=plan.bm25_clause,
                pit=(pit, keep_alive),
            )
            _require_complete("fetch", found.shards)
            docs = found.hits
            if plan.tenant_id is not None:
                wrong = [c for c in chosen if docs.get(c[0], {}).get("_source", {}).get("tenant_id") != plan.tenant_id]
                if wrong:
                    log_tenant_violation(len(wrong))
                    chosen = [c for c in chosen if c not in wrong]
        returned = int(state["n"])
        hits_out = [
            hit_fields(hit, docs.get(hit[0], {}), highlight=plan.highlight, position=position)
            for position, hit in enumerate(chosen, start=returned + 1)
        ]
        finished = offset >= len(fused) and (not tail_possible or tail_done)
        next_cursor: str | None = None
        if finished:
            await self._close_pit(pit)
        else:
            next_cursor = encode_cursor(
                {"pit": pit, "o": offset, "t": tail_after, "tr": tail_rank, "td": tail_done, "fp": state["fp"]}
                | {"p": int(state["p"]) + 1, "n": returned + len(chosen)}
            )
        page = SearchPage.model_validate(
            {
                "query": plan.text,
                "mode": plan.mode,
                "hits": hits_out,
                "page": int(state["p"]) + 1,
                "next_cursor": next_cursor,
                "returned": returned + len(chosen),
                "in_tail": in_tail,
                "latency_ms": (time.perf_counter() - started) * 1000,
            }
        )
        event(
            20,
            "search page",
            "search.page",
            {
                "search.mode": plan.mode,
                "search.query_hash": query_hash(plan.text),
                "search.page": page.page,
                "search.hits": len(hits_out),
                "search.in_tail": in_tail,
                "search.walk_finished": finished,
                "event.duration": int((time.perf_counter() - started) * 1e9),
            },
        )
        return page

    async def _pit_leg(self, out: LegOutcome, body: dict[str, Any], scope: asyncio.Timeout) -> None:
        es = self._b.leg_es
        budget = self._b.settings.leg_timeout_s
        full = server_side(body, self._b.settings, budget)
        resp = await self._b.es_call(lambda: es.search(**full), deadline_s=budget, within=scope)
        out.answered(resp.body)
        out.pit_id = resp.body.get("pit_id")

    async def _knn_pit_leg(
        self, out: LegOutcome, plan: Plan, pit: str, keep_alive: str, scope: asyncio.Timeout
    ) -> None:
        budget = self._b.settings.leg_timeout_s
        out.waiting_on = "embeddings"
        vector = await self._b.embed_query(plan.embed_text, deadline_s=budget, within=scope)
        out.waiting_on = "elasticsearch"
        body = on_pit(
            knn_query_request(vector, filters=plan.clauses, depth=plan.candidates, size=plan.window),
            pit,
            keep_alive,
        )
        await self._pit_leg(out, body, scope)
        await self._retriever.check_model(out.hits, scope)


def _require_complete(what: str, shards: ShardReport | None) -> None:
    """A walk never accepts partial answers: a page from some shards would reorder the walk. The same
    cursor can be retried."""
    if shards is not None and shards.partial:
        detail = "timed out" if shards.timed_out else f"answered from {shards.successful} of {shards.total} shards"
        raise PartialResults(
            f"{what} of a deep-paging walk {detail} ({shards.failure or 'no failure reason'}); retry the same cursor",
            shards={what: shards},
        )


def _pit_missing(error: SearchError) -> bool:
    """Elasticsearch's answer for an expired or closed point-in-time."""
    return isinstance(error, DependencyError) and error.status == 404 and "search_context_missing" in str(error)
