"""What an agent pays per search: characters per result, at limit 5 and 20, on every agent surface.

Every surface serves the same tool contract (storage.agent), so their texts should be the same size; this
checks it and gives the figures. On a given collection (default SciFact; the hashing embedder, since the
texts do not depend on the model) and its first ``--queries`` judged queries:

- ``SearchTool.run`` (the agent tool, OpenAI ``tools`` format);
- the MCP server's ``search`` over the real ``mcp`` client (stdio): the text, and the whole tool result as
  JSON on the wire (what the host relays);
- LangChain: ``agent_tools`` (the contract as LangChain tools) and, for comparison, LangChain's own
  ``create_retriever_tool`` over our retriever (documents' text joined: no budget, no citation ids).

Prints mean characters per call and per result shown; JSON to bench/results/agent_cost.json.

    .venv/bin/python bench/agent_cost.py [--beir DIR] [--queries 50]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

from langchain_core.tools import create_retriever_tool
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from embeddings import HashingEmbedder
from storage import SearchClient, SearchSettings
from storage.agent import SearchTool
from storage.evaluation import load_beir
from storage.integrations.langchain import HybridSearchRetriever, agent_tools
from storage.local_es import url_or_local

ROOT = Path(__file__).resolve().parents[1]
SCIFACT = ROOT.parent / "shared" / "data" / "beir" / "scifact"
LIMITS = (5, 20)


def shown(text: str) -> int:
    """Results in a tool text (each starts a line with ``N. [#``)."""
    return sum(1 for line in text.splitlines() if line[:1].isdigit() and ". [#" in line[:8])


def summary(texts: list[str], wire: list[int] | None = None) -> dict[str, Any]:
    chars = [len(t) for t in texts]
    results = [max(shown(t), 1) for t in texts]
    row = {
        "chars_per_call": round(statistics.fmean(chars)),
        "results_shown": round(statistics.fmean(results), 1),
        "chars_per_result": round(statistics.fmean(c / r for c, r in zip(chars, results, strict=True))),
    }
    if wire is not None:
        row["wire_bytes_per_call"] = round(statistics.fmean(wire))
    return row


async def measure(url: str, folder: Path, queries: int) -> dict[str, Any]:
    data = load_beir(folder)
    settings = SearchSettings(url=url, index=f"bench-agent-{folder.name.lower()}", bulk_chunk_size=200)
    texts = [data.queries[q] for q in sorted(data.qrels) if q in data.queries][:queries]
    out: dict[str, Any] = {"set": data.name, "queries": len(texts)}
    async with SearchClient.from_settings(settings, embedder=HashingEmbedder(dimensions=64)) as client:
        await client.indices.delete()
        await client.ensure_index()
        assert (await client.index_documents(data.documents, refresh=True)).ok
        # One segment: approximate kNN ranks then repeat exactly (merges running between calls reorder them).
        await client.elasticsearch.indices.forcemerge(index=settings.index, max_num_segments=1)
        await client.elasticsearch.indices.refresh(index=settings.index)
        for limit in LIMITS:
            tool = SearchTool(client, limit=limit)
            lc_search = next(t for t in agent_tools(tool) if t.name == tool.name)
            retriever_tool = create_retriever_tool(
                HybridSearchRetriever(client=client, limit=limit), "search", "Search the documents."
            )
            agent = [await tool.run({"query": q}) for q in texts]
            lc = [str(await lc_search.ainvoke({"query": q})) for q in texts]
            rt = [str(await retriever_tool.ainvoke({"query": q})) for q in texts]
            out[f"limit_{limit}"] = {
                "agent_tool": summary(agent),
                "langchain_agent_tools": summary(lc),
                "langchain_retriever_tool": {**summary(rt), "results_shown": limit},
                "same_text_everywhere": agent == lc,
            }
            out[f"limit_{limit}"]["langchain_retriever_tool"]["chars_per_result"] = round(
                statistics.fmean(len(t) for t in rt) / limit
            )
        env = {
            "ES_URL": url,
            "ES_INDEX": settings.index,
            "EMBEDDINGS_PROVIDER": "hashing",
            "EMBEDDINGS_DIMENSIONS": "64",
            "PATH": os.environ.get("PATH", ""),
        }
        for limit in LIMITS:
            params = StdioServerParameters(
                command=sys.executable, args=["-m", "storage.cli", "mcp", "--limit", str(limit)], env=env
            )
            mcp_texts, wire = [], []
            async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                for q in texts:
                    result = await session.call_tool("search", {"query": q})
                    mcp_texts.append("".join(getattr(c, "text", "") for c in result.content))
                    wire.append(len(result.model_dump_json(by_alias=True, exclude_none=True)))
            out[f"limit_{limit}"]["mcp"] = summary(mcp_texts, wire)
        await client.indices.delete()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--beir", type=Path, default=SCIFACT)
    parser.add_argument("--queries", type=int, default=50)
    args = parser.parse_args()
    with url_or_local("bench-agent", heap="1g") as url:
        result = asyncio.run(measure(url, args.beir, args.queries))
    print(f"{result['set']}: {result['queries']} queries; characters per call / per result shown (results shown)")
    for limit in LIMITS:
        print(f"  limit {limit}:")
        for surface, row in result[f"limit_{limit}"].items():
            if isinstance(row, dict):
                wire = f", {row['wire_bytes_per_call']} bytes on the wire" if "wire_bytes_per_call" in row else ""
                print(
                    f"    {surface:26} {row['chars_per_call']:6} / {row['chars_per_result']:5} "
                    f"({row['results_shown']}){wire}"
                )
        print(f"    same text on every contract surface: {result[f'limit_{limit}']['same_text_everywhere']}")
    out = ROOT / "bench" / "results" / "agent_cost.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
