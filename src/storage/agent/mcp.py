"""An MCP server (stdio) serving the agent tool contract: ``search``, ``get_document`` and ``answer``.

The tools, their input schemas (descriptions, bounds, no extra fields), the one-sentence refusals and the
result texts are :mod:`storage.agent`'s — the same as :class:`~storage.agent.SearchTool` and the framework
tools serve. Run it as ``hybrid-search [--url URL] [--index INDEX] mcp [--limit N] [--max-chars N] [--mode M]
[--tenant T]`` (or ``python -m storage.agent.mcp``, environment only). It reads the environment of
:meth:`SearchClient.from_settings` (``ES_URL``, ``ES_INDEX``, ``EMBEDDINGS_*``; ``LLM_*`` for ``answer``) and
the host policy from ``TOOL_*`` (:class:`~storage.agent.ToolSettings`); the command line wins. A policy that
does not fit stops the server at start with the reason; a server it cannot reach (or no ``ES_URL``) does not:
the tools are listed and every call answers with what to set up. Needs the ``mcp`` extra. A host's
configuration, for example::

    {"mcpServers": {"search": {"command": "hybrid-search", "args": ["--index", "documents", "mcp"],
                               "env": {"ES_URL": "http://127.0.0.1:9200"}}}}

Logs go to stderr (stdout is the protocol).
"""

from __future__ import annotations

import importlib.metadata
import logging
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server

from .._client import SearchClient
from .._errors import ConfigurationError, SearchError
from .._settings import SearchSettings
from . import SearchTool, ToolPolicy, ToolReply, ToolSettings, tool_specs

__all__ = ["create_server", "main"]

log = logging.getLogger("storage.mcp")

INSTRUCTIONS = (
    "Search a document collection (keyword and semantic search combined) with `search`; cite results as "
    "[#id]. Read a whole document with `get_document`; `answer` answers a question from the documents with "
    "the sources it rests on, and says when it has none."
)


@dataclass(frozen=True)
class _Session:
    """What the server's lifespan opened: the tool, or why there is none (said on every call)."""

    tool: SearchTool | None
    unavailable: str = ""


def create_server(
    policy: ToolPolicy | None = None, settings: SearchSettings | None = None, *, startup_error: str | None = None
) -> Server[_Session]:
    """The server. Its lifespan opens one :class:`SearchClient` (from ``settings``, default the environment)
    and closes it on shutdown; ``policy`` (default ``TOOL_*``) is validated now. ``startup_error``: what
    stopped the server's set-up (a bad option): it still answers the handshake, and every call says it — a
    host shows the reason, never only a closed pipe. ``answer`` is listed only when a chat model is set up
    (``LLM_*``); ``serverInfo.version`` is the package's."""
    policy = policy if policy is not None else ToolPolicy()
    specs = tool_specs(policy)
    tools = {
        spec.name: types.Tool(
            name=spec.name, description=spec.description, input_schema=spec.function()["function"]["parameters"]
        )
        for spec in specs
    }

    @asynccontextmanager
    async def lifespan(_: Server[_Session]) -> AsyncIterator[_Session]:
        if startup_error is not None:
            log.error("the search server could not start: %s", startup_error)
            yield _Session(None, f"Search is not set up on this server: {startup_error}")
            return
        async with AsyncExitStack() as stack:
            try:
                client = SearchClient.from_settings(settings if settings is not None else SearchSettings())
                await stack.enter_async_context(client)
            except (SearchError, ValueError) as exc:  # no ES_URL, bad settings: the server still answers
                reason = str(exc).splitlines()[0]
                log.warning("search is not available: %s", reason)
                yield _Session(None, f"Search is not set up on this server: {reason}")
                return
            yield _Session(SearchTool(client, name=specs[0].name, policy=policy))

    def listed(session: _Session) -> dict[str, types.Tool]:
        if session.tool is not None and session.tool.client.llm is None:  # answer could only say "not set up"
            return {name: tool for name, tool in tools.items() if name != "answer"}
        return tools

    async def list_tools(
        ctx: ServerRequestContext[_Session], __: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=list(listed(ctx.lifespan_context).values()))

    async def call_tool(
        ctx: ServerRequestContext[_Session], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        session = ctx.lifespan_context
        if session.tool is None:
            reply = ToolReply(session.unavailable, True)
        elif params.name not in listed(session):
            names = ", ".join(listed(session))
            reply = ToolReply(f"Error: there is no tool named {params.name!r}; the tools are {names}.", True)
        else:
            reply = await session.tool.call(params.name, params.arguments)
        # The text once: no structured copy of it (an agent would pay for it twice).
        return types.CallToolResult(content=[types.TextContent(type="text", text=reply.text)], is_error=reply.error)

    return Server(
        "hybrid-search",
        version=importlib.metadata.version("hybrid-search-es"),
        instructions=INSTRUCTIONS,
        lifespan=lifespan,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def serve(server: Server[_Session]) -> None:
    """Serve ``server`` over stdio until the host closes it."""
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def main(
    policy: ToolPolicy | None = None, settings: SearchSettings | None = None, *, startup_error: str | None = None
) -> None:
    """Serve over stdio: ``policy`` (default ``TOOL_*``: a bad one is served as ``startup_error``)."""
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    if policy is None and startup_error is None:
        try:
            policy = ToolSettings().policy()
        except ConfigurationError as exc:
            startup_error = str(exc).splitlines()[0]
    anyio.run(serve, create_server(policy, settings, startup_error=startup_error))


if __name__ == "__main__":
    main()
