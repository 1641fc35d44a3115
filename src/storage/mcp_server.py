"""An MCP server (stdio) exposing ``search``, ``get_document`` and ``answer`` over the configured index.

Run it as ``hybrid-search mcp`` (or ``python -m storage.mcp_server``); it reads the same environment as
:meth:`SearchClient.from_settings` (``ES_URL``, ``ES_INDEX``, ``EMBEDDINGS_*``; ``LLM_*`` for ``answer``,
which says it is not set up when no chat model is configured). Needs the ``mcp`` extra.
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
from ._errors import ConfigurationError, SearchError
from .agent import SearchTool, error_message, format_answer

__all__ = ["create_server", "main"]


def create_server(limit: int = 5) -> MCPServer[Any]:
    """The server; its lifespan opens one :class:`SearchClient` and closes it on shutdown."""
    state: dict[str, Any] = {}

    @asynccontextmanager
    async def lifespan(_: MCPServer[Any]) -> AsyncIterator[dict[str, Any]]:
        async with SearchClient.from_settings() as client:
            state["client"] = client
            state["tool"] = SearchTool(client, allowed_filters=("ticker", "doc_type", "date"), limit=limit)
            yield {}

    server: MCPServer[Any] = MCPServer(
        "hybrid-search",
        instructions=(
            "Search a document collection (keyword + semantic). Cite results as [#id]; read a full document "
            "with get_document(id); answer(question) answers from the documents with its sources."
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
        tool: SearchTool = state["tool"]
        return await tool.run({k: v for k, v in args.items() if v is not None})

    @server.tool(name="get_document", description="Read one document in full by the id a result cited as [#id].")
    async def get_document(id: str) -> str:
        tool: SearchTool = state["tool"]
        return await tool.get_document({"id": id})

    @server.tool(
        name="answer",
        description=(
            "Answer a question from the documents only, with the [#id] sources it is based on. Says so when the "
            "documents do not contain the answer."
        ),
    )
    async def answer(
        question: str,
        ticker: str | None = None,
        doc_type: str | None = None,
        date_from: date | None = None,
        date_to: date | None = None,
    ) -> str:
        client: SearchClient = state["client"]
        filters: dict[str, Any] = {k: v for k, v in (("ticker", ticker), ("doc_type", doc_type)) if v}
        dates = {op: d.isoformat() for op, d in (("gte", date_from), ("lte", date_to)) if d is not None}
        if dates:
            filters["published_at"] = dates
        if client.llm is None:
            return "Answering is not set up on this server (no chat model configured). Use search instead."
        if not question.strip():
            return "Error: the question is empty. Call the tool again with the question to answer."
        try:
            result = await client.answer(question, filters=filters or None, limit=limit)
        except ConfigurationError as exc:
            return f"Answering is not available: {str(exc).splitlines()[0]}"
        except SearchError as exc:
            return error_message(exc, retry_after_s=client.settings.breaker_reset_s)
        return format_answer(result)

    return server


def main() -> None:
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    create_server().run("stdio")


if __name__ == "__main__":
    main()
