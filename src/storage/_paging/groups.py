"""The tail of a grouped walk (``group_by``): the groups that have no hit in the walk's head, best first.

A walk's head is grouped like a search (``storage._search.arrange``): each value keeps its first
``per_group`` hits of the fused head, and a hit without a value is a group of its own. Below the head, a
group that has no hit in the head has all of its BM25 matches below ``depth`` (the head holds BM25's top
``depth``), so the tail is, without any state but two positions:

- the **collapsed** stream: BM25 matches with a value outside the head's groups, one per value (its best
  hit), best first, each with its best ``per_group`` hits and its exact count of matches; paged by position
  (Elasticsearch collapses with ``from``, up to ``index.max_result_window`` groups, 10,000 by default);
- the **loose** stream: BM25 matches without a value below the head (``search_after`` the head's last BM25
  hit), minus the kNN head's documents; each a group of its own.

The two are merged by BM25 score (a group by its best hit; ties: the collapsed group first). Both run on the
walk's point-in-time, so a cursor's next page continues the same order.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

from .._dsl.queries import PIT_SORT, group_tail_requests
from .._dsl.tenancy import tenants_of
from .._errors import PartialResults
from .._search import Plan
from .._search.arrange import Group
from .._transport.backend import Backend
from .._types.results import ShardReport

__all__ = ["TailGroup", "TailPosition", "grouped_tail", "require_complete"]

#: Elasticsearch's default ``index.max_result_window``: the collapsed stream ends there.
COLLAPSE_LIMIT = 10_000


@dataclass(frozen=True, slots=True)
class TailPosition:
    """Where the tail's next page starts: collapsed groups taken, the loose stream's ``search_after``."""

    taken: int = 0
    collapsed_done: bool = False
    after: list[Any] | None = None
    loose_done: bool = False

    @property
    def done(self) -> bool:
        return self.collapsed_done and self.loose_done


@dataclass(frozen=True, slots=True)
class TailGroup:
    group: Group
    #: Each id's BM25 score.
    scores: dict[str, float]


async def grouped_tail(
    b: Backend,
    plan: Plan,
    pit: tuple[str, str],
    *,
    need: int,
    position: TailPosition,
    head_values: Collection[str],
    knn_ids: Collection[str],
    violation: Callable[[int], None],
) -> tuple[list[TailGroup], TailPosition, str]:
    """The tail's next ``need`` groups from ``position``: the groups, the position after them, and the
    point-in-time id to carry on with. ``violation``: told of hits of another tenant (left out)."""
    assert plan.group_by is not None
    pit_id, keep_alive = pit
    collapsed_body, loose_body = group_tail_requests(
        plan.text,
        scope=plan.scope,
        clause=plan.bm25_clause,
        field=plan.group_by,
        exclude=sorted(head_values),
        per_group=plan.per_group,
        passage_text=plan.passage_text,
        head_vectors=plan.head_vectors,
    )
    batch = min(2 * need + 10, 1000)
    taken, collapsed_done = position.taken, position.collapsed_done
    after, loose_done = position.after, position.loose_done
    collapsed: deque[dict[str, Any]] = deque()
    loose: deque[dict[str, Any]] = deque()
    fetched = taken  # the collapsed stream's next ``from``
    loose_after = after  # the loose stream's next ``search_after`` (ahead of ``after`` by what is buffered)
    out: list[TailGroup] = []
    refused: set[str] = set()
    while len(out) < need:
        if not collapsed and not collapsed_done:
            size = min(batch, COLLAPSE_LIMIT - fetched)
            body = {**collapsed_body, "from": fetched, "size": size, "pit": {"id": pit_id, "keep_alive": keep_alive}}
            hits, pit_id = await _search(b, plan, body, violation, refused)
            collapsed.extend(hits)
            fetched += len(hits)
            if len(hits) < size or fetched >= COLLAPSE_LIMIT:
                collapsed_done = True  # (beyond COLLAPSE_LIMIT: the stream ends, as a collapsed search does)
        if not loose and not loose_done:
            body = {**loose_body, "size": batch, "sort": PIT_SORT, "track_scores": True}
            body["pit"] = {"id": pit_id, "keep_alive": keep_alive}
            if loose_after is not None:
                body["search_after"] = list(loose_after)
            hits, pit_id = await _search(b, plan, body, violation, refused)
            loose.extend(hits)
            if hits:
                loose_after = hits[-1]["sort"]
            if len(hits) < batch:
                loose_done = True
        if not collapsed and not loose:
            break
        if collapsed and (not loose or _score(collapsed[0]) >= _score(loose[0])):
            hit = collapsed.popleft()
            taken += 1
            if str(hit["_id"]) not in refused:
                out.append(_collapsed_group(hit, plan))
            continue
        hit = loose.popleft()
        after = hit["sort"]
        doc_id = str(hit["_id"])
        if doc_id in knn_ids or doc_id in refused:
            continue  # already in the head / another tenant's
        out.append(TailGroup(Group(None, [doc_id], 1), {doc_id: _score(hit)}))
    # What is buffered is read again by the next page (from ``taken`` and ``after``).
    loose_done = loose_done and not loose
    collapsed_done = collapsed_done and not collapsed
    return out, TailPosition(taken, collapsed_done, after, loose_done), pit_id


def _collapsed_group(hit: dict[str, Any], plan: Plan) -> TailGroup:
    assert plan.group_by is not None
    inner = hit.get("inner_hits", {}).get("best", {}).get("hits", {})
    members = inner.get("hits") or [hit]
    scores = {str(h["_id"]): _score(h) for h in members}
    value = ((hit.get("fields") or {}).get(plan.group_by) or [None])[0]
    total = (inner.get("total") or {}).get("value", len(members))
    return TailGroup(Group(None if value is None else str(value), list(scores), int(total)), scores)


def _score(hit: dict[str, Any]) -> float:
    return float(hit.get("_score") or 0.0)


async def _search(
    b: Backend, plan: Plan, body: dict[str, Any], violation: Callable[[int], None], refused: set[str]
) -> tuple[list[dict[str, Any]], str]:
    """One batch of a stream and the point-in-time id to carry on with; a hit with a member of another
    tenant joins ``refused`` (the second check: the filter inside the request should make it a no-op)."""
    full = b.server_side(body)
    resp = await b.es_call(functools.partial(b.es.search, **full), deadline_s=b.settings.leg_timeout_s)
    require_complete("grouped tail", ShardReport.from_body(resp.body))
    hits: list[dict[str, Any]] = resp.body["hits"]["hits"]
    if plan.tenant_id is not None:
        for h in hits:
            if any(t != plan.tenant_id for t in tenants_of(_members(h)).values()):
                refused.add(str(h["_id"]))
                violation(1)
    return hits, str(resp.body.get("pit_id") or body["pit"]["id"])


def _members(hit: dict[str, Any]) -> Sequence[dict[str, Any]]:
    inner = hit.get("inner_hits", {}).get("best", {}).get("hits", {}).get("hits")
    return inner or [hit]


def require_complete(what: str, shards: ShardReport | None) -> None:
    """A walk never accepts partial answers: a page from some shards would reorder the walk. The same
    cursor can be retried."""
    if shards is not None and shards.partial:
        detail = "timed out" if shards.timed_out else f"answered from {shards.successful} of {shards.total} shards"
        raise PartialResults(
            f"{what} of a deep-paging walk {detail} ({shards.failure or 'no failure reason'}); retry the same cursor",
            shards={what: shards},
        )
