"""Long documents through the product: an index read in passages against one with a vector per document
(its head), on a long collection (bench/long_documents.py) and the given ones — quality, the answer's
context, and what passages cost.

For each collection and layout (``passages``: the defaults; ``head``: ``ES_PASSAGES=false``), in a process
of its own (so its peak RSS is its own):

- ingest every document (the local model; vectors cached in .cache/embeddings, so only a cold run embeds):
  documents/s of the first, cold, ingest, passages per document, the index's size on disk, peak RSS;
- nDCG@10 of BM25, kNN and hybrid (storage.evaluation.evaluate: the product's legs, fused as a search does);
- the answer's context (default budget, ``answer_limit`` hits): the share of judged queries whose context
  holds the opening of a relevant section (a long report: one of its abstracts), with the context built
  from the hits' best passages and, for the same hits, from their text's head (today's context);
- kNN and hybrid p50 over the judged queries (query vectors cached), at 1x and at 10x the collection (the
  documents indexed ten times over with new ids: the same vectors, ten times the index).

    .venv/bin/python bench/passages_product.py [--sets scifact-x10 scifact] [--no-scale]

Starts a local Elasticsearch (1 GiB heap) unless ES_URL is set. Prints a table; JSON in
bench/results/passages_product.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from long_documents import SHARED, SOURCES, long_collection

from embeddings import CachedEmbedder, LocalEmbedder
from storage import Document, SearchClient, SearchSettings
from storage.agent import assemble_context
from storage.evaluation import BeirDataset, evaluate, load_beir
from storage.local_es import url_or_local

ROOT = Path(__file__).resolve().parents[1]
GIVEN = {"scifact": SHARED / "beir" / "scifact", "lisa": SHARED / "ir" / "lisa", "cacm": SHARED / "ir" / "cacm"}
_SPACE = re.compile(r"\s+")


def folder(name: str) -> Path:
    return long_collection(name.removesuffix("-x10")) if name.endswith("-x10") else GIVEN[name]


def openings(name: str) -> dict[str, dict[str, str]]:
    """query -> {section opening: ...} for a long collection: the first 80 characters of each relevant
    abstract, as its report holds it (``title. text``); {} for a given collection (its documents are whole)."""
    if not name.endswith("-x10"):
        return {}
    source = load_beir(SOURCES[name.removesuffix("-x10")])
    by_id = {d.id: d for d in source.documents}
    out: dict[str, dict[str, str]] = {}
    for qid, rels in source.qrels.items():
        for doc_id, grade in rels.items():
            if grade > 0 and doc_id in by_id:
                d = by_id[doc_id]
                section = f"{d.title}. {d.text}".strip() if d.title else d.text
                out.setdefault(qid, {})[doc_id] = _SPACE.sub(" ", section)[:80]
    return out


def p50(values: list[float]) -> float:
    return round(statistics.median(values), 2) if values else 0.0


async def measure(url: str, name: str, layout: str, scale: bool) -> dict[str, Any]:
    data: BeirDataset = load_beir(folder(name))
    cached = CachedEmbedder(LocalEmbedder(), ROOT / ".cache" / "embeddings")
    index = f"bench-passages-{name}-{layout}".lower()
    settings = SearchSettings(url=url, index=index, leg_timeout_s=60, passages=layout == "passages")
    out: dict[str, Any] = {"set": name, "layout": layout, "documents": len(data.documents)}
    async with SearchClient.from_settings(settings, embedder=cached) as client:
        await client.indices.delete()
        await client.ensure_index()
        misses = cached.misses
        report = await client.index_documents(data.documents, refresh=True)
        assert report.ok, report.failed[:3]
        out["ingest_docs_per_s"] = round(len(data.documents) / report.seconds, 2)
        out["embedded_cold"] = cached.misses - misses
        stats = (await client.elasticsearch.indices.stats(index=index, metric="docs,store")).body["_all"]["primaries"]
        out["index_mb"] = round(stats["store"]["size_in_bytes"] / 1e6, 1)
        # The index's document count holds a nested document per passage (the head among them).
        out["vectors_per_document"] = round(stats["docs"]["count"] / len(data.documents) - 1, 2) or 1.0
        scores = await evaluate(client, data)
        out["ndcg"] = {row.mode: row.ndcg_at_10 for row in scores}
        queries = {q: data.queries[q] for q in sorted(data.qrels) if q in data.queries}
        for text in queries.values():
            await cached.embed_query(text)  # cached: latency below is the search's own
        opening = openings(name)
        held = {"passages": 0, "heads": 0}
        latency: dict[str, list[float]] = {"knn": [], "hybrid": []}
        limit = client.settings.answer_limit
        budget = client.settings.answer_context_chars
        for qid, text in queries.items():
            for mode in ("knn", "hybrid"):
                t0 = time.perf_counter()
                res = await client.search(text, mode=mode, limit=limit, highlight=mode == "hybrid")  # type: ignore[arg-type]
                latency[mode].append((time.perf_counter() - t0) * 1000)
            if qid in opening:
                hits = res.hits
                contexts = {
                    "passages": assemble_context(hits, max_context_chars=budget).text,
                    "heads": assemble_context(
                        [h.model_copy(update={"passages": []}) for h in hits], max_context_chars=budget
                    ).text,
                }
                for kind, context in contexts.items():
                    flat = _SPACE.sub(" ", context)
                    held[kind] += any(o in flat for o in opening[qid].values())
        if opening:
            judged = sum(1 for q in queries if q in opening)
            out["context_holds_relevant_section"] = {k: round(v / judged, 4) for k, v in held.items()}
        out["p50_ms_1x"] = {mode: p50(values) for mode, values in latency.items()}
        if scale:
            big = [
                Document.model_validate({**d.model_dump(), "id": f"{d.id}-copy{n}"})
                for n in range(1, 10)
                for d in data.documents
            ]
            await client.index_documents(big, refresh=True)
            latency = {"knn": [], "hybrid": []}
            for text in queries.values():
                for mode in ("knn", "hybrid"):
                    t0 = time.perf_counter()
                    await client.search(text, mode=mode, limit=10, highlight=False)  # type: ignore[arg-type]
                    latency[mode].append((time.perf_counter() - t0) * 1000)
            out["p50_ms_10x"] = {mode: p50(values) for mode, values in latency.items()}
        await client.indices.delete()
    out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", nargs="+", default=["scifact-x10", "lisa-x10", "scifact"])
    parser.add_argument("--layouts", nargs="+", default=["head", "passages"])
    parser.add_argument("--no-scale", action="store_true")
    parser.add_argument("--child", nargs=3, metavar=("URL", "SET", "LAYOUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        url, name, layout = args.child
        print(json.dumps(asyncio.run(measure(url, name, layout, not args.no_scale))))
        return
    results = []
    with url_or_local("bench-passages", heap="1g") as url:
        for name in args.sets:
            for layout in args.layouts:
                cmd = [sys.executable, __file__, "--child", url, name, layout] + (
                    ["--no-scale"] if args.no_scale else []
                )
                done = subprocess.run(cmd, capture_output=True, text=True, check=True)
                row = json.loads(done.stdout.strip().splitlines()[-1])
                print(json.dumps(row), flush=True)
                results.append(row)
    out = ROOT / "bench" / "results" / "passages_product.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
