"""Why a hit is where it is: each leg's rank and score for it, each leg's share of its fused score (RRF: the
terms ``weight / (k + rank)``), and Elasticsearch's explanation of its BM25 score (the leg's own query)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from starlette.requests import Request

from .. import InvalidQuery
from ..fusion import FusionSetting
from ._body import json_body

if TYPE_CHECKING:
    from ._app import Workbench

__all__ = ["explain"]


async def explain(wb: Workbench, request: Request) -> dict[str, Any]:
    """``{"query", "doc_id", "filters"?, "tenant_id"?, "fusion"?}`` (``fusion``: the setting the page shows,
    as stored; default the one in force)."""
    body = await json_body(request)
    query, doc_id = str(body.get("query") or "").strip(), str(body.get("doc_id") or "")
    if not query or not doc_id:
        raise InvalidQuery("explain needs a query and a doc_id")
    tenant = wb.tenant_for(body)
    filters = body.get("filters") or None
    try:
        setting = (
            FusionSetting.from_meta(body["fusion"])
            if body.get("fusion")
            else (await wb.client.indices.fusion_in_force())[0]
        )
    except (TypeError, ValueError) as exc:
        raise InvalidQuery(f"not a fusion setting: {exc}") from None
    rankings = await wb.client.leg_rankings(query, filters=filters, tenant_id=tenant, window=setting.window)
    legs: dict[str, dict[str, float | int]] = {}
    for leg, hits in rankings.items():
        found = next((rank for rank, hit in enumerate(hits, start=1) if hit.id == doc_id), None)
        if found is not None:
            legs[leg] = {"rank": found, "score": hits[found - 1].score}
    rrf: dict[str, dict[str, float]] | None = None
    if setting.method == "rrf" and legs:
        terms = {leg: setting.weights[leg] / (setting.k + int(r["rank"])) for leg, r in legs.items()}
        total = math.fsum(terms.values())
        rrf = {leg: {"term": t, "share": t / total if total else 0.0} for leg, t in terms.items()}
    why = await wb.client.documents.explain(doc_id, query, filters=filters, tenant_id=tenant)
    return {
        "doc_id": doc_id,
        "fusion": setting.to_meta(),
        "legs": legs,
        "rrf": rrf,
        "fused": math.fsum(v["term"] for v in rrf.values()) if rrf else None,
        "bm25": why.model_dump() if why is not None else None,
    }
