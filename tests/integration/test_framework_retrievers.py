"""The LangChain, LlamaIndex and Haystack retrievers, against the real packages and the real Elasticsearch:
the same ids as SearchClient.search, our provenance in their metadata, filters and tenancy, degraded
results, strict errors — and their synchronous entry points inside a running event loop, outside one, and
from other threads, with no nest_asyncio."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from haystack import Pipeline
from langchain_core.documents import Document as LangChainDocument
from llama_index.core.schema import NodeWithScore

from embeddings import HashingEmbedder, OpenAIEmbedder
from storage import (
    ConfigurationError,
    Document,
    InvalidQuery,
    SearchClient,
    SearchFailed,
    SearchSettings,
    WrongEventLoop,
)
from storage.agent import SearchTool
from storage.integrations import close_client
from storage.integrations import haystack as hs
from storage.integrations import langchain as lc
from storage.integrations import llama_index as li
from storage.types import ResiliencePolicy

CORPUS = [
    Document(
        id="aapl-1", title="Apple cuts revenue guidance", text="Apple lowered its revenue guidance.", ticker="AAPL"
    ),
    Document(id="aapl-2", title="Apple annual report", text="Services revenue grew; margins held.", ticker="AAPL"),
    Document(id="msft-1", title="Microsoft raises guidance", text="Microsoft raised revenue guidance.", ticker="MSFT"),
    Document(
        id="msft-2", title="Microsoft cloud growth", text="Azure cloud revenue grew thirty percent.", ticker="MSFT"
    ),
    Document(id="wx-1", title="Spring weather", text="Rain and mild temperatures expected in April."),
]
QUERY = "revenue guidance"


@dataclass(frozen=True)
class Framework:
    """How to build, call and read one framework's retriever, so one suite runs against all three."""

    name: str
    build: Callable[..., Any]
    sync: Callable[[Any, str], list[Any]]
    asynchronous: Callable[[Any, str], Awaitable[list[Any]]]
    doc_id: Callable[[Any], str]
    metadata: Callable[[Any], dict[str, Any]]


def _haystack_sync(r: Any, q: str) -> list[Any]:
    return list(r.run(q)["documents"])


async def _haystack_async(r: Any, q: str) -> list[Any]:
    return list((await r.run_async(q))["documents"])


FRAMEWORKS = [
    Framework(
        "langchain",
        lc.HybridSearchRetriever,
        lambda r, q: r.invoke(q),
        lambda r, q: r.ainvoke(q),
        lambda d: d.id,
        lambda d: d.metadata,
    ),
    Framework(
        "llama_index",
        li.HybridSearchRetriever,
        lambda r, q: r.retrieve(q),
        lambda r, q: r.aretrieve(q),
        lambda n: n.node.id_,
        lambda n: n.node.metadata,
    ),
    Framework("haystack", hs.HybridSearchRetriever, _haystack_sync, _haystack_async, lambda d: d.id, lambda d: d.meta),
]


@pytest.fixture(params=FRAMEWORKS, ids=lambda f: f.name)
def framework(request: pytest.FixtureRequest) -> Framework:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
async def loaded(client: SearchClient) -> SearchClient:
    await client.ensure_index()
    assert (await client.index_documents(CORPUS, refresh=True)).ok
    return client


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch, settings: SearchSettings) -> None:
    """What from_settings() reads: the test's Elasticsearch and index, the hashing embedder the index has."""
    monkeypatch.setenv("ES_URL", settings.url or "")
    monkeypatch.setenv("ES_INDEX", settings.index)
    monkeypatch.setenv("EMBEDDINGS_PROVIDER", "hashing")
    monkeypatch.setenv("EMBEDDINGS_DIMENSIONS", "64")


async def test_the_retriever_gives_the_ids_of_search_with_our_provenance(
    framework: Framework, loaded: SearchClient
) -> None:
    expected = await loaded.search(QUERY, limit=4)
    retriever = framework.build(client=loaded, limit=4)
    docs = await framework.asynchronous(retriever, QUERY)
    assert [framework.doc_id(d) for d in docs] == expected.ids
    meta = framework.metadata(docs[0])
    top = expected.hits[0]
    assert meta["id"] == top.id
    assert meta["ranks"] == top.ranks
    assert meta["leg_scores"] == top.leg_scores
    assert meta["fused_score"] == top.fused_score
    assert meta["ticker"] == "AAPL"
    assert meta["highlights"] == top.highlights
    assert (meta["degraded"], meta["partial"]) == (False, False)


async def test_sync_calls_work_inside_a_running_loop_outside_one_and_from_threads(
    framework: Framework, loaded: SearchClient, environment: None
) -> None:
    expected = (await loaded.search(QUERY, limit=3)).ids
    owned = framework.build.from_settings(limit=3)  # type: ignore[attr-defined]
    try:
        # Inside this test's running loop: peers raise "asyncio.run() cannot be called from a running loop".
        assert [framework.doc_id(d) for d in framework.sync(owned, QUERY)] == expected
        # In threads with no loop, several at once.
        results = await asyncio.gather(*(asyncio.to_thread(framework.sync, owned, QUERY) for _ in range(3)))
        assert all([framework.doc_id(d) for d in r] == expected for r in results)
        # And the async entry point, from this loop, on the retriever's own.
        assert [framework.doc_id(d) for d in await framework.asynchronous(owned, QUERY)] == expected
    finally:
        owned.close()
    given = framework.build(client=loaded, limit=3)
    # From another thread, a given client's call is handed to the loop the client lives on (this one).
    assert [framework.doc_id(d) for d in await asyncio.to_thread(framework.sync, given, QUERY)] == expected
    # On that loop itself, a sync call would block the loop the client needs: a clear error, never a hang.
    with pytest.raises(ConfigurationError, match="would block that loop"):
        framework.sync(given, QUERY)


def load_corpus(settings: SearchSettings | None = None) -> list[str]:
    """From plain sync code: CORPUS into the index (``settings``, default the environment's), with its own
    client and loop; the top 3 ids for QUERY."""

    async def load() -> list[str]:
        async with SearchClient.from_settings(settings, embedder=HashingEmbedder(dimensions=64)) as c:
            await c.ensure_index()
            assert (await c.index_documents(CORPUS, refresh=True)).ok
            return (await c.search(QUERY, limit=3)).ids

    return asyncio.run(load())


def test_sync_calls_work_with_no_event_loop_anywhere(framework: Framework, environment: None) -> None:
    expected = load_corpus()
    retriever = framework.build.from_settings(limit=3)  # type: ignore[attr-defined]
    try:
        assert [framework.doc_id(d) for d in framework.sync(retriever, QUERY)] == expected
    finally:
        retriever.close()


def test_one_client_shared_by_retrievers_of_every_framework_works_from_sync_async_and_threads(
    environment: None,
) -> None:
    """The issue-51 reproduction: one SearchClient, never entered, given to several retrievers (of all three
    frameworks) called from plain synchronous code, then from a running loop, then from threads. It lives on
    one loop (its own), every call is handed there, and the breaker never sees a loop mix-up."""

    expected = load_corpus()
    shared = SearchClient.from_settings(embedder=HashingEmbedder(dimensions=64))
    retrievers = [f.build(client=shared, limit=3) for f in FRAMEWORKS] + [lc.HybridSearchRetriever(client=shared)]
    for framework, retriever in zip([*FRAMEWORKS, FRAMEWORKS[0]], retrievers, strict=True):
        assert [framework.doc_id(d) for d in framework.sync(retriever, QUERY)][:3] == expected, framework.name
        assert [framework.doc_id(d) for d in framework.sync(retriever, QUERY)][:3] == expected  # and again

    async def from_a_running_loop() -> None:
        for framework, retriever in zip(FRAMEWORKS, retrievers, strict=False):
            assert [framework.doc_id(d) for d in await framework.asynchronous(retriever, QUERY)] == expected
        # The client itself, called on a loop other than its own: a typed error, nothing sent.
        with pytest.raises(WrongEventLoop, match="one client per event loop"):
            await shared.search(QUERY)

    asyncio.run(from_a_running_loop())
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(f.sync, r, QUERY) for f, r in zip(FRAMEWORKS * 2, retrievers[:3] * 2, strict=True)]
        results = [[f.doc_id(d) for d in fut.result()] for f, fut in zip(FRAMEWORKS * 2, futures, strict=True)]
    assert all(r == expected for r in results)
    assert shared.breakers["elasticsearch"].state == "closed"  # a caller's loop mix-up never opens a breaker
    assert shared.breakers["elasticsearch"].rejected_open == 0
    close_client(shared)  # closed on its own loop, which then stops
    assert shared.closed


async def test_filters_and_tenancy_apply(framework: Framework, settings: SearchSettings) -> None:
    tenanted = settings.model_copy(update={"multi_tenant": True})
    async with SearchClient.from_settings(tenanted, embedder=HashingEmbedder(dimensions=64)) as client:
        await client.ensure_index()
        assert (await client.index_documents(CORPUS[:3], tenant_id="acme", refresh=True)).ok
        assert (await client.index_documents(CORPUS[3:], tenant_id="globex", refresh=True)).ok
        filtered = framework.build(client=client, tenant_id="acme", filters={"ticker": "MSFT"})
        docs = await framework.asynchronous(filtered, QUERY)
        assert [framework.doc_id(d) for d in docs] == ["msft-1"]
        other = await framework.asynchronous(framework.build(client=client, tenant_id="globex"), QUERY)
        assert {framework.metadata(d)["tenant_id"] for d in other} == {"globex"}
        with pytest.raises(ConfigurationError, match="unknown search option"):
            framework.build(client=client, filtres={"ticker": "MSFT"})  # a typo is never a silent no-op


async def test_a_dead_embedder_gives_bm25_documents_flagged_degraded_and_strict_raises(
    framework: Framework, loaded: SearchClient, settings: SearchSettings
) -> None:
    dead = OpenAIEmbedder(model="m", dimensions=64, base_url="http://127.0.0.1:9/v1", api_key="k", timeout_s=1)
    policy = ResiliencePolicy(attempts=1, fail_max=1000)
    async with SearchClient(
        loaded.elasticsearch, dead, settings, owns_clients=False, policies={"embeddings": policy}
    ) as degraded:
        docs = await framework.asynchronous(framework.build(client=degraded, limit=3), QUERY)
        assert docs
        for doc in docs:
            meta = framework.metadata(doc)
            assert meta["degraded"] is True
            assert meta["legs_failed"] == ["knn"]
            assert set(meta["ranks"]) == {"bm25"}
        with pytest.raises(SearchFailed):
            await framework.asynchronous(framework.build(client=degraded, strict=True), QUERY)


async def test_langchain_batch_and_per_call_options(loaded: SearchClient) -> None:
    retriever = lc.HybridSearchRetriever(client=loaded, limit=2)
    batched = await retriever.abatch([QUERY, "cloud growth"])
    assert [[d.id for d in docs] for docs in batched] == [
        (await loaded.search(QUERY, limit=2)).ids,
        (await loaded.search("cloud growth", limit=2)).ids,
    ]
    assert all(isinstance(d, LangChainDocument) for docs in batched for d in docs)
    in_threads = await asyncio.to_thread(retriever.batch, [QUERY, QUERY])
    assert [d.id for d in in_threads[0]] == [d.id for d in batched[0]]
    only_msft = await retriever.ainvoke(QUERY, filters={"ticker": "MSFT"}, limit=5)
    assert {d.metadata["ticker"] for d in only_msft} == {"MSFT"}


async def test_an_empty_query_in_a_langchain_retriever_tool_reaches_the_model_as_a_sentence(
    loaded: SearchClient,
) -> None:
    from langchain_core.tools import create_retriever_tool

    retriever = lc.HybridSearchRetriever(client=loaded)
    tool = create_retriever_tool(retriever, "search_documents", "Search the documents.")
    tool.handle_tool_error = True
    observation = await tool.ainvoke({"query": "  "})  # the agent loop goes on: the model reads why
    assert "empty" in observation
    with pytest.raises(InvalidQuery):  # outside a tool, still the library's typed error
        await retriever.ainvoke("")


async def test_the_langchain_agent_tools_serve_the_one_tool_contract(loaded: SearchClient) -> None:
    agent_tool = SearchTool(loaded, allowed_filters=("ticker",), limit=2)
    tools = {t.name: t for t in lc.agent_tools(agent_tool)}
    assert set(tools) == {"search_documents", "get_document", "answer"}
    schema = tools["search_documents"].tool_call_schema.model_json_schema()
    assert set(schema["properties"]) == {"query", "limit", "facets", "one_per", "ticker"}
    assert schema["properties"]["limit"]["maximum"] == 20
    found = await tools["search_documents"].ainvoke({"query": QUERY, "ticker": "MSFT"})
    assert found == await agent_tool.run({"query": QUERY, "ticker": "MSFT"})  # the same text as every surface
    assert await asyncio.to_thread(tools["search_documents"].invoke, {"query": QUERY, "ticker": "MSFT"}) == found
    refused = await tools["search_documents"].ainvoke({"query": QUERY, "sector": "tech"})
    assert refused.startswith("Error: 'sector' is not an argument of this tool")
    empty = await tools["search_documents"].ainvoke({"query": ""})
    assert empty == "Error: the query is empty. Call the tool again with a few words describing what to find."
    assert (await tools["get_document"].ainvoke({"id": "aapl-1"})).startswith("[#aapl-1] Apple cuts revenue")
    assert "not set up" in await tools["answer"].ainvoke({"question": "Why?"})


async def test_llama_index_nodes_keep_the_provenance_out_of_the_llm_text(loaded: SearchClient) -> None:
    nodes = await li.HybridSearchRetriever(client=loaded, limit=2).aretrieve(QUERY)
    assert all(isinstance(n, NodeWithScore) for n in nodes)
    shown = nodes[0].node.get_content(metadata_mode="llm")  # type: ignore[arg-type]
    assert "Apple" in shown
    assert "leg_scores" not in shown
    assert "ticker: AAPL" in shown


async def test_haystack_pipelines_run_it_and_it_round_trips_through_to_dict(
    loaded: SearchClient, environment: None
) -> None:
    expected = (await loaded.search(QUERY, limit=3)).ids
    component = hs.HybridSearchRetriever.from_settings(limit=3)
    try:
        sync_pipeline = Pipeline()
        sync_pipeline.add_component("retriever", component)
        result = await asyncio.to_thread(sync_pipeline.run, {"retriever": {"query": QUERY}})
        assert [d.id for d in result["retriever"]["documents"]] == expected
        async_pipeline = Pipeline()  # (haystack-ai 3: Pipeline.run_async runs run_async)
        async_pipeline.add_component("retriever", hs.HybridSearchRetriever(client=loaded, limit=3))
        result = await async_pipeline.run_async({"retriever": {"query": QUERY, "top_k": 1}})
        assert [d.id for d in result["retriever"]["documents"]] == expected[:1]
        restored = Pipeline.loads(sync_pipeline.dumps(), allowed_modules=["storage.integrations.haystack"])
        again = await asyncio.to_thread(restored.run, {"retriever": {"query": QUERY, "filters": {"ticker": "MSFT"}}})
        assert {d.meta["ticker"] for d in again["retriever"]["documents"]} == {"MSFT"}
        restored.get_component("retriever").close()  # type: ignore[attr-defined]
    finally:
        component.close()
    with pytest.raises(ConfigurationError, match="cannot be serialized"):
        hs.HybridSearchRetriever(client=loaded).to_dict()


@pytest.fixture(autouse=True)
async def _no_leaked_loops() -> AsyncIterator[None]:
    """Every retriever built from the environment is closed by its test: no bridge thread is left behind."""
    import threading

    before = {t.name for t in threading.enumerate()}
    yield
    await asyncio.sleep(0)
    left = [t for t in threading.enumerate() if t.name == "hybrid-search-bridge" and t.is_alive()]
    assert not left or "hybrid-search-bridge" in before, left


async def test_each_framework_s_own_names_and_filter_syntax_are_understood(loaded: SearchClient) -> None:
    from llama_index.core.vector_stores.types import FilterCondition, MetadataFilter, MetadataFilters

    expected = (await loaded.search(QUERY, limit=2, filters={"ticker": ["AAPL", "MSFT"]})).ids
    llama = li.HybridSearchRetriever(
        client=loaded,
        similarity_top_k=2,
        filters=MetadataFilters(
            filters=[MetadataFilter(key="ticker", value="AAPL"), MetadataFilter(key="ticker", value="MSFT")],
            condition=FilterCondition.OR,
        ),
    )
    assert [n.node.id_ for n in await llama.aretrieve(QUERY)] == expected
    hay = hs.HybridSearchRetriever(client=loaded)
    found = await hay.run_async(
        QUERY,
        filters={
            "operator": "AND",
            "conditions": [{"field": "meta.ticker", "operator": "in", "value": ["AAPL", "MSFT"]}],
        },
        top_k=2,
    )
    assert [d.id for d in found["documents"]] == expected
    with pytest.raises(InvalidQuery, match="top_k must be a whole number"):
        await hay.run_async(QUERY, top_k="3")  # type: ignore[arg-type]
    not_apple = await hay.run_async(QUERY, filters={"field": "meta.ticker", "operator": "!=", "value": "AAPL"})
    assert not_apple["documents"]
    assert all(d.meta.get("ticker") != "AAPL" for d in not_apple["documents"])  # (one without a ticker too)
    with pytest.raises(InvalidQuery, match="'like'"):
        await hay.run_async(QUERY, filters={"field": "meta.ticker", "operator": "like", "value": "AA%"})
    with pytest.raises(InvalidQuery, match="limit must be a whole number"):
        await lc.HybridSearchRetriever(client=loaded, limit="3").ainvoke(QUERY)
    lang = lc.HybridSearchRetriever(client=loaded, k=2, filter={"ticker": ["AAPL", "MSFT"]})
    assert [d.id for d in await lang.ainvoke(QUERY)] == expected
