"""What operators see: OpenTelemetry spans and ECS JSON log lines, from searches on the real Elasticsearch."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from embeddings import OpenAIEmbedder
from storage import Document, SearchClient, configure_ecs_logging, correlation_id

DOCS = [
    Document(id="a", title="Apple cuts revenue guidance", text="Apple lowered its revenue guidance.", ticker="AAPL"),
    Document(id="b", title="Microsoft cloud", text="Azure revenue grew thirty percent.", ticker="MSFT"),
]
SECRET_QUERY = "confidential revenue guidance"


@pytest.fixture(scope="module")
def spans() -> Iterator[InMemorySpanExporter]:
    """The application's side: one tracer provider, set once per process (OpenTelemetry allows no reset)."""
    exporter = InMemorySpanExporter()
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield exporter
    exporter.shutdown()


def _named(exporter: InMemorySpanExporter, prefix: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name.startswith(prefix)]


async def test_a_hybrid_search_is_one_span_with_a_child_per_leg_and_the_embedding_under_knn(
    client: SearchClient, spans: InMemorySpanExporter
) -> None:
    await client.ensure_index()
    await client.index_documents(DOCS, refresh=True)
    spans.clear()
    await client.search(SECRET_QUERY)

    (search,) = _named(spans, "hybrid_search.search")
    legs = {s.name: s for s in _named(spans, "hybrid_search.leg.")}
    (embed,) = _named(spans, "hybrid_search.embed")
    assert set(legs) == {"hybrid_search.leg.bm25", "hybrid_search.leg.knn"}
    assert search.context is not None
    assert all(s.parent is not None and s.parent.span_id == search.context.span_id for s in legs.values())
    knn = legs["hybrid_search.leg.knn"]
    assert knn.context is not None
    assert embed.parent is not None
    assert embed.parent.span_id == knn.context.span_id
    assert embed.attributes is not None
    assert embed.attributes["embeddings.kind"] == "query"
    assert search.attributes is not None
    assert search.attributes["search.mode"] == "hybrid"
    assert search.attributes["search.degraded"] is False
    assert search.attributes["search.hits"] >= 1  # type: ignore[operator]
    # elasticsearch-py's own request spans nest under our legs.
    leg_ids = {s.context.span_id for s in legs.values() if s.context is not None}
    es_spans = [s for s in spans.get_finished_spans() if s.parent is not None and s.parent.span_id in leg_ids]
    assert {s.name for s in es_spans} >= {"search"}
    # No query text anywhere in our spans.
    for s in [search, embed, *legs.values()]:
        assert all(SECRET_QUERY not in str(v) for v in (s.attributes or {}).values())


async def test_a_failed_leg_is_an_error_span_and_the_degraded_search_says_why(
    client: SearchClient, spans: InMemorySpanExporter
) -> None:
    await client.ensure_index()
    await client.index_documents(DOCS, refresh=True)
    dead = OpenAIEmbedder(model="m", dimensions=64, base_url="http://127.0.0.1:9/v1", api_key="k", timeout_s=1)
    async with SearchClient(client.elasticsearch, dead, client.settings, owns_clients=False) as c:
        spans.clear()
        res = await c.search("revenue guidance")
    await dead.aclose()
    assert res.degraded
    (knn,) = _named(spans, "hybrid_search.leg.knn")
    (bm25,) = _named(spans, "hybrid_search.leg.bm25")
    (search,) = _named(spans, "hybrid_search.search")
    assert knn.status.status_code is StatusCode.ERROR
    assert knn.attributes is not None
    assert knn.attributes["search.leg.reason"] == "connection_error"
    assert bm25.status.status_code is not StatusCode.ERROR
    assert search.attributes is not None
    assert search.attributes["search.degraded_reason"] == "connection_error"
    assert [e.status.status_code for e in _named(spans, "hybrid_search.embed")] == [StatusCode.ERROR]


async def test_the_ecs_helper_writes_one_json_document_per_search_with_the_documented_fields(
    client: SearchClient,
) -> None:
    await client.ensure_index()
    await client.index_documents(DOCS, refresh=True)
    stream = io.StringIO()
    handler = configure_ecs_logging(logging.INFO, stream=stream)
    try:
        with correlation_id("req-42"):
            await client.search(SECRET_QUERY, filters={"ticker": "AAPL"})
    finally:
        logging.getLogger("storage").removeHandler(handler)
        logging.getLogger("storage").setLevel(logging.NOTSET)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    searches = [doc for doc in lines if doc.get("event", {}).get("action") == "search"]
    assert len(searches) == 1
    doc = searches[0]
    assert doc["@timestamp"]
    assert doc["log.level"] == "info"
    assert doc["ecs.version"]
    assert doc["event"]["dataset"] == "storage.search"
    assert doc["event"]["outcome"] == "success"
    assert doc["trace"]["correlation_id"] == "req-42"
    assert doc["log"]["origin"]["function"] != "event"  # points at our code that logged, not the helper
    s = doc["search"]
    assert s["mode"] == "hybrid"
    assert len(s["query_hash"]) == 16
    assert s["fusion"]["method"] == "rrf"
    assert s["fusion"]["k"] == 10
    assert set(s["legs"]) == {"bm25", "knn"}
    assert all({"latency_ms", "hits"} <= set(leg) for leg in s["legs"].values())
    assert s["degraded"] is False
    assert SECRET_QUERY not in stream.getvalue()
    assert "embedding" not in json.dumps(doc)  # never a vector
