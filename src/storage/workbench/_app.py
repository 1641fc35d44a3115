"""The workbench's web app: one page (static HTML + JS that renders every value as text) and its JSON API.

Every route but ``/static`` needs the token — from the URL's ``?token=`` on the first visit (then a cookie,
``HttpOnly``, ``SameSite=Strict``), or the ``X-Workbench-Token`` header — else 403. Reads go through the
client's public API (``search``, ``leg_rankings``, ``fuse``, ``evaluate``, ``tune``); the only write to the data
index (``indices.store_fusion``) needs ``allow_writes`` and an explicit confirmation; judgments live in their own
index (``_judgments``). A tenant-bound workbench passes its tenant on every call and ignores any other.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from elasticsearch import ApiError, TransportError
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from .. import InvalidQuery, SearchClient, SearchError, SearchResponse, query_hash
from ..evaluation import default_grid, evaluate, tune
from ..fusion import FusionSetting, LegHit, fuse
from ._body import json_body
from ._describe import fields_with_values, where_elasticsearch
from ._explain import explain
from ._judgments import GRADES, JudgmentStore, parse_judged, qrels_tsv, queries_jsonl
from ._runs import create_run, forget_run, list_runs, runs_compared
from ._traffic import traffic

__all__ = ["COOKIE", "Workbench", "create_app"]

STATIC = Path(__file__).parent / "static"
COOKIE = "hs_workbench"
_MODES = ("hybrid", "bm25", "knn")
_METHODS = ("rrf", "linear_minmax", "linear_zscore", "dbsf")
#: Leg candidates the compare view keeps for re-fusing (the window the page may ask for at most).
_MAX_WINDOW = 500


class Workbench:
    """What the app holds: the client (made and entered on the server's loop), the policy, the judgments."""

    def __init__(
        self,
        client_factory: Callable[[], SearchClient],
        *,
        token: str,
        allow_writes: bool = False,
        tenant_id: str | None = None,
        judge: str | None = None,
    ) -> None:
        self._factory = client_factory
        self.token = token
        self.allow_writes = allow_writes
        self.tenant_id = tenant_id
        self.judge = judge or _user()
        self._client: SearchClient | None = None
        self._judgments: JudgmentStore | None = None
        #: query hash -> text, for the searches this workbench ran or judged (telemetry records only hashes).
        self.texts: dict[str, str] = {}

    @property
    def client(self) -> SearchClient:
        assert self._client is not None, "the workbench is not started"
        return self._client

    @property
    def judgments(self) -> JudgmentStore:
        assert self._judgments is not None, "the workbench is not started"
        return self._judgments

    def tenant_for(self, body: Mapping[str, Any]) -> str | None:
        """The tenant a request searches: a bound workbench's own, whatever the request says; else the
        request's ``tenant_id`` (absent or empty: every tenant)."""
        return self.tenant_id if self.tenant_id is not None else (body.get("tenant_id") or None)

    @contextlib.asynccontextmanager
    async def lifespan(self, _: Starlette) -> AsyncIterator[None]:
        async with self._factory() as client:
            self._client = client
            self._judgments = JudgmentStore(client, tenant_id=self.tenant_id)
            yield
        self._client = None


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container)
        return "workbench"


# -- the request's arguments ---------------------------------------------------------------------------------


def _int(body: Mapping[str, Any], name: str, default: int, low: int, high: int) -> int:
    value = body.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidQuery(f"{name} must be a whole number from {low} to {high}")
    return value


def _search_args(wb: Workbench, body: Mapping[str, Any]) -> dict[str, Any]:
    """The search the page asks for: query, mode, filters, tenant (a bound workbench's own), result count."""
    query = body.get("query")
    if not isinstance(query, str) or not query.strip():
        raise InvalidQuery("the query is empty")
    mode = body.get("mode", "hybrid")
    if mode not in _MODES:
        raise InvalidQuery(f"mode must be one of {', '.join(_MODES)}")
    filters = body.get("filters") or None
    if filters is not None and not isinstance(filters, dict):
        raise InvalidQuery('filters must be an object such as {"ticker": "AAPL"}')
    return {
        "query": query,
        "mode": mode,
        "filters": filters,
        "tenant_id": wb.tenant_for(body),
        "limit": _int(body, "limit", 10, 1, 100),
    }


def _fusion_args(body: Mapping[str, Any]) -> dict[str, Any]:
    """The fusion the page asks for (absent: the one in force)."""
    fusion = body.get("fusion") or {}
    if not isinstance(fusion, dict):
        raise InvalidQuery("fusion must be an object")
    out: dict[str, Any] = {}
    if fusion.get("method") is not None:
        if fusion["method"] not in _METHODS:
            raise InvalidQuery(f"fusion method must be one of {', '.join(_METHODS)}")
        out["fusion"] = fusion["method"]
    if fusion.get("k") is not None:
        out["rrf_k"] = _int(fusion, "k", 10, 1, 1000)
    if fusion.get("window") is not None:
        out["window"] = _int(fusion, "window", 50, 1, _MAX_WINDOW)
    weights = fusion.get("weights")
    if weights is not None:
        if not isinstance(weights, dict) or not all(
            leg in ("bm25", "knn") and isinstance(w, int | float) and not isinstance(w, bool) and w >= 0
            for leg, w in weights.items()
        ):
            raise InvalidQuery("weights must map bm25 / knn to numbers >= 0")
        out["weights"] = {leg: float(w) for leg, w in weights.items()}
    return out


# -- what the page reads -------------------------------------------------------------------------------------


def _hit(hit: Any, rank: int) -> dict[str, Any]:
    return {
        "rank": rank,
        "id": hit.id,
        "title": hit.title,
        "score": hit.score,
        "normalized_score": hit.normalized_score,
        "ranks": dict(hit.ranks),
        "leg_scores": dict(hit.leg_scores),
        "highlights": {field: list(frags) for field, frags in hit.highlights.items()},
        "passages": [
            {"start": p.start, "end": p.end, "text": p.text, "leg": p.leg, "score": p.score} for p in hit.passages
        ],
        "source": {k: v for k, v in hit.source.items() if k in ("ticker", "doc_type", "source", "published_at")},
    }


def _column(res: SearchResponse) -> dict[str, Any]:
    return {
        "hits": [_hit(h, n) for n, h in enumerate(res.hits, start=1)],
        "ids": res.ids,
        "degraded": res.degraded,
        "degraded_reason": res.degradation.reason if res.degradation is not None else None,
        "legs_failed": list(res.degradation.legs_failed) if res.degradation is not None else [],
        "partial": res.partial,
        "legs": {
            leg: {"hits": r.hits, "latency_ms": round(r.latency_ms, 1), "ok": r.ok, "reason": r.reason}
            for leg, r in res.legs.items()
        },
        "fetch_ms": None if res.fetch_ms is None else round(res.fetch_ms, 1),
        "fusion": res.fusion.to_meta(),
        "fusion_sources": res.fusion_sources,
        "groups": None if res.groups is None else [g.model_dump() for g in res.groups],
    }


# -- the handlers --------------------------------------------------------------------------------------------


async def info(wb: Workbench, request: Request) -> dict[str, Any]:
    setting, sources = await wb.client.indices.fusion_in_force()
    s = wb.client.settings
    return {
        "index": wb.client.index,
        "tenant_id": wb.tenant_id,
        "multi_tenant": s.multi_tenant,
        "allow_writes": wb.allow_writes,
        "judge": wb.judge,
        "telemetry_data_stream": s.telemetry_data_stream,
        "fusion": setting.to_meta(),
        "fusion_sources": sources,
        "grades": list(GRADES),
        "fields": await fields_with_values(wb.client, wb.tenant_id),
    }


async def compare(wb: Workbench, request: Request) -> dict[str, Any]:
    """The three columns — BM25 alone, kNN alone, fused — and each leg's candidates (ids and scores, the
    fusion window deep) for re-fusing without running the legs again (``/api/fuse``)."""
    body = await json_body(request)
    args = _search_args(wb, body)
    fusion = _fusion_args(body)
    extra: dict[str, Any] = {"diversity": float(body.get("diversity") or 0.0), "group_by": body.get("group_by") or None}
    wb.texts[query_hash(args["query"].strip())] = args["query"].strip()
    c = wb.client
    plain: dict[str, Any] = {k: v for k, v in args.items() if k != "mode"}
    bm25, knn, fused = await asyncio.gather(
        c.search(**plain, mode="bm25"), c.search(**plain, mode="knn"), c.search(**args, **fusion, **extra)
    )
    judged = await wb.judgments.grades_of(args["query"])
    window = fused.fusion.window
    legs = await c.leg_rankings(
        args["query"], mode="hybrid", filters=args["filters"], tenant_id=args["tenant_id"], window=window
    )
    return {
        "query": args["query"],
        "bm25": _column(bm25),
        "knn": _column(knn),
        "fused": _column(fused),
        "candidates": {leg: [[h.id, h.score] for h in hits] for leg, hits in legs.items()},
        "window": window,
        #: The grades this query already has (imported or clicked), by document: shown on each hit.
        "judged": judged,
    }


async def refuse(wb: Workbench, request: Request) -> dict[str, Any]:
    """The fused order of the candidates the page holds under another fusion (no search is run): the same
    function every search fuses with (:func:`storage.fusion.fuse`)."""
    body = await json_body(request)
    candidates = body.get("candidates")
    if not isinstance(candidates, dict) or not set(candidates) <= {"bm25", "knn"}:
        raise InvalidQuery("candidates must map bm25 / knn to [[id, score], ...]")
    fusion = _fusion_args(body)
    window = fusion.get("window", _int(body, "window", 50, 1, _MAX_WINDOW))
    legs = {leg: [LegHit(str(i), float(s)) for i, s in rows[:window]] for leg, rows in candidates.items() if rows}
    limit = _int(body, "limit", 10, 1, 100)
    weights = fusion.get("weights")
    fused = fuse(legs, method=fusion.get("fusion", "rrf"), k=fusion.get("rrf_k", 10), weights=weights)
    return {
        "ids": [h.id for h in fused[:limit]],
        "scores": [h.score for h in fused[:limit]],
        "ranks": [dict(h.ranks) for h in fused[:limit]],
    }


async def judge(wb: Workbench, request: Request) -> dict[str, Any]:
    body = await json_body(request)
    query, doc_id, grade = body.get("query"), body.get("doc_id"), body.get("grade")
    if not isinstance(query, str) or not query.strip() or not isinstance(doc_id, str) or not doc_id:
        raise InvalidQuery("a judgment needs the query and the document's id")
    if isinstance(grade, bool) or grade not in GRADES:
        raise InvalidQuery("grade must be 0 (not relevant), 1 (relevant) or 2 (highly relevant)")
    j = await wb.judgments.judge(query, doc_id, grade, judge=wb.judge)
    wb.texts[query_hash(j.query)] = j.query
    return {
        "query": j.query,
        "query_id": j.query_id,
        "doc_id": j.doc_id,
        "grade": j.grade,
        "judge": j.judge,
        "at": j.at,
    }


async def forget(wb: Workbench, request: Request) -> dict[str, Any]:
    """Delete a judgment (``query`` and ``doc_id``) or every judgment of a query (``query`` alone)."""
    body = await json_body(request)
    query, doc_id = body.get("query"), body.get("doc_id")
    if not isinstance(query, str) or not query.strip() or (doc_id is not None and not isinstance(doc_id, str)):
        raise InvalidQuery('send {"query": <its text>} to forget a query, with "doc_id" to forget one judgment')
    return {"forgotten": await wb.judgments.forget(query, doc_id)}


async def judged(wb: Workbench, request: Request) -> dict[str, Any]:
    """The judged queries: their judgments, and which of today's top 10 are not judged yet."""
    all_ = await wb.judgments.all()
    by_query: dict[str, list[Any]] = {}
    for j in all_:
        by_query.setdefault(j.query, []).append(j)
    out = []
    for query, items in by_query.items():
        latest = {j.doc_id: j for j in items}
        top = await wb.client.search(query, limit=10, tenant_id=wb.tenant_id, highlight=False)
        out.append(
            {
                "query": query,
                "query_id": items[0].query_id,  # (an imported query's own id)
                "judgments": [
                    {"doc_id": j.doc_id, "grade": j.grade, "judge": j.judge, "at": j.at} for j in latest.values()
                ],
                "unjudged_in_top10": [i for i in top.ids if i not in latest],
            }
        )
    return {"queries": out}


async def export_qrels(wb: Workbench, request: Request) -> Response:
    _, qrels = await wb.judgments.qrels()
    return PlainTextResponse(qrels_tsv(qrels), headers={"content-disposition": 'attachment; filename="test.tsv"'})


async def export_queries(wb: Workbench, request: Request) -> Response:
    queries, _ = await wb.judgments.qrels()
    return PlainTextResponse(
        queries_jsonl(queries), headers={"content-disposition": 'attachment; filename="queries.jsonl"'}
    )


async def import_qrels(wb: Workbench, request: Request) -> dict[str, Any]:
    """A judged collection's files (their texts): BEIR's ``queries.jsonl`` and its qrels, or TREC's qrels
    (:func:`parse_judged`), every line checked first (a bad line writes nothing), then one bulk write; query
    ids and grades kept as given."""
    body = await json_body(request)
    queries_text, qrels_text = body.get("queries"), body.get("qrels")
    if not isinstance(queries_text, str) or not isinstance(qrels_text, str):
        raise InvalidQuery('send {"queries": <queries.jsonl text>, "qrels": <qrels text>}')
    rows = parse_judged(queries_text, qrels_text)
    written = await wb.judgments.import_judged(rows, judge=wb.judge)
    return {"imported": written, "queries": len({qid for qid, *_ in rows})}


async def measure(wb: Workbench, request: Request) -> dict[str, Any]:
    """nDCG@10 and Recall@100 of each leg and of the fusion in force over the judged queries, and nDCG@10
    across RRF k and the weights (the chart), the legs retrieved once."""
    data = await wb.judgments.judged_set()
    in_force, _ = await wb.client.indices.fusion_in_force()
    grid = [
        in_force,
        *(s for s in default_grid() if s.method == "rrf" and s.window == in_force.window and s != in_force),
    ]
    rows = await evaluate(wb.client, data, fusions=grid, tenant_id=wb.tenant_id)
    out = []
    for row in rows:
        out.append(
            {
                "mode": row.mode,
                "fusion": row.fusion,
                "parameters": row.parameters,
                "ndcg_at_10": round(row.ndcg_at_10, 4),
                "recall_at_100": round(row.recall_at_100, 4),
            }
        )
    return {"queries": len(data.qrels), "rows": out, "in_force": in_force.to_meta()}


async def tune_fusion(wb: Workbench, request: Request) -> dict[str, Any]:
    """``storage.evaluation.tune`` on the judgments (its cross-validated rule); never applied here."""
    data = await wb.judgments.judged_set()
    body = await json_body(request)
    min_queries = _int(body, "min_queries", 20, 1, 10_000)
    report = await tune(wb.client, data, tenant_id=wb.tenant_id, apply=False, min_queries=min_queries)
    return report.model_dump()


async def apply_fusion(wb: Workbench, request: Request) -> Response:
    """Store a fusion setting with the index: only with ``allow_writes`` and ``"confirm": true``."""
    if not wb.allow_writes:
        return JSONResponse(
            {"error": "the workbench is read-only: start it with --allow-writes to store a fusion setting"}, 403
        )
    body = await json_body(request)
    if body.get("confirm") is not True:
        return JSONResponse({"error": 'applying changes every search of the index: send "confirm": true'}, 400)
    try:
        setting = FusionSetting.from_meta(body.get("setting") or {})
    except (ValueError, TypeError) as exc:
        raise InvalidQuery(f"not a fusion setting: {exc}") from None
    written = await wb.client.indices.store_fusion(setting, source="workbench", judge=wb.judge)
    return JSONResponse({"stored": setting.to_meta(), "index": written})


# -- the app ---------------------------------------------------------------------------------------------------


Handler = Callable[[Workbench, Request], Awaitable[Any]]


def _route(wb: Workbench, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        try:
            result = await handler(wb, request)
        except InvalidQuery as exc:
            return JSONResponse({"error": str(exc).splitlines()[0], "type": type(exc).__name__}, 400)
        except SearchError as exc:
            message = str(exc).splitlines()[0]
            return JSONResponse({"error": message + where_elasticsearch(wb.client), "type": type(exc).__name__}, 502)
        except (ApiError, TransportError) as exc:  # the judgments' and telemetry's own requests
            message = f"Elasticsearch: {exc}".splitlines()[0] + where_elasticsearch(wb.client)
            return JSONResponse({"error": message, "type": type(exc).__name__}, 502)
        return result if isinstance(result, Response) else JSONResponse(result)

    return endpoint


class _TokenGate(BaseHTTPMiddleware):
    """403 without the token; the first visit's ``?token=`` becomes a cookie."""

    def __init__(self, app: Any, token: str) -> None:
        super().__init__(app)
        self.token = token

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        if request.url.path.startswith("/static/"):
            return await call_next(request)
        given = (
            request.query_params.get("token")
            or request.headers.get("x-workbench-token")
            or request.cookies.get(COOKIE)
            or ""
        )
        if not secrets.compare_digest(given.encode(), self.token.encode()):
            return PlainTextResponse("403: open the URL the workbench printed (it carries the token)", 403)
        response = await call_next(request)
        if request.query_params.get("token"):
            response.set_cookie(COOKIE, self.token, httponly=True, samesite="strict")
        return response


def create_app(wb: Workbench) -> Starlette:
    """The app for ``wb``: mount it in a service, or serve it with ``hybrid-search workbench``."""

    async def page(request: Request) -> Response:
        return FileResponse(STATIC / "index.html", headers={"cache-control": "no-store"})

    api: list[tuple[str, Handler, list[str]]] = [
        ("/api/info", info, ["GET"]),
        ("/api/compare", compare, ["POST"]),
        ("/api/fuse", refuse, ["POST"]),
        ("/api/judgments", judge, ["POST"]),
        ("/api/judged", judged, ["GET"]),
        ("/api/judgments/forget", forget, ["POST"]),
        ("/api/qrels.tsv", export_qrels, ["GET"]),
        ("/api/queries.jsonl", export_queries, ["GET"]),
        ("/api/qrels", import_qrels, ["POST"]),
        ("/api/measure", measure, ["POST"]),
        ("/api/tune", tune_fusion, ["POST"]),
        ("/api/apply", apply_fusion, ["POST"]),
        ("/api/traffic", traffic, ["GET"]),
        ("/api/explain", explain, ["POST"]),
        ("/api/runs", list_runs, ["GET"]),
        ("/api/runs/create", create_run, ["POST"]),
        ("/api/runs/compare", runs_compared, ["POST"]),
        ("/api/runs/forget", forget_run, ["POST"]),
    ]
    routes = [
        Route("/", page),
        *(Route(path, _route(wb, handler), methods=methods) for path, handler, methods in api),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    return Starlette(routes=routes, lifespan=wb.lifespan, middleware=[Middleware(_TokenGate, token=wb.token)])
