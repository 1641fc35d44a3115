"""Deep paging: a stable walk through the fused results on a point-in-time (see :mod:`storage._paging.cursor`
for the walk's order and its cursor), built on the engine's entry points: each page plans the search
(``window`` = the walk's depth), runs the legs on the point-in-time, fuses them, and fetches the page; only
the BM25 tail below the head is the walk's own."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import time
from collections.abc import AsyncIterator
from typing import Any

from .._dsl.queries import bm25_request, on_pit
from .._dsl.tenancy import tenants_of
from .._errors import CursorExpired, DependencyError, InvalidQuery, PartialResults, SearchError
from .._fusion.methods import Provenance, tail_provenance
from .._observability.log import query_hash
from .._observability.tracing import span
from .._search import Engine, Fused, LegOutcome, Plan, pit_missing
from .._search.arrange import Group, group_ids, group_value
from .._search.enrich import hit_fields, knn_passages
from .._transport.backend import Backend
from .._types.requests import PageRequest, SearchRequest
from .._types.results import HitGroup, SearchPage, ShardReport
from .cursor import decode_cursor, encode_cursor, fingerprint
from .groups import TailPosition, grouped_tail, require_complete

__all__ = ["Walker"]


class Walker:
    """Pages of a walk: :meth:`search_page`, :meth:`walk`, :meth:`close_cursor`."""

    def __init__(self, backend: Backend, engine: Engine) -> None:
        self._b = backend
        self._engine = engine
        #: Points-in-time of cancelled first pages being closed (held so the tasks are not collected).
        self._closing: set[asyncio.Task[None]] = set()

    async def search_page(self, request: PageRequest) -> SearchPage:
        """One page of a walk; the public contract is documented on ``SearchClient.search_page``."""
        self._b.check_open()
        started = time.perf_counter()
        r = request
        d = r.window if r.window is not None else self._b.settings.walk_window
        if not 1 <= r.limit <= 1000:
            raise InvalidQuery("limit (a walk's page) must be between 1 and 1000")
        if not 1 <= d <= 10_000:
            raise InvalidQuery("window (a walk's) must be between 1 and 10000")
        plan = await self._engine.plan(
            SearchRequest(
                r.query,
                mode=r.mode,
                filters=r.filters,
                tenant_id=r.tenant_id,
                limit=min(r.limit, d),
                fusion=r.fusion,
                rrf_k=r.rrf_k,
                weights=r.weights,
                window=d,
                num_candidates=d,
                strict=True,
                highlight=r.highlight,
                index=r.index,
                round_trip="parallel",
                syntax=r.syntax,
                rerank=False,
                group_by=r.group_by,
                per_group=r.per_group,
            )
        )
        fp = fingerprint(
            {"q": plan.text, "s": plan.bm25_clause is not None, "m": plan.mode, "f": list(plan.scope.clauses)}
            | {"i": plan.target, "fu": plan.method}
            | {"k": plan.k, "w": plan.weights, "d": d}
            | ({"g": plan.group_by, "pg": plan.per_group} if plan.group_by is not None else {})
        )
        keep_alive = self._b.settings.pit_keep_alive
        if r.cursor is None:
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
                state = decode_cursor(r.cursor)
            except ValueError as exc:
                raise InvalidQuery(str(exc)) from None
            if state.get("fp") != fp:
                raise InvalidQuery(
                    "this cursor belongs to another search: pass the same query, mode, filters, tenant, index, "
                    "fusion and depth as for its first page"
                )
        with span("hybrid_search.page", {"search.mode": plan.mode, "search.page": int(state["p"]) + 1}):
            try:
                return await self._page(plan.on_pit(state["pit"], keep_alive), state, d, r.limit, started)
            except BaseException as exc:
                if isinstance(exc, DependencyError) and pit_missing(exc):
                    raise CursorExpired(
                        f"the walk's point-in-time has expired (kept {keep_alive} between pages); start again"
                    ) from exc
                if r.cursor is None:  # a failed first page leaves the caller no cursor: close its point-in-time
                    if isinstance(exc, asyncio.CancelledError):  # (without delaying the caller's cancellation)
                        task = asyncio.get_running_loop().create_task(self._close_pit(str(state["pit"])))
                        self._closing.add(task)
                        task.add_done_callback(self._closing.discard)
                    else:
                        await self._close_pit(str(state["pit"]))
                raise

    async def close_cursor(self, cursor: str) -> None:
        """End a walk early: close its point-in-time. Idempotent; an expired one is fine."""
        try:
            pit = str(decode_cursor(cursor)["pit"])
        except (ValueError, KeyError) as exc:
            raise InvalidQuery(str(exc)) from None
        await self._close_pit(pit)

    async def walk(self, request: PageRequest) -> AsyncIterator[SearchPage]:
        """Every page of a walk, closing its point-in-time if left early (see ``SearchClient.walk``)."""
        cursor: str | None = request.cursor
        try:
            while True:
                page = await self.search_page(_with_cursor(request, cursor))
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
            self._b.events.emit(
                30, "could not close a point-in-time", "search.pit_close_failed", {"error.type": type(exc).__name__}
            )

    async def _page(self, plan: Plan, state: dict[str, Any], depth: int, page_size: int, started: float) -> SearchPage:
        assert plan.pit is not None
        pit, keep_alive = plan.pit
        # 1. The head: each leg's top `depth` (ids and scores only), on the point-in-time, fused.
        outcomes, _ = await self._engine.retrieve(plan)
        if not any(o.error for o in outcomes.values()):
            for leg, o in outcomes.items():
                require_complete(leg, o.shards)
        fused = self._engine.fuse(plan, outcomes)  # strict: a failed leg raises (the cursor can be retried)
        pit = next((o.pit_id for o in outcomes.values() if o.pit_id), pit)
        if plan.group_by is not None:
            return await self._grouped_page(plan, state, outcomes, fused, (pit, keep_alive), depth, page_size, started)
        offset = int(state["o"])
        chosen: list[Provenance] = fused.hits.provenances(offset, offset + page_size)
        offset += len(chosen)
        # 2. The BM25 tail, once the head is used up: matches below `depth`, minus the kNN head's ids.
        bm25 = outcomes.get("bm25")
        tail_possible = bm25 is not None and len(bm25.ids) >= depth
        tail_after = (
            state["t"] if state["t"] is not None else (bm25.kept()[-1]["sort"] if tail_possible and bm25 else None)
        )
        tail_rank, tail_done = int(state["tr"]), bool(state["td"])
        knn_ids = set(outcomes["knn"].ids) if "knn" in outcomes else set()
        in_tail = False
        while len(chosen) < page_size and tail_possible and not tail_done:
            in_tail = True
            size = min(2 * (page_size - len(chosen)) + 10, 1000)
            body = on_pit(
                bm25_request(
                    plan.text,
                    scope=plan.scope,
                    size=size,
                    clause=plan.bm25_clause,
                    passage_text=plan.passage_text,
                    head_vectors=plan.head_vectors,
                ),
                pit,
                keep_alive,
                tail_after,
            )
            full = self._b.server_side(body)
            resp = await self._b.es_call(
                functools.partial(self._b.es.search, **full), deadline_s=self._b.settings.leg_timeout_s
            )
            require_complete("bm25 tail", ShardReport.from_body(resp.body))
            pit = resp.body.get("pit_id") or pit
            hits = resp.body["hits"]["hits"]
            tenant_of = tenants_of(hits) if plan.tenant_id is not None else {}
            consumed = 0
            for h in hits:
                if len(chosen) == page_size:
                    break
                consumed += 1
                tail_rank += 1
                tail_after = h["sort"]
                if str(h["_id"]) in knn_ids:
                    continue  # already in the head
                if plan.tenant_id is not None and tenant_of.get(str(h["_id"])) != plan.tenant_id:
                    self._engine.tenant_violation(1)  # the second check (the filter should make it a no-op)
                    continue
                chosen.append(
                    tail_provenance(
                        str(h["_id"]),
                        "bm25",
                        depth + tail_rank,
                        float(h.get("_score") or 0.0),
                        method=plan.method,
                        k=plan.k,
                        weights=plan.weights,
                    )
                )
            if len(hits) < size and consumed == len(hits):
                tail_done = True
        finished = offset >= len(fused.hits) and (not tail_possible or tail_done)
        position = {"o": offset, "t": tail_after, "tr": tail_rank, "td": tail_done}
        return await self._finish(
            plan, state, outcomes, chosen, None, (pit, keep_alive), position, in_tail, finished, started
        )

    async def _grouped_page(
        self,
        plan: Plan,
        state: dict[str, Any],
        outcomes: dict[str, LegOutcome],
        fused: Fused,
        pit: tuple[str, str],
        depth: int,
        page_size: int,
        started: float,
    ) -> SearchPage:
        """A page of groups (``storage._paging.groups``): the head's groups from the walk's position, then the
        tail's."""
        assert plan.group_by is not None
        field = plan.group_by
        candidates = {str(h["_id"]): h for o in outcomes.values() for h in reversed(o.kept())}
        head = group_ids(
            fused.hits.top_ids(len(fused.hits)), lambda i: group_value(candidates.get(i), field), plan.per_group
        )
        offset = int(state["o"])
        chosen: list[tuple[Group, list[Provenance]]] = [
            (g, fused.hits.provenances_of(g.ids)) for g in head[offset : offset + page_size]
        ]
        offset += len(chosen)
        bm25 = outcomes.get("bm25")
        tail_possible = bm25 is not None and len(bm25.ids) >= depth
        tail = state.get("g")
        position = TailPosition(*tail) if tail is not None else None
        in_tail = False
        pit_id = pit[0]
        if len(chosen) < page_size and tail_possible and bm25 is not None and not (position and position.done):
            in_tail = True
            start = position or TailPosition(after=bm25.kept()[-1]["sort"])
            knn_ids = set(outcomes["knn"].ids) if "knn" in outcomes else set()
            groups, position, pit_id = await grouped_tail(
                self._b,
                plan,
                pit,
                need=page_size - len(chosen),
                position=start,
                head_values={g.value for g in head if g.value is not None},
                knn_ids=knn_ids,
                violation=self._engine.tenant_violation,
            )
            rank = depth + int(state.get("gr", 0))
            for tg in groups:
                provenances = []
                for doc_id in tg.group.ids:
                    rank += 1
                    provenances.append(
                        tail_provenance(
                            doc_id, "bm25", rank, tg.scores[doc_id], method=plan.method, k=plan.k, weights=plan.weights
                        )
                    )
                chosen.append((tg.group, provenances))
            state = state | {"gr": rank - depth}
        finished = offset >= len(head) and (not tail_possible or (position is not None and position.done))
        moved: dict[str, Any] = {"o": offset, "t": None, "tr": 0, "td": False, "gr": int(state.get("gr", 0))}
        if position is not None:
            moved["g"] = [position.taken, position.collapsed_done, position.after, position.loose_done]
        return await self._finish(
            plan,
            state,
            outcomes,
            [p for _, provenances in chosen for p in provenances],
            [HitGroup(value=g.value, ids=g.ids, known_matches=g.known_matches) for g, _ in chosen],
            (pit_id, pit[1]),
            moved,
            in_tail,
            finished,
            started,
        )

    async def _finish(
        self,
        plan: Plan,
        state: dict[str, Any],
        outcomes: dict[str, LegOutcome],
        chosen: list[Provenance],
        groups: list[HitGroup] | None,
        pit_of: tuple[str, str],
        position: dict[str, Any],
        in_tail: bool,
        finished: bool,
        started: float,
    ) -> SearchPage:
        """3. The page's documents and highlights (one request on the same point-in-time), its cursor, its event."""
        pit, keep_alive = pit_of
        docs: dict[str, dict[str, Any]] = {}
        if chosen:
            found = await self._engine.fetch(plan.on_pit(pit, keep_alive), [c[0] for c in chosen])
            require_complete("fetch", found.shards)
            docs = found.hits
        returned = int(state["n"])
        knn = knn_passages(outcomes["knn"].kept()) if plan.passages and "knn" in outcomes else None
        hits_out = [
            hit_fields(
                hit, docs.get(hit[0], {}), highlight=plan.highlight, position=position, knn=knn, shown=plan.passages
            )
            for position, hit in enumerate(chosen, start=returned + 1)
        ]
        next_cursor: str | None = None
        if finished:
            await self._close_pit(pit)
        else:
            next_cursor = encode_cursor(
                {"pit": pit, "fp": state["fp"], "p": int(state["p"]) + 1, "n": returned + len(chosen)} | position
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
                "groups": groups,
            }
        )
        self._b.events.emit(
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
                **({"search.group_by": plan.group_by} if plan.group_by is not None else {}),
                "event.duration": int((time.perf_counter() - started) * 1e9),
            },
        )
        return page


def _with_cursor(request: PageRequest, cursor: str | None) -> PageRequest:
    return dataclasses.replace(request, cursor=cursor)
