"""The agent tool and the MCP server against the real Elasticsearch."""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from embeddings import LocalEmbedder, OpenAIChat, OpenAIEmbedder
from storage import ConfigurationError, ContextTooLong, Document, SearchClient, SearchSettings
from storage.agent import SearchTool

from .._scripted import ScriptedServer, chat_body, chat_chunks

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
    assert set(params["properties"]) == {
        "query",
        "limit",
        "facets",
        "one_per",
        "ticker",
        "date_from",
        "date_to",
    }  # no fusion
    assert params["properties"]["date_from"]["format"] == "date"
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


def _hashing_env(settings: SearchSettings, **extra: str) -> dict[str, str]:
    env = {
        "ES_URL": settings.url or "",
        "ES_INDEX": settings.index,
        "EMBEDDINGS_PROVIDER": "hashing",
        "EMBEDDINGS_DIMENSIONS": "64",
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/tmp"),
    }
    return {k: v for k, v in {**env, **extra}.items() if v}


def _text(result: object) -> str:
    content = result.content  # type: ignore[attr-defined]
    assert len(content) == 1  # the text once
    return str(content[0].text)


@asynccontextmanager
async def _mcp(env: dict[str, str], *args: str) -> AsyncIterator[ClientSession]:
    """A real MCP client session over stdio with ``hybrid-search [args]`` (default: ``mcp``)."""
    argv = ["-m", "storage.cli", *(args or ("mcp",))]
    params = StdioServerParameters(command=sys.executable, args=argv, env=env)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def test_the_mcp_server_serves_the_tool_contract_to_a_real_mcp_client(
    tool: SearchTool, settings: SearchSettings
) -> None:
    async with _mcp(_hashing_env(settings)) as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert set(tools) == {"search", "get_document"}  # answer: listed only with a chat model (LLM_*)
        search = tools["search"].input_schema
        assert search["required"] == ["query"]
        assert search["additionalProperties"] is False
        query, limit = search["properties"]["query"], search["properties"]["limit"]
        assert query["description"]
        assert (query["minLength"], query["maxLength"]) == (1, 500)
        assert limit["description"]
        assert (limit["minimum"], limit["maximum"], limit["default"]) == (1, 20, 5)
        assert {"ticker", "doc_type", "source", "date_from", "date_to"} <= set(search["properties"])
        assert tools["get_document"].input_schema["properties"]["id"]["description"]
        # Optional arguments have one type (clients convert values by it), never anyOf [..., null].
        assert search["properties"]["facets"]["type"] == "array"
        assert search["properties"]["one_per"]["type"] == "string"
        assert search["properties"]["date_from"]["type"] == "string"
        assert all("anyOf" not in prop for prop in search["properties"].values())

        found = await session.call_tool("search", {"query": "revenue guidance", "ticker": "AAPL"})
        assert not found.is_error
        assert found.structured_content is None  # no second copy of the text
        assert "[#aapl-1]" in _text(found)
        doc = await session.call_tool("get_document", {"id": "aapl-1"})
        assert "iPhone demand" in _text(doc)

        # Arguments that do not fit: one sentence, flagged as an error, nothing searched on a guess.
        extra = await session.call_tool("search", {"query": "x", "limit": 20, "sector": "tech"})
        assert extra.is_error
        assert _text(extra).startswith("Error: 'sector' is not an argument of this tool")
        assert "\n" not in _text(extra)
        wrong_type = await session.call_tool("search", {"query": 5})
        assert wrong_type.is_error
        assert _text(wrong_type) == "Error: query must be text. Fix the arguments and call the tool again."
        too_many = await session.call_tool("search", {"query": "revenue", "limit": 21})
        assert "limit must be at most 20" in _text(too_many)
        empty = await session.call_tool("search", {"query": ""})
        assert "query is empty" in _text(empty)
        # Validated against the advertised schema, without coercion.
        for wrong in ("3", True, 2.5):
            refused = await session.call_tool("search", {"query": "revenue", "limit": wrong})
            assert refused.is_error, wrong
            assert "limit must be a whole number" in _text(refused)
        as_text = await session.call_tool("search", {"query": "revenue", "facets": "ticker"})
        assert "facets must be a list" in _text(as_text)
        faceted = await session.call_tool("search", {"query": "revenue", "facets": ["ticker"]})
        assert not faceted.is_error

        # limit=20: the header counts what is shown, and says when the rest did not fit.
        twenty = _text(await session.call_tool("search", {"query": "revenue", "limit": 20}))
        shown = twenty.count("\n   relevance") + twenty.count(" | relevance")
        assert len(twenty) <= 4000
        assert twenty.startswith(f"Showing {shown} of ") or twenty.startswith(f"{shown} results")

        no_llm = await session.call_tool("answer", {"question": "Why did Apple cut guidance?"})
        assert no_llm.is_error
        assert _text(no_llm).startswith("Error: there is no tool named 'answer'; the tools are search, get_document")


async def test_the_mcp_server_says_its_version_and_serves_a_startup_error_to_the_client(
    settings: SearchSettings,
) -> None:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "storage.cli", "mcp"], env=_hashing_env(settings)
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
    assert init.server_info.name == "hybrid-search"
    assert init.server_info.version == importlib.metadata.version("hybrid-search-es")
    # A bad option: the handshake still completes, and the client reads why (not just "Connection closed").
    async with _mcp(_hashing_env(settings), "mcp", "--limit", "0") as session:
        assert {t.name for t in (await session.list_tools()).tools} >= {"search"}
        result = await session.call_tool("search", {"query": "revenue"})
    assert result.is_error
    assert _text(result).startswith("Search is not set up on this server: invalid tool settings: limit:")


#: The MCP Inspector's command line (npm), the version Node 20 resolves; installed once per checkout.
INSPECTOR = "@modelcontextprotocol/inspector@0.15.0"
INSPECTOR_DIR = Path(__file__).resolve().parents[2] / ".cache" / "mcp-inspector"


def _inspector() -> Path:
    cli = INSPECTOR_DIR / "node_modules" / ".bin" / "mcp-inspector"
    if not cli.exists():
        npm = shutil.which("npm")
        assert npm is not None, "the MCP Inspector test needs Node.js and npm (apt install nodejs npm)"
        INSPECTOR_DIR.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [npm, "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(INSPECTOR_DIR), INSPECTOR],
            check=True,
            capture_output=True,
            timeout=600,
        )
    return cli


def test_the_mcp_inspector_cli_sends_arguments_the_schema_lets_it_convert(
    tool: SearchTool, settings: SearchSettings
) -> None:
    """The Inspector converts --tool-arg values by each property's top-level type: with one type per
    optional argument (no anyOf with null), an array arrives as an array; a wrong type is refused, not coerced;
    a bad server option reaches it as a readable error."""
    cli = str(_inspector())
    server = [sys.executable, "-m", "storage.cli", "mcp"]

    def call(*args: str, server_args: tuple[str, ...] = ()) -> dict[str, Any]:
        done = subprocess.run(
            [cli, "--cli", *server, *server_args, "--method", "tools/call", "--tool-name", "search", *args],
            env=_hashing_env(settings),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return cast(dict[str, Any], json.loads(done.stdout))

    args = ("--tool-arg", "query=revenue guidance", "--tool-arg", "limit=2", "--tool-arg", 'facets=["ticker"]')
    found = call(*args)
    assert not found["isError"]
    assert "Counts over all matches — ticker:" in found["content"][0]["text"]
    wrong = call("--tool-arg", "query=revenue", "--tool-arg", "limit=abc")
    assert wrong["isError"]
    assert (
        wrong["content"][0]["text"] == "Error: limit must be a whole number. Fix the arguments and call the tool again."
    )
    bad_option = call("--tool-arg", "query=revenue", server_args=("--limit", "0"))
    assert bad_option["isError"]
    assert bad_option["content"][0]["text"].startswith("Search is not set up on this server: invalid tool settings")


async def test_the_mcp_command_honours_index_url_and_the_tool_policy_from_the_command_line(
    tool: SearchTool, settings: SearchSettings
) -> None:
    env = _hashing_env(settings, ES_URL="", ES_INDEX="not-this-index", TOOL_LIMIT="2")
    args = ("--url", settings.url or "", "--index", settings.index, "mcp", "--limit", "3", "--max-chars", "1200")
    async with _mcp(env, *args) as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert tools["search"].input_schema["properties"]["limit"]["default"] == 3
        text = _text(await session.call_tool("search", {"query": "revenue"}))
        assert len(re.findall(r"^\d+\. \[#", text, flags=re.MULTILINE)) == 3
        assert len(text) <= 1200


async def test_an_mcp_server_started_without_es_url_tells_the_client_what_to_set() -> None:
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp")}
    async with _mcp(env | {"EMBEDDINGS_PROVIDER": "hashing", "EMBEDDINGS_DIMENSIONS": "64"}) as session:
        assert len((await session.list_tools()).tools) == 3
        result = await session.call_tool("search", {"query": "revenue"})
    assert result.is_error
    text = _text(result)
    assert text.startswith("Search is not set up on this server: No Elasticsearch configured: set ES_URL")
    assert "python -m storage.local_es start" in text


def test_a_host_mistake_stops_the_mcp_command_at_start_with_the_reason() -> None:
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp")}
    for args, said in (
        (["mcp", "--limit", "100000"], "limit: Input should be less than or equal to 50"),
        (["mcp", "--mode", "semantic"], "mode must be one of bm25, knn, hybrid, not 'semantic'"),
        (["mcp", "--filters", "ticker,sector"], "unknown filters ['sector']"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "storage.cli", *args],
            env=env,
            stdin=subprocess.DEVNULL,  # no host: the server it still starts (to say why) ends at once
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2, done.stderr
        assert said in done.stderr
        assert "Traceback" not in done.stderr


async def test_a_host_mistake_is_a_configuration_error_when_the_tool_is_built(client: SearchClient) -> None:
    with pytest.raises(ConfigurationError, match="mode must be one of bm25, knn, hybrid, not 'semantic'"):
        SearchTool(client, mode="semantic")
    with pytest.raises(ConfigurationError, match="limit"):
        SearchTool(client, limit=100000)
    with pytest.raises(ConfigurationError, match=r"limit \(30\) is above max_limit \(20\)"):
        SearchTool(client, limit=30)


async def test_nonsense_gets_no_matches_below_the_similarity_floor(tool: SearchTool, client: SearchClient) -> None:
    nearest = await client.search("zzqxj flurbo", mode="knn")
    assert nearest.hits  # nonsense has nearest neighbours
    floored = SearchTool(client, min_similarity=max(h.leg_scores["knn"] for h in nearest.hits) + 0.01)
    assert (await floored.run({"query": "zzqxj flurbo"})).startswith('No matches for "zzqxj flurbo"')
    assert "[#aapl-1]" in await floored.run({"query": "revenue guidance"})  # keyword hits always stay
    unfloored = SearchTool(client, min_similarity=0)
    assert "[#" in await unfloored.run({"query": "zzqxj flurbo"})  # nearest neighbours of nonsense


async def test_the_default_model_s_floor_hides_nonsense_and_keeps_a_semantic_match(
    settings: SearchSettings,
) -> None:
    embedder = LocalEmbedder()
    assert embedder.similarity_floor > 0.5
    async with SearchClient.from_settings(settings, embedder=embedder) as client:
        await client.ensure_index()
        assert (await client.index_documents(DOCS[:2], refresh=True)).ok
        tool = SearchTool(client)
        assert tool.min_similarity == embedder.similarity_floor
        for nonsense in ("zzqxj flurbo", "qwpoeiru"):
            assert (await tool.run({"query": nonsense})).startswith("No matches")
        meaning = await tool.run({"query": "smartphone sales slump hurts forecast"})  # no word in common
        assert "[#aapl-1]" in meaning
        assert "keyword #" not in meaning.split("[#aapl-1]")[1].split("\n")[1]


# -- answers, on the scripted OpenAI-compatible server (the real one is proven in test_answer.py) ------------

#: What the scripted server says it is: the local chat server's window.
CONTEXT_TOKENS = 4096


def _chat(server: ScriptedServer, **options: int) -> OpenAIChat:
    return OpenAIChat(
        model="scripted",
        base_url=server.url,
        max_tokens=options.pop("max_tokens", 64),
        context_tokens=options.pop("context_tokens", CONTEXT_TOKENS),
    )


def _answers(server: ScriptedServer, text: str) -> None:
    """Every chat request (whole or streamed) is answered with ``text``."""
    body = json.dumps(chat_body(text)).encode()

    def reply(payload: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        if payload.get("stream"):
            events = "".join(f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n" for e in chat_chunks([text]))
            return 200, {"content-type": "text/event-stream"}, events.encode()
        return 200, {"content-type": "application/json"}, body

    server.default = reply


async def test_an_answer_with_nothing_in_its_context_never_calls_the_model(
    tool: SearchTool, settings: SearchSettings, scripted_server: ScriptedServer
) -> None:
    llm = _chat(scripted_server, max_tokens=256, context_tokens=350)  # the answer's room leaves none for documents
    async with SearchClient.from_settings(settings, embedder=_hashing(), llm=llm) as client:  # type: ignore[arg-type]
        answer = await client.answer("Why did Apple cut its revenue guidance?", limit=20)
        text = await SearchTool(client).answer({"question": "Why did Apple cut its revenue guidance?"})
    assert answer.status == "no_context"
    assert answer.entries == []
    assert answer.context_chars == 0
    assert answer.timings.llm_ms is None  # the model was not asked
    assert answer.usage is None
    assert answer.sources == []
    assert "citing ." not in answer.reasoning
    assert text.startswith("No answer: the documents found did not fit the answering model's context")
    assert "Sources:" not in text
    assert scripted_server.requests == []


async def test_an_uncited_answer_is_flagged_on_every_surface(
    tool: SearchTool, settings: SearchSettings, scripted_server: ScriptedServer
) -> None:
    question = "What is the capital of Mongolia?"  # not in the documents; the model answers it anyway
    _answers(scripted_server, "Ulaanbaatar is the capital of Mongolia.")
    async with SearchClient.from_settings(settings, embedder=_hashing(), llm=_chat(scripted_server)) as client:  # type: ignore[arg-type]
        answer = await client.answer(question, limit=5)
        agent = await SearchTool(client).answer({"question": question})
    # The library's result.
    assert answer.status == "answered"
    assert answer.uncited
    assert answer.sources == []
    assert answer.citations == [e.id for e in answer.entries]  # what it drew on: the whole context
    # The agent tool.
    assert agent.startswith("Uncited answer (not supported by a source): ")
    assert "Sources:" not in agent
    assert "Documents it was given (not cited):" in agent
    # The MCP server.
    env = _hashing_env(
        settings,
        LLM_PROVIDER="openai",
        LLM_BASE_URL=scripted_server.url,
        LLM_MODEL="scripted",
        LLM_MAX_TOKENS="64",
    )
    async with _mcp(env) as session:
        result = await session.call_tool("answer", {"question": question})
    assert not result.is_error
    assert _text(result).startswith("Uncited answer (not supported by a source): ")
    assert "Sources:" not in _text(result)
    # The command line.
    done = await asyncio.to_thread(
        subprocess.run,
        [str(Path(sys.executable).parent / "hybrid-search"), "ask", question, "--limit", "5"],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    assert "uncited: the model cited none of the entries it was given" in done.stdout
    assert "sources:" not in done.stdout


async def test_a_context_beyond_the_model_s_real_window_is_a_typed_error(
    tool: SearchTool, settings: SearchSettings, scripted_server: ScriptedServer
) -> None:
    # The server refuses the prompt as OpenAI-compatible servers do (llama.cpp's, vLLM, OpenAI: HTTP 400).
    refusal = {"error": {"message": "This model's maximum context length is 4096 tokens", "code": 400}}
    scripted_server.default = lambda payload: (400, {"content-type": "application/json"}, json.dumps(refusal).encode())
    llm = _chat(scripted_server, context_tokens=CONTEXT_TOKENS * 8)  # claims a window it does not have
    long_docs = [
        Document(id=f"long-{i}", title=f"Revenue report {i}", text=f"revenue grew in region {i}. " * 300)
        for i in range(12)
    ]
    roomy = settings.model_copy(update={"answer_context_chars": 100_000})
    async with SearchClient.from_settings(roomy, embedder=_hashing(), llm=llm) as client:  # type: ignore[arg-type]
        assert (await client.index_documents(long_docs, refresh=True)).ok
        answer = await client.answer("How did revenue grow?", limit=12)
        with pytest.raises(ContextTooLong, match="does not fit its context window"):
            await client.answer("How did revenue grow?", limit=12, strict=True)
        text = await SearchTool(client, limit=12).answer({"question": "How did revenue grow?"})
    assert answer.status == "llm_failed"
    assert answer.degradation.reason == "llm_context_too_long"
    assert "LLM_CONTEXT_TOKENS" in (answer.error or "")
    assert text.startswith("No answer: the answering model failed (llm_context_too_long)")
