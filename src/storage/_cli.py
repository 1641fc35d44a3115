"""``hybrid-search``: the command line.

``hybrid-search demo`` is the main job on a fresh machine: use ``ES_URL`` if set, else start a local
Elasticsearch (fetched from Maven Central on first use); create an index, index a small corpus this module
writes itself, run a hybrid search, print the hits, and stop what it started.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
import uuid
from collections.abc import Callable, Coroutine, Sequence
from datetime import date
from typing import Any, TextIO

from embeddings import create_embedder

from ._errors import SearchError
from ._models import Document, SearchResponse
from ._settings import SearchSettings

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


def print_response(res: SearchResponse, out: TextIO | None = None) -> None:
    stream = out if out is not None else sys.stdout
    legs = ", ".join(
        f"{leg}: {r.hits} hits in {r.latency_ms:.0f} ms" + ("" if r.ok else f" FAILED ({r.reason})")
        for leg, r in res.legs.items()
    )
    print(f'query "{res.query}" ({res.mode}; {legs}; overlap {res.overlap})', file=stream)
    if res.degraded:
        print(f"  degraded: {res.legs_failed} failed ({res.degraded_reason})", file=stream)
    for n, hit in enumerate(res.hits, start=1):
        ranks = " ".join(f"{leg}#{rank}" for leg, rank in sorted(hit.ranks.items()))
        print(f"{n:>2}. {hit.normalized_score:.3f}  {hit.id:<22} [{ranks}]  {hit.title}", file=stream)


async def _demo(url: str, query: str, index: str) -> None:
    from ._client import SearchClient

    settings = SearchSettings(url=url, index=index)
    started = time.perf_counter()
    async with SearchClient.from_settings(settings, embedder=create_embedder()) as client:
        await client.ensure_index()
        try:
            report = await client.index_documents(DEMO_CORPUS, refresh=True)
            print(f"indexed {len(report.indexed)} documents into {report.index} in {report.seconds:.2f} s")
            print_response(await client.search(query, mode="hybrid", limit=5))
            print()
            print_response(await client.search(query, mode="hybrid", filters={"ticker": "MSFT"}, limit=5))
        finally:
            await client.delete_index()
    print(f"done in {time.perf_counter() - started:.1f} s")


def _with_elasticsearch(run: Callable[[str], Coroutine[Any, Any, None]]) -> int:
    from .local_es import LocalElasticsearch, LocalElasticsearchError

    url = os.environ.get("ES_URL")
    if url:
        print(f"using ES_URL={url}")
        asyncio.run(run(url))
        return 0
    node = LocalElasticsearch(name=f"demo-{os.getpid()}", ephemeral=True)
    print(f"ES_URL not set: starting a local Elasticsearch {node.version} (first run downloads ~110 MB)...")
    t0 = time.perf_counter()
    try:
        url = node.start()
    except LocalElasticsearchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"Elasticsearch ready at {url} after {time.perf_counter() - t0:.1f} s")
    try:
        asyncio.run(run(url))
    finally:
        node.stop()
        print("stopped the local Elasticsearch")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hybrid-search", description="Hybrid search over Elasticsearch.")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="index a small corpus and run a hybrid search (starts ES if needed)")
    demo.add_argument("query", nargs="?", default="revenue guidance cut")
    args = parser.parse_args(argv)
    try:
        if args.command == "demo":
            index = f"demo-{uuid.uuid4().hex[:8]}"
            return _with_elasticsearch(lambda url: _demo(url, args.query, index))
    except SearchError as exc:
        print(f"error ({type(exc).__name__}): {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
