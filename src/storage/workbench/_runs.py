"""Experiments: a **run** is the judged queries searched with one setting (a fusion setting, or one leg
alone), named, with each query's nDCG@10; two runs compare query by query (which queries win, which lose).

Runs are kept in an index of their own beside the judgments (``<alias>-workbench-runs``; a judgment query
never reads one), one document per (tenant, name). A run measures what the judgments say *when it ran*:
it stores its queries' scores, so a later judgment does not rewrite an earlier run.

Through :attr:`SearchClient.elasticsearch` and :mod:`storage.evaluation`, never a private module.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, cast

from starlette.requests import Request

from .. import InvalidQuery, SearchClient
from ..evaluation import Judgments, fuse_top, ndcg_at_10, retrieve_legs
from ..fusion import FusionSetting
from ._body import json_body

if TYPE_CHECKING:
    from ._app import Workbench

__all__ = ["Run", "RunStore", "compare_runs", "create_run", "forget_run", "list_runs", "measure_run", "runs_compared"]

RunMode = Literal["hybrid", "bm25", "knn"]

_MAPPING = {
    "dynamic": "strict",
    "properties": {
        "name": {"type": "keyword"},
        "mode": {"type": "keyword"},
        "setting": {"type": "object", "enabled": False},
        "label": {"type": "keyword"},
        "in_force": {"type": "boolean"},
        "tenant_id": {"type": "keyword"},
        "judge": {"type": "keyword"},
        "at": {"type": "date"},
        "mean_ndcg": {"type": "double"},
        "per_query": {"type": "object", "enabled": False},
        "texts": {"type": "object", "enabled": False},
    },
}


@dataclass(frozen=True, slots=True)
class Run:
    """One named run: its setting, and each judged query's nDCG@10 (by query id) when it ran."""

    name: str
    mode: RunMode
    #: The fusion setting (``FusionSetting.to_meta()``); empty for a leg alone.
    setting: dict[str, Any]
    #: The setting was the one in force for the index when the run was made.
    in_force: bool
    per_query: dict[str, float]
    #: query id -> its text (for reading a comparison).
    texts: dict[str, str] = field(default_factory=dict)
    judge: str = ""
    at: str = ""
    tenant_id: str | None = None

    @property
    def mean(self) -> float:
        return math.fsum(self.per_query.values()) / len(self.per_query) if self.per_query else 0.0

    @property
    def label(self) -> str:
        if self.mode != "hybrid":
            return f"{self.mode} alone"
        return FusionSetting.from_meta(self.setting).label() + (" (in force)" if self.in_force else "")

    def summary(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "mode": self.mode,
            "setting": self.setting,
            "label": self.label,
            "in_force": self.in_force,
            "queries": len(self.per_query),
            "mean_ndcg": round(self.mean, 4),
            "judge": self.judge,
            "at": self.at,
        }


async def measure_run(
    client: SearchClient,
    data: Judgments,
    *,
    mode: RunMode,
    setting: FusionSetting,
    tenant_id: str | None = None,
) -> dict[str, float]:
    """Each judged query's nDCG@10 with ``setting`` (``mode="hybrid"``) or one leg alone: the legs retrieved once
    per query through ``client.leg_rankings()`` and fused as a search fuses them (the same numbers as
    ``storage.evaluation.evaluate``, query by query)."""
    queries = {qid: data.queries[qid] for qid in sorted(data.qrels) if qid in data.queries}
    legs = await retrieve_legs(client, queries, max(setting.window, 10), tenant_id=tenant_id)
    if mode == "hybrid":
        ranked = {qid: fuse_top(by_leg, setting, 10) for qid, by_leg in legs.items()}
    else:
        ranked = {qid: list(by_leg[mode][0][:10]) for qid, by_leg in legs.items()}
    return ndcg_at_10({q: data.qrels[q] for q in queries}, ranked)


def compare_runs(a: Run, b: Run) -> dict[str, Any]:
    """Run ``b`` against run ``a`` on the queries both measured: each query's two scores and their difference
    (best gain first), how many queries ``b`` wins, loses and ties, and both means over those queries. Pure."""
    common = sorted(set(a.per_query) & set(b.per_query))
    delta = {q: round(b.per_query[q] - a.per_query[q], 4) for q in common}
    order = sorted(common, key=lambda q: (-delta[q], q))
    rows = [
        {
            "query_id": q,
            "query": b.texts.get(q) or a.texts.get(q) or q,
            "a": round(a.per_query[q], 4),
            "b": round(b.per_query[q], 4),
            "delta": delta[q],
        }
        for q in order
    ]
    wins = sum(1 for q in common if delta[q] > 0)
    losses = sum(1 for q in common if delta[q] < 0)
    n = len(common)
    return {
        "a": a.summary(),
        "b": b.summary(),
        "queries": n,
        "only_in_a": len(set(a.per_query) - set(b.per_query)),
        "only_in_b": len(set(b.per_query) - set(a.per_query)),
        "mean_a": round(math.fsum(a.per_query[q] for q in common) / n, 4) if n else 0.0,
        "mean_b": round(math.fsum(b.per_query[q] for q in common) / n, 4) if n else 0.0,
        "wins": wins,
        "losses": losses,
        "ties": n - wins - losses,
        "rows": rows,
    }


class RunStore:
    """The runs of one alias (and one tenant, when the workbench is bound to one)."""

    def __init__(self, client: SearchClient, *, tenant_id: str | None = None) -> None:
        self._client = client
        self.index = f"{client.index}-workbench-runs"
        self.tenant_id = tenant_id

    def _key(self, name: str) -> str:
        key = json.dumps([self.tenant_id, name])
        if len(key.encode()) > 512:  # (Elasticsearch's limit on a document id)
            raise InvalidQuery(f"a run name of {len(name)} characters is too long: give one under ~500")
        return key

    async def _exists(self) -> bool:
        return bool((await self._client.elasticsearch.indices.exists(index=self.index)).body)

    async def save(self, run: Run, *, replace: bool = False) -> Run:
        """Keep ``run`` (a name already taken is refused unless ``replace``)."""
        if not run.name.strip():
            raise InvalidQuery("a run needs a name")
        es = self._client.elasticsearch
        if not await self._exists():
            await es.options(ignore_status=400).indices.create(
                index=self.index, mappings=_MAPPING, settings={"number_of_shards": 1, "auto_expand_replicas": "0-1"}
            )
        body = {
            "name": run.name,
            "mode": run.mode,
            "setting": run.setting,
            "label": run.label,
            "in_force": run.in_force,
            "tenant_id": self.tenant_id,
            "judge": run.judge,
            "at": run.at or datetime.now(UTC).isoformat(timespec="milliseconds"),
            "mean_ndcg": run.mean,
            "per_query": run.per_query,
            "texts": run.texts,
        }
        answer = await es.options(ignore_status=409).index(
            index=self.index,
            id=self._key(run.name),
            document=body,
            op_type="index" if replace else "create",
            refresh="wait_for",
        )
        if answer.meta.status == 409:
            raise InvalidQuery(f"a run named {run.name!r} exists: choose another name, or delete it first")
        return self._run(body)

    async def all(self) -> list[Run]:
        """Every run, newest first."""
        if not await self._exists():
            return []
        query: dict[str, Any] = (
            {"bool": {"filter": [{"term": {"tenant_id": self.tenant_id}}]}}
            if self.tenant_id is not None
            else {"bool": {"must_not": [{"exists": {"field": "tenant_id"}}]}}
        )
        found = await self._client.elasticsearch.search(
            index=self.index, query=query, size=1000, sort=[{"at": "desc"}, {"name": "asc"}]
        )
        return [self._run(h["_source"]) for h in found.body["hits"]["hits"]]

    async def get(self, name: str) -> Run:
        if await self._exists():
            found = await self._client.elasticsearch.options(ignore_status=404).get(
                index=self.index, id=self._key(name)
            )
            if found.meta.status == 200:
                return self._run(found.body["_source"])
        raise InvalidQuery(f"no run named {name!r}")

    async def delete(self, name: str) -> bool:
        if not await self._exists():
            return False
        answer = await self._client.elasticsearch.options(ignore_status=404).delete(
            index=self.index, id=self._key(name), refresh="wait_for"
        )
        return answer.meta.status == 200

    @staticmethod
    def _run(source: dict[str, Any]) -> Run:
        return Run(
            name=source["name"],
            mode=source["mode"],
            setting=source.get("setting") or {},
            in_force=bool(source.get("in_force")),
            per_query={q: float(v) for q, v in (source.get("per_query") or {}).items()},
            texts=dict(source.get("texts") or {}),
            judge=source.get("judge") or "",
            at=source.get("at") or "",
            tenant_id=source.get("tenant_id"),
        )


# -- the API's handlers (``/api/runs``...) ---------------------------------------------------------------------


async def create_run(wb: Workbench, request: Request) -> dict[str, Any]:
    """Run the judged queries with a setting and keep the run: ``{"name", "mode"?, "setting"?}`` (no setting: the
    one in force for the index)."""
    body = await json_body(request)
    name = str(body.get("name") or "").strip()
    if not name:
        raise InvalidQuery("a run needs a name")
    mode = body.get("mode") or "hybrid"
    if mode not in ("hybrid", "bm25", "knn"):
        raise InvalidQuery(f"mode must be hybrid, bm25 or knn, got {mode!r}")
    in_force_setting, _ = await wb.client.indices.fusion_in_force()
    given = body.get("setting")
    try:
        setting = FusionSetting.from_meta(given) if given else in_force_setting
    except (TypeError, ValueError) as exc:
        raise InvalidQuery(f"not a fusion setting: {exc}") from None
    data = await wb.judgments.judged_set()
    store = RunStore(wb.client, tenant_id=wb.tenant_id)
    per_query = await measure_run(wb.client, data, mode=cast(RunMode, mode), setting=setting, tenant_id=wb.tenant_id)
    run = Run(
        name=name,
        mode=cast(RunMode, mode),
        setting=setting.to_meta() if mode == "hybrid" else {},
        in_force=mode == "hybrid" and setting == in_force_setting,
        per_query=per_query,
        texts={q: data.queries[q] for q in per_query},
        judge=wb.judge,
    )
    return (await store.save(run, replace=body.get("replace") is True)).summary()


async def list_runs(wb: Workbench, request: Request) -> dict[str, Any]:
    return {"runs": [r.summary() for r in await RunStore(wb.client, tenant_id=wb.tenant_id).all()]}


async def runs_compared(wb: Workbench, request: Request) -> dict[str, Any]:
    """``{"a": name, "b": name}``: run b against run a, query by query."""
    body = await json_body(request)
    store = RunStore(wb.client, tenant_id=wb.tenant_id)
    return compare_runs(await store.get(str(body.get("a") or "")), await store.get(str(body.get("b") or "")))


async def forget_run(wb: Workbench, request: Request) -> dict[str, Any]:
    body = await json_body(request)
    name = str(body.get("name") or "")
    if not await RunStore(wb.client, tenant_id=wb.tenant_id).delete(name):
        raise InvalidQuery(f"no run named {name!r}")
    return {"deleted": name}
