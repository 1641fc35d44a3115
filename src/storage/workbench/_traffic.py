"""The workbench's view of live traffic: recent, slow or degraded searches from the telemetry data stream."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from starlette.requests import Request

from .. import InvalidQuery

if TYPE_CHECKING:
    from ._app import Workbench

__all__ = ["traffic"]


async def traffic(wb: Workbench, request: Request) -> dict[str, Any]:
    """Recent, slow or degraded searches from the telemetry data stream (when telemetry ships there); each
    with its text when this workbench knows it (telemetry records a hash, never what users typed)."""
    kind = request.query_params.get("kind", "recent")
    sort = {"recent": [{"@timestamp": "desc"}], "slow": [{"event.duration": "desc"}]}.get(kind)
    if kind not in ("recent", "slow", "degraded"):
        raise InvalidQuery("kind must be recent, slow or degraded")
    query: dict[str, Any] = {"bool": {"filter": [{"term": {"event.action": "search"}}]}}
    if kind == "degraded":
        query["bool"]["filter"].append({"term": {"search.degraded": True}})
    stream = wb.client.settings.telemetry_data_stream
    es = wb.client.elasticsearch
    found = await es.options(ignore_status=(404, 503)).search(
        index=stream, query=query, sort=sort or [{"@timestamp": "desc"}], size=50
    )
    if found.meta.status == 404:
        return {"enabled": False, "data_stream": stream, "searches": []}
    if found.meta.status == 503:  # created a moment ago: its first shard is not ready yet
        return {"enabled": True, "data_stream": stream, "searches": []}
    rows = []
    for h in found.body["hits"]["hits"]:
        s = h["_source"]
        digest = s.get("search", {}).get("query_hash") or s.get("search.query_hash")
        flat = _flatten(s)
        rows.append(
            {
                "at": flat.get("@timestamp"),
                "query_hash": digest,
                "query": wb.texts.get(str(digest)),
                "mode": flat.get("search.mode"),
                "ms": round(int(flat.get("event.duration", 0)) / 1e6, 1),
                "hits": flat.get("search.hits"),
                "degraded": flat.get("search.degraded", False),
                "degraded_reason": flat.get("search.degraded_reason"),
                "filters": flat.get("search.filters"),
            }
        )
    return {"enabled": True, "data_stream": stream, "searches": rows}


def _flatten(doc: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in doc.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out
