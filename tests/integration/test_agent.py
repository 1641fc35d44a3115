"""The agent tool and the MCP server against the real Elasticsearch."""

from __future__ import annotations

import json
import os
import sys

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from embeddings import OpenAIEmbedder
from storage import Document, SearchClient, SearchSettings
from storage.agent import SearchTool

from .._chat_server import ChatServer

DOCS = [
    Document(
        id="aapl-1",
        title="Apple cuts revenue guidance",
        text="Apple lowered its revenue guidance for the quarter citing weak iPhone demand in China. " * 3,
        ticker="AAPL",
        source="reuters",
        published_at="2024-02-01",
    ),
    Document(id="msft-1", title="Microsoft cloud", text="Azure revenue grew thirty percent.", ticker="MSFT"),
    *[Document(id=f"filler-{i}", text=f"revenue note number {i} " * 30, ticker="ZZZ") for i in range(20)],
]


@pytest.fixture
async def tool(client: SearchClient) -> SearchTool:
    await client.ensure_index()
    assert (await client.index_documents(DOCS, refresh=True)).ok
    return SearchTool(client, allowed_filters=("ticker", "date"), limit=5, max_chars=1500)


async def test_the_schema_round_trips_and_the_output_cites_real_hits(tool: SearchTool) -> None:
    definition = json.loads(json.dumps(tool.definition()))  # what goes over the wire to the model
    assert definition["type"] == "function"
    fn = definition["function"]
    assert fn["name"] == "search_documents"
    params = fn["parameters"]
    assert params["required"] == ["query"]
    assert params["additionalProperties"] is False
    assert set(params["properties"]) == {"query", "ticker", "date_from", "date_to"}  # no depth, no fusion
    assert params["properties"]["date_from"]["anyOf"][0]["format"] == "date"
    # The model answers with JSON arguments built from that schema.
    out = await tool.run(json.dumps({"query": "revenue guidance", "ticker": "AAPL", "date_from": "2024-01-01"}))
    assert out.startswith('1 result for "revenue guidance"')
    assert "1. [#aapl-1] Apple cuts revenue guidance" in out
    assert "source: reuters | date: 2024-02-01 | ticker: AAPL" in out
    wide = await tool.run({"query": "revenue"})
    assert len(wide) <= 1500
    assert wide.count("[#") >= 3


async def test_bad_arguments_empty_results_and_documents_read_as_plain_sentences(tool: SearchTool) -> None:
    assert "query is empty" in await tool.run({"query": ""})
    assert "query is empty" in await tool.run({"query": "   "})
    assert "'window' is not an argument" in await tool.run({"query": "x", "window": 500})
    assert "not valid JSON" in await tool.run("{query:")
    assert "No matches" in await tool.run({"query": "revenue", "ticker": "NOPE"})
    doc = await tool.get_document({"id": "#aapl-1"})
    assert doc.startswith("[#aapl-1] Apple cuts revenue guidance\nsource: reuters")
    assert "No document with id 'nope'" in await tool.get_document('{"id": "nope"}')


async def test_a_degraded_search_is_said_in_one_line(client: SearchClient, settings: SearchSettings) -> None:
    await client.ensure_index()
    await client.index_documents(DOCS, refresh=True)
    dead = OpenAIEmbedder(model="m", dimensions=64, base_url="http://127.0.0.1:9/v1", api_key="k", timeout_s=1)
    async with SearchClient(client.elasticsearch, dead, settings, owns_clients=False) as c:
        out = await SearchTool(c).run({"query": "revenue guidance"})
    await dead.aclose()
    assert "Note: partial results — semantic search was unavailable (connection_error)." in out
    assert "[#aapl-1]" in out


async def test_a_dead_cluster_becomes_an_actionable_message(es_url: str) -> None:
    settings = SearchSettings(url="http://127.0.0.1:9", index="x", breaker_fail_max=1, retry_attempts=1)
    async with SearchClient.from_settings(settings, embedder=_hashing()) as c:  # type: ignore[arg-type]
        first = await SearchTool(c).run({"query": "revenue"})
        second = await SearchTool(c).run({"query": "revenue"})
    assert first.startswith("Search failed")
    assert "temporarily unavailable" in second
    assert "about 30 seconds" in second


def _hashing() -> object:
    from embeddings import HashingEmbedder

    return HashingEmbedder(dimensions=64)


async def test_the_mcp_server_answers_a_real_mcp_client_session(tool: SearchTool, settings: SearchSettings) -> None:
    env = {
        "ES_URL": settings.url or "",
        "ES_INDEX": settings.index,
        "EMBEDDINGS_PROVIDER": "hashing",
        "EMBEDDINGS_DIMENSIONS": "64",
        "PATH": os.environ.get("PATH", ""),
    }
    params = StdioServerParameters(command=sys.executable, args=["-m", "storage.mcp_server"], env=env)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert set(tools) == {"search", "get_document", "answer"}
        assert tools["search"].input_schema["required"] == ["query"]
        result = await session.call_tool("search", {"query": "revenue guidance", "ticker": "AAPL"})
        text = result.content[0].text  # type: ignore[union-attr]
        assert "[#aapl-1]" in text
        assert not result.is_error
        doc = await session.call_tool("get_document", {"id": "aapl-1"})
        assert "iPhone demand" in doc.content[0].text  # type: ignore[union-attr]
        empty = await session.call_tool("search", {"query": ""})
        assert "query is empty" in empty.content[0].text  # type: ignore[union-attr]
        no_llm = await session.call_tool("answer", {"question": "Why did Apple cut guidance?"})
        assert "not set up" in no_llm.content[0].text  # type: ignore[union-attr]


@pytest.mark.slow
async def test_the_mcp_answer_tool_answers_from_the_documents_with_sources(
    tool: SearchTool, settings: SearchSettings, chat_server: ChatServer
) -> None:
    env = {
        "ES_URL": settings.url or "",
        "ES_INDEX": settings.index,
        "EMBEDDINGS_PROVIDER": "hashing",
        "EMBEDDINGS_DIMENSIONS": "64",
        "LLM_PROVIDER": "openai",
        "LLM_BASE_URL": chat_server.base_url,
        "LLM_MODEL": chat_server.model,
        "LLM_MAX_TOKENS": "64",
        "PATH": os.environ.get("PATH", ""),
    }
    params = StdioServerParameters(command=sys.executable, args=["-m", "storage.mcp_server"], env=env)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        result = await session.call_tool("answer", {"question": "Why did Apple cut its revenue guidance?"})
        text = result.content[0].text  # type: ignore[union-attr]
        assert not result.is_error
        assert "Sources:" in text
        assert "[#" in text.split("Sources:")[1]  # cited entries, or all of them when the model cited none
