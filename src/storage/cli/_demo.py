"""``hybrid-search demo``: the main job on a fresh machine (``ES_URL`` if set, else a local Elasticsearch
fetched from Maven Central; index a small corpus, search, stop what it started)."""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import date
from typing import Annotated

import typer

from embeddings import create_embedder

from .._errors import SearchError
from .._settings import SearchSettings
from .._types.models import Document
from ._app import app, err, state
from ._read import print_response

DEMO_CORPUS: tuple[Document, ...] = (
    Document(
        id="demo-aapl-guidance",
        title="Apple trims revenue guidance",
        text="Apple lowered its revenue outlook for the quarter, citing weaker iPhone demand in China.",
        ticker="AAPL",
        doc_type="news",
        published_at=date(2024, 2, 1),
    ),
    Document(
        id="demo-msft-cloud",
        title="Microsoft cloud sales accelerate",
        text="Azure revenue grew thirty percent as enterprises moved workloads to the cloud.",
        ticker="MSFT",
        doc_type="news",
        published_at=date(2024, 4, 25),
    ),
    Document(
        id="demo-tsla-deliveries",
        title="Tesla deliveries miss estimates",
        text="The carmaker delivered fewer vehicles than analysts expected and warned of slower growth.",
        ticker="TSLA",
        doc_type="news",
        published_at=date(2024, 4, 2),
    ),
    Document(
        id="demo-nvda-datacenter",
        title="Nvidia data-center demand",
        text="Orders for AI accelerators kept the data-center segment supply constrained.",
        ticker="NVDA",
        doc_type="news",
        published_at=date(2024, 5, 22),
    ),
    Document(
        id="demo-aapl-10k",
        title="Apple annual report",
        text="Services revenue reached a record while hardware margins held steady over the fiscal year.",
        ticker="AAPL",
        doc_type="filing",
        published_at=date(2023, 11, 3),
    ),
    Document(
        id="demo-weather",
        title="Spring outlook",
        text="Forecasters expect a mild, rainy April across the northern regions.",
        doc_type="blog",
    ),
)

# -- demo ----------------------------------------------------------------------------------------------


async def _demo(url: str, query: str, index: str) -> None:
    from .._client import SearchClient

    settings = SearchSettings(url=url, index=index)
    started = time.perf_counter()
    async with SearchClient.from_settings(settings, embedder=create_embedder()) as client:
        await client.ensure_index()
        try:
            report = await client.index_documents(DEMO_CORPUS, refresh=True)
            print(f"indexed {len(report.indexed)} documents into {report.index} in {report.seconds:.2f} s")
            print_response(await client.search(query, mode="hybrid", limit=5))
            print()
            print("the same query, filtered to ticker=MSFT (one filter model for both legs):")
            print_response(await client.search(query, mode="hybrid", filters={"ticker": "MSFT"}, limit=5))
        finally:
            await client.indices.delete()
    print(f"done in {time.perf_counter() - started:.1f} s")


def _with_elasticsearch(run: Callable[[str], Awaitable[None]]) -> int:
    from ..local_es import LocalElasticsearch, LocalElasticsearchError

    url = state["url"] or os.environ.get("ES_URL")
    if url:
        print(f"using ES_URL={url}")
        asyncio.run(_as_coro(run(url)))
        return 0
    node = LocalElasticsearch(name=f"demo-{os.getpid()}", ephemeral=True)
    fetched = (node.home / "bin" / "elasticsearch").exists() or node.zip_path.exists()
    first = "" if fetched else " (the first run downloads it: ~110 MB)"
    print(f"ES_URL not set: starting a local Elasticsearch {node.version}{first}...")
    t0 = time.perf_counter()
    try:
        url = node.start()
    except LocalElasticsearchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"Elasticsearch ready at {url} after {time.perf_counter() - t0:.1f} s")
    try:
        asyncio.run(_as_coro(run(url)))
    finally:
        node.stop()
        print("stopped the local Elasticsearch")
    return 0


async def _as_coro(aw: Awaitable[None]) -> None:
    await aw


@app.command()
def demo(query: Annotated[str, typer.Argument(help="The query to run.")] = "revenue guidance cut") -> None:
    """Index a small corpus and run a hybrid search (starts a local Elasticsearch if ES_URL is unset)."""
    index = f"demo-{uuid.uuid4().hex[:8]}"
    try:
        code = _with_elasticsearch(lambda url: _demo(url, query, index))
    except SearchError as exc:
        err.print(f"error ({type(exc).__name__}): {exc}", markup=False)
        raise typer.Exit(2) from None
    raise typer.Exit(code)
