"""Writes the Kibana saved objects: two data views, seven Lens panels and the dashboard that holds them.

They ship inside the package (src/storage/kibana_saved_objects.ndjson: what `hybrid-search kibana-import`
sends from an installed wheel); this generator stays here with the Kibana documentation.

    python kibana/generate.py            # rewrite the NDJSON
    python kibana/generate.py --check    # exit 1 if the committed file differs (the tests do this too)

Every field a panel reads is one the library writes (storage._observability.telemetry.TELEMETRY_FIELDS); a test checks
it against the documents that land in the data stream.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

OUT = Path(__file__).parents[1] / "src" / "storage" / "kibana_saved_objects.ndjson"
DOCS_VIEW = "hybrid-search-documents"
TELEMETRY_VIEW = "hybrid-search-telemetry"
LAYER = "layer1"
DASHBOARD = "hybrid-search-overview"


def data_view(oid: str, title: str, name: str, time_field: str, source_filters: list[str]) -> dict[str, Any]:
    return {
        "type": "index-pattern",
        "id": oid,
        "attributes": {
            "title": title,
            "name": name,
            "timeFieldName": time_field,
            "sourceFilters": json.dumps([{"value": f} for f in source_filters]),
        },
        "references": [],
        "coreMigrationVersion": "8.8.0",
        "typeMigrationVersion": "8.0.0",
    }


def date_col() -> dict[str, Any]:
    return {
        "label": "@timestamp",
        "dataType": "date",
        "operationType": "date_histogram",
        "sourceField": "@timestamp",
        "isBucketed": True,
        "scale": "interval",
        "params": {"interval": "auto", "includeEmptyRows": True, "dropPartials": False},
    }


def count_col(label: str, kql: str = "") -> dict[str, Any]:
    col: dict[str, Any] = {
        "label": label,
        "customLabel": True,
        "dataType": "number",
        "operationType": "count",
        "sourceField": "___records___",
        "isBucketed": False,
        "scale": "ratio",
        "params": {"emptyAsNull": False},
    }
    if kql:
        col["filter"] = {"language": "kuery", "query": kql}
    return col


def percentile_col(field: str, pct: int, label: str) -> dict[str, Any]:
    return {
        "label": label,
        "customLabel": True,
        "dataType": "number",
        "operationType": "percentile",
        "sourceField": field,
        "isBucketed": False,
        "scale": "ratio",
        "params": {"percentile": pct},
    }


def terms_col(field: str, label: str, order_by: str, size: int = 10) -> dict[str, Any]:
    return {
        "label": label,
        "customLabel": True,
        "dataType": "string",
        "operationType": "terms",
        "sourceField": field,
        "isBucketed": True,
        "scale": "ordinal",
        "params": {
            "size": size,
            "orderBy": {"type": "column", "columnId": order_by},
            "orderDirection": "desc",
            "otherBucket": True,
            "missingBucket": False,
        },
    }


def lens(
    oid: str, title: str, vis_type: str, visualization: dict[str, Any], columns: dict[str, Any], kql: str = ""
) -> dict[str, Any]:
    state = {
        "visualization": visualization,
        "query": {"language": "kuery", "query": kql},
        "filters": [],
        "datasourceStates": {
            "formBased": {
                "layers": {LAYER: {"columns": columns, "columnOrder": list(columns), "incompleteColumns": {}}}
            }
        },
        "internalReferences": [],
        "adHocDataViews": {},
    }
    return {
        "type": "lens",
        "id": oid,
        "attributes": {"title": title, "description": "", "visualizationType": vis_type, "state": state},
        "references": [
            {"type": "index-pattern", "id": TELEMETRY_VIEW, "name": f"indexpattern-datasource-layer-{LAYER}"}
        ],
        "coreMigrationVersion": "8.8.0",
        "typeMigrationVersion": "8.9.0",
    }


def xy(
    oid: str,
    title: str,
    columns: dict[str, Any],
    accessors: list[str],
    *,
    x: str,
    split: str | None = None,
    series: str = "bar_stacked",
    kql: str = "",
) -> dict[str, Any]:
    layer: dict[str, Any] = {
        "layerId": LAYER,
        "layerType": "data",
        "seriesType": series,
        "xAccessor": x,
        "accessors": accessors,
    }
    if split:
        layer["splitAccessor"] = split
    vis = {
        "legend": {"isVisible": True, "position": "right"},
        "valueLabels": "hide",
        "preferredSeriesType": series,
        "layers": [layer],
    }
    return lens(oid, title, "lnsXY", vis, columns, kql)


def table(oid: str, title: str, columns: dict[str, Any], kql: str = "") -> dict[str, Any]:
    vis = {"layerId": LAYER, "layerType": "data", "columns": [{"columnId": c} for c in columns]}
    return lens(oid, title, "lnsDatatable", vis, columns, kql)


def panels() -> list[dict[str, Any]]:
    return [
        xy(
            "hs-searches-over-time",
            "Searches over time, by mode",
            {"t": date_col(), "mode": terms_col("search.mode", "Mode", "n", 3), "n": count_col("Searches")},
            ["n"],
            x="t",
            split="mode",
            kql='event.action : "search"',
        ),
        xy(
            "hs-leg-latency",
            "Latency per leg (p50 / p95, ms)",
            {
                "t": date_col(),
                "bm25_p50": percentile_col("search.legs.bm25.latency_ms", 50, "BM25 p50"),
                "bm25_p95": percentile_col("search.legs.bm25.latency_ms", 95, "BM25 p95"),
                "knn_p50": percentile_col("search.legs.knn.latency_ms", 50, "kNN p50"),
                "knn_p95": percentile_col("search.legs.knn.latency_ms", 95, "kNN p95"),
            },
            ["bm25_p50", "bm25_p95", "knn_p50", "knn_p95"],
            x="t",
            series="line",
            kql='event.action : "search"',
        ),
        xy(
            "hs-degraded",
            "Degraded searches by reason",
            {
                "t": date_col(),
                "reason": terms_col("search.degraded_reason", "Reason", "n", 5),
                "n": count_col("Degraded searches"),
            },
            ["n"],
            x="t",
            split="reason",
            kql='event.action : "search" and search.degraded : true',
        ),
        xy(
            "hs-partial",
            "Partial searches (some shards did not answer)",
            {
                "t": date_col(),
                "mode": terms_col("search.mode", "Mode", "n", 3),
                "n": count_col("Partial searches"),
            },
            ["n"],
            x="t",
            split="mode",
            kql='event.action : "search" and search.partial : true',
        ),
        table(
            "hs-breaker-transitions",
            "Circuit-breaker transitions",
            {
                "dep": terms_col("resilience.dependency", "Dependency", "n", 5),
                "to": terms_col("resilience.breaker.to", "New state", "n", 3),
                "n": count_col("Transitions"),
            },
            kql='event.action : "resilience.breaker_state"',
        ),
        table(
            "hs-zero-results",
            "Zero-result queries (by query hash)",
            {"q": terms_col("search.query_hash", "Query hash", "n", 20), "n": count_col("Searches")},
            kql='event.action : "search" and search.hits : 0',
        ),
        xy(
            "hs-top-filters",
            "Top filters",
            {"f": terms_col("search.filters", "Filtered field", "n", 10), "n": count_col("Searches")},
            ["n"],
            x="f",
            series="bar_horizontal",
            kql='event.action : "search"',
        ),
        xy(
            "hs-facets",
            "Facets asked for",
            {"f": terms_col("search.facets", "Facet field", "n", 10), "n": count_col("Searches")},
            ["n"],
            x="f",
            series="bar_horizontal",
            kql='event.action : "search" and search.facets : *',
        ),
        xy(
            "hs-groups",
            "Grouped searches (one hit per group), by field",
            {"g": terms_col("search.group_by", "Grouped by", "n", 10), "n": count_col("Searches")},
            ["n"],
            x="g",
            series="bar_horizontal",
            kql='event.action : "search" and search.group_by : *',
        ),
    ]


def dashboard(lens_objects: list[dict[str, Any]]) -> dict[str, Any]:
    grid = [(0, 0), (24, 0), (0, 15), (24, 15), (0, 30), (24, 30), (0, 45), (24, 45), (0, 60)]
    panel_list = []
    references = []
    for i, (obj, (x, y)) in enumerate(zip(lens_objects, grid, strict=True)):
        ref = f"panel_{i}"
        panel_list.append(
            {
                "type": "lens",
                "panelIndex": obj["id"],
                "gridData": {"x": x, "y": y, "w": 24, "h": 15, "i": obj["id"]},
                "embeddableConfig": {"enhancements": {}},
                "panelRefName": ref,
            }
        )
        references.append({"type": "lens", "id": obj["id"], "name": f"{obj['id']}:{ref}"})
    return {
        "type": "dashboard",
        "id": DASHBOARD,
        "attributes": {
            "title": "Hybrid search — overview",
            "description": "Searches, per-leg latency, degraded and partial results, breaker transitions, "
            "zero-result queries, top filters, and the facets and groupings asked for, from the search telemetry "
            "data stream.",
            "panelsJSON": json.dumps(panel_list),
            "optionsJSON": json.dumps({"useMargins": True, "syncColors": False, "hidePanelTitles": False}),
            "timeRestore": True,
            "timeFrom": "now-24h",
            "timeTo": "now",
            "refreshInterval": {"pause": False, "value": 30000},
            "kibanaSavedObjectMeta": {
                "searchSourceJSON": json.dumps({"query": {"query": "", "language": "kuery"}, "filter": []})
            },
        },
        "references": references,
        "coreMigrationVersion": "8.8.0",
        "typeMigrationVersion": "8.9.0",
    }


def objects() -> list[dict[str, Any]]:
    lens_objects = panels()
    return [
        data_view(DOCS_VIEW, "documents*", "Hybrid search documents", "published_at", ["embedding"]),
        data_view(TELEMETRY_VIEW, "logs-hybridsearch.search-*", "Hybrid search telemetry", "@timestamp", []),
        *lens_objects,
        dashboard(lens_objects),
    ]


def render() -> str:
    return "".join(json.dumps(o, sort_keys=True, ensure_ascii=False) + "\n" for o in objects())


if __name__ == "__main__":
    text = render()
    if "--check" in sys.argv:
        sys.exit(0 if OUT.read_text(encoding="utf-8") == text else 1)
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT} ({len(objects())} objects)")
