"""An MCP server (stdio) exposing ``search`` and ``get_document`` over the configured index.

Run it as ``hybrid-search mcp`` (or ``python -m storage.mcp_server``); it reads the same environment as
:meth:`SearchClient.from_settings` (``ES_URL``, ``ES_INDEX``, ``EMBEDDINGS_*``). Needs the ``mcp`` extra.
An MCP host's configuration, for example::

    {"mcpServers": {"search": {"command": "hybrid-search", "args": ["mcp"],
                               "env": {"ES_URL": "http://127.0.0.1:9200", "ES_INDEX": "documents"}}}}

Tool results are the LLM-ready text of :mod:`storage.agent`; errors are short sentences, never tracebacks.
Logs go to stderr (stdout is the protocol).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import date
from typing import Any

from mcp.server.mcpserver import MCPServer

from ._client import SearchClient
from .agent import SearchTool

__all__ = ["create_server", "main"]


def create_server(limit: int = 5) -> MCPServer[Any]:
    """The server; its lifespan opens one :class:`SearchClient` and closes it on shutdown."""
    state: dict[str, SearchTool] = {}

    @asynccontextmanager
    async def lifespan(_: MCPServer[Any]) -> AsyncIterator[dict[str, Any]]:
        async with SearchClient.from_settings() as client:
            state["tool"] = SearchTool(client, allowed_filters=("ticker", "doc_type", "date"), limit=limit)
            yield {}

    server: MCPServer[Any] = MCPServer(
        "hybrid-search",
        instructions=(
            "Search a document collection (keyword + semantic). Cite results as [#id]; read a full document "
            "with get_document(id)."
        ),
        lifespan=lifespan,
    )

    @server.tool(
        name="search",
        description="Search the documents; returns the best matches as a numbered list with [#id] citations.",
    )
    async def search(
        query: str,
        ticker: str | None = None,
        doc_type: str | None = None,
        date_from: date | None = None,
        date_to: date | None = None,
    ) -> str:
        args = {"query": query, "ticker": ticker, "doc_type": doc_type, "date_from": date_from, "date_to": date_to}
        return await state["tool"].run({k: v for k, v in args.items() if v is not None})

    @server.tool(name="get_document", description="Read one document in full by the id a result cited as [#id].")
    async def get_document(id: str) -> str:
        return await state["tool"].get_document({"id": id})

    return server


def main() -> None:
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    create_server().run("stdio")


if __name__ == "__main__":
    main()
