"""Search telemetry lands in a real data stream, matches the Kibana saved objects, and never hurts searches."""

from __future__ import annotations

import importlib.util
import json
import time
import urllib.parse
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from elasticsearch import AsyncElasticsearch

from embeddings import HashingEmbedder, OpenAIEmbedder
from storage import Document, SearchClient, SearchSettings
from storage._observability.kibana import saved_objects
from storage._observability.telemetry import TELEMETRY_FIELDS, TelemetrySink
from storage.types import ResiliencePolicy

from .._faultproxy import FaultProxy

KIBANA = Path(__file__).parents[2] / "kibana"  # the generator; the objects ship inside the package
DOCS = [
    Document(id="a", text="revenue guidance cut", ticker="AAPL"),
    Document(id="b", text="cloud revenue grew", ticker="MSFT"),
]


def _saved_objects() -> list[dict[str, Any]]:
    return [json.loads(line) for line in saved_objects().decode().splitlines()]


def _fields_read_by_panels() -> set[str]:
    fields: set[str] = set()
    for obj in _saved_objects():
        if obj["type"] != "lens":
            continue
        state = obj["attributes"]["state"]
        for layer in state["datasourceStates"]["formBased"]["layers"].values():
            fields |= {c["sourceField"] for c in layer["columns"].values() if c["sourceField"] != "___records___"}
        kql = state["query"]["query"]
        fields |= {part.split(":")[0].strip() for part in kql.split(" and ") if ":" in part}
    return fields


@pytest.fixture
async def telemetry_stream(es: AsyncElasticsearch) -> AsyncIterator[str]:
    name = f"logs-hybridsearch.test{int(time.time() * 1000)}-default"
    yield name
    # 405 on the minimal distribution: its data-stream management API is a module it leaves out (the data
    # stream itself is created by indexing, in the server); the test cluster is thrown away anyway.
    await es.options(ignore_status=(404, 405)).indices.delete_data_stream(name=name)


def test_the_committed_saved_objects_are_the_generated_ones() -> None:
    spec = importlib.util.spec_from_file_location("kibana_generate", KIBANA / "generate.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert saved_objects().decode() == module.render()
    kinds = [o["type"] for o in _saved_objects()]
    assert kinds.count("index-pattern") == 2
    assert kinds.count("lens") == 9
    assert kinds.count("dashboard") == 1
    dashboard = next(o for o in _saved_objects() if o["type"] == "dashboard")
    panel_refs = {p["panelRefName"] for p in json.loads(dashboard["attributes"]["panelsJSON"])}
    assert {r["name"].split(":")[1] for r in dashboard["references"]} == panel_refs
    lens_ids = {o["id"] for o in _saved_objects() if o["type"] == "lens"}
    assert {r["id"] for r in dashboard["references"]} == lens_ids
    assert _fields_read_by_panels() <= set(TELEMETRY_FIELDS)


async def test_search_events_land_in_the_data_stream_with_the_fields_the_dashboard_reads(
    client: SearchClient, es: AsyncElasticsearch, telemetry_stream: str, settings: SearchSettings
) -> None:
    await client.ensure_index()
    await client.index_documents(DOCS, refresh=True)
    sink = await client.enable_telemetry(data_stream=telemetry_stream, flush_interval_s=0.2)
    await client.search("revenue", filters={"ticker": "AAPL"})
    await client.search("nothing matches this", mode="bm25")
    await client.search("revenue", facets=["ticker"], group_by="ticker")
    dead = OpenAIEmbedder(model="m", dimensions=64, base_url="http://127.0.0.1:9/v1", api_key="k", timeout_s=1)
    policy = ResiliencePolicy(attempts=1, fail_max=1, reset_timeout_s=60)
    async with SearchClient(
        client.elasticsearch, dead, settings, owns_clients=False, policies={"embeddings": policy}
    ) as c:
        await c.enable_telemetry(data_stream=telemetry_stream)  # its own sink: flushed when it closes
        await c.search("revenue")  # degraded: the embedder is down; its breaker opens
    await dead.aclose()
    await sink.flush()
    await es.indices.refresh(index=telemetry_stream)
    docs = [h["_source"] for h in (await es.search(index=telemetry_stream, size=100)).body["hits"]["hits"]]
    searches = [d for d in docs if d["event.action"] == "search"]
    assert len(searches) == 4
    assert sink.dropped == 0
    by_mode = {d["search.mode"]: d for d in searches}
    assert by_mode["bm25"]["search.hits"] == 0
    assert any(d.get("search.filters") == ["ticker"] for d in searches)
    assert any(d.get("search.degraded") is True and d.get("search.degraded_reason") for d in searches)
    transitions = [d for d in docs if d["event.action"] == "resilience.breaker_state"]
    assert {(d["resilience.dependency"], d["resilience.breaker.to"]) for d in transitions} == {("embeddings", "open")}
    # Every field a panel reads is mapped in the backing index and present in the documents.
    mapping = (await es.indices.get_mapping(index=telemetry_stream)).body
    assert all(name.startswith(".ds-logs-hybridsearch.") for name in mapping)  # a data stream's backing index
    (props,) = [m["mappings"]["properties"] for m in mapping.values()]

    def mapped(field: str) -> bool:
        node: Any = {"properties": props}
        for part in field.split(".") if field != "@timestamp" else [field]:
            node = node.get("properties", {}).get(part)
            if node is None:
                return False
        return "type" in node

    present = {k for d in docs for k in d}
    for field in _fields_read_by_panels() | {"@timestamp"}:
        assert mapped(field), field
        assert field in present, field
    assert all("revenue" not in json.dumps(d) for d in searches)  # hashes, never query text


async def test_a_clients_telemetry_ships_its_own_events_and_no_other_clients(
    client: SearchClient, es: AsyncElasticsearch, telemetry_stream: str, settings: SearchSettings
) -> None:
    await client.ensure_index()
    await client.index_documents(DOCS, refresh=True)
    sink = await client.enable_telemetry(data_stream=telemetry_stream, flush_interval_s=0.2)
    async with SearchClient(client.elasticsearch, HashingEmbedder(dimensions=64), settings, owns_clients=False) as c:
        for _ in range(3):
            await c.search("revenue")  # another client in the same process: no telemetry of its own
    await client.search("revenue", mode="bm25")
    await sink.flush()
    await es.indices.refresh(index=telemetry_stream)
    docs = [h["_source"] for h in (await es.search(index=telemetry_stream, size=100)).body["hits"]["hits"]]
    assert [d["search.mode"] for d in docs if d["event.action"] == "search"] == ["bm25"]
    assert sink.emitted == 1


async def test_a_failing_or_slow_sink_never_slows_or_fails_searches(client: SearchClient, es_url: str) -> None:
    await client.ensure_index()
    await client.index_documents(DOCS, refresh=True)
    parsed = urllib.parse.urlparse(es_url)
    proxy = await FaultProxy(parsed.hostname or "127.0.0.1", parsed.port or 9200).start()
    await proxy.set_mode("blackhole")
    sink_es = AsyncElasticsearch(proxy.url, max_retries=0)
    policy = ResiliencePolicy(attempts=1, attempt_timeout_s=0.5, deadline_s=0.6, fail_max=2, reset_timeout_s=60)
    sink = TelemetrySink(
        sink_es,
        data_stream="logs-hybridsearch.never-default",
        batch_size=5,
        flush_interval_s=0.05,
        max_buffer=20,
        policy=policy,
    )
    try:
        await sink.start()
        for i in range(60):
            started = time.perf_counter()
            res = await client.search("revenue")
            assert res.hits
            assert time.perf_counter() - started < 1.0  # far below the sink's 0.5 s stalls per batch
            sink.emit({"@timestamp": "2024-01-01T00:00:00Z", "event.action": "search", "n": i})
        await sink.aclose(timeout_s=1)
    finally:
        await sink_es.close()
        await proxy.stop()
    assert client.breakers["elasticsearch"].state == "closed"
    assert sink.resilience.state == "open"
    assert sink.shipped == 0
    assert sink.dropped == 60  # every event accounted for: dropped, never blocking
    print(f"\nblackholed sink: 60 searches unaffected; dropped {sink.dropped}, breaker {sink.resilience.state}")
