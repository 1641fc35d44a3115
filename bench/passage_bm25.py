"""Passage-level BM25 against document-level BM25 (issue 42: "try it, keep it only if it measures better").

For each collection, the product's passages-layout index gives the document-level legs (BM25 over the whole
text, kNN by best vector: ``client.retrieve``, window 100). A second, throwaway index holds every document's
head and passages as separate documents of an index without passages (the product's own cuts:
``storage.passages`` with the local model's tokenizer; the document's title, the passage as text), searched
by the product's BM25 leg (``client.retrieve``, mode bm25); a document scores by its best passage (MaxP) or
by the sum of its best three. Then nDCG@10 of each BM25 variant alone and fused with the same kNN list (the
fusion in force). Public API only.

    .venv/bin/python bench/passage_bm25.py [--sets scifact-x10 lisa-x10 scifact cacm lisa]

Starts a local Elasticsearch (1 GiB heap) unless ES_URL is set. Prints a table; JSON in
bench/results/passage_bm25.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

from passages_product import folder

from embeddings import CachedEmbedder, Embedder, LocalEmbedder
from storage import Document, SearchClient, SearchSettings
from storage.evaluation import fuse_top, load_beir, measure
from storage.fusion import LegHit, fuse
from storage.local_es import url_or_local
from storage.passages import PassageSetting, plan_passages

ROOT = Path(__file__).resolve().parents[1]
WINDOW = 100


async def passage_rows(embedder: LocalEmbedder, docs: list[Any]) -> list[Document]:
    """Each document's head and passages as documents ``<id>#<n>`` (the product's cuts)."""
    rows: list[Document] = []
    setting = PassageSetting()
    for start in range(0, len(docs), 64):
        batch = docs[start : start + 64]
        spans = await embedder.token_spans([d.text for d in batch] + [d.title or "" for d in batch])
        for n, d in enumerate(batch):
            plan = plan_passages(
                d.text,
                spans[n],
                title_tokens=len(spans[len(batch) + n]),
                window=embedder.window_tokens,
                overhead=embedder.overhead_tokens,
                setting=setting,
            )
            for p, (s, e) in enumerate(((0, plan.head_end), *plan.passages)):
                rows.append(Document(id=f"{d.id}#{p}", title=d.title or "", text=d.text[s:e]))
    return rows


async def passage_lists(client: SearchClient, queries: dict[str, str]) -> dict[str, dict[str, list]]:
    """query -> {"maxp": ids, "sum3": ids}: documents by their best passage, and by their best three summed."""
    out: dict[str, dict[str, list]] = {}
    for qid, text in queries.items():
        hits = (await client.leg_rankings(text, mode="bm25", window=1000))["bm25"]
        best: dict[str, float] = {}
        top3: dict[str, list[float]] = {}
        for h in hits:
            doc = h.id.rpartition("#")[0]
            best.setdefault(doc, h.score)
            top3.setdefault(doc, [])
            if len(top3[doc]) < 3:
                top3[doc].append(h.score)
        maxp = sorted(best, key=lambda d: -best[d])[:WINDOW]
        sums = {d: sum(v) for d, v in top3.items()}
        sum3 = sorted(sums, key=lambda d: -sums[d])[:WINDOW]
        out[qid] = {"maxp": (maxp, [best[d] for d in maxp]), "sum3": (sum3, [sums[d] for d in sum3])}
        every = sorted(best, key=lambda d: -best[d])
        out[qid]["maxp_all"] = (every, [best[d] for d in every])
    return out


async def measure_set(url: str, name: str) -> dict[str, Any]:
    data = load_beir(folder(name))
    local = LocalEmbedder()
    cached = CachedEmbedder(local, ROOT / ".cache" / "embeddings")
    index = f"bench-pbm25-{name}".lower()
    settings = SearchSettings(url=url, index=index, leg_timeout_s=60, passages=True)
    queries = {q: data.queries[q] for q in sorted(data.qrels) if q in data.queries}
    qrels = {q: data.qrels[q] for q in queries}
    async with SearchClient.from_settings(settings, embedder=cached) as client:
        await client.indices.delete()
        await client.ensure_index()
        assert (await client.index_documents(data.documents, refresh=True)).ok
        setting, _ = await client.indices.fusion_in_force()
        legs: dict[str, dict[str, Any]] = {}
        for qid, text in queries.items():
            found = await client.leg_rankings(text, window=WINDOW)
            legs[qid] = {leg: ([h.id for h in hits], [h.score for h in hits]) for leg, hits in found.items()}
            deep = (await client.leg_rankings(text, mode="bm25", window=1000))["bm25"]
            legs[qid]["bm25_deep"] = ([h.id for h in deep], [h.score for h in deep])
        await client.indices.delete()
    rows = await passage_rows(local, list(data.documents))
    flat = settings.model_copy(update={"index": f"bench-pbm25-passages-{name}".lower(), "passages": False})
    embedder: Embedder = cached  # (a passage's vector is never read here; the cache has most of them)
    async with SearchClient.from_settings(flat, embedder=embedder) as client:
        await client.indices.delete()
        await client.ensure_index()
        report = await client.index_documents(rows, refresh=True)
        assert report.ok, report.failed[:3]
        plists = await passage_lists(client, queries)
        await client.indices.delete()
    out: dict[str, Any] = {"set": name, "documents": len(data.documents), "rows": len(rows)}
    variants = {
        "document": {q: legs[q]["bm25"] for q in queries},
        "maxp": {q: plists[q]["maxp"] for q in queries},
        "sum3": {q: plists[q]["sum3"] for q in queries},
        # A document's whole-text score plus its best passage's (one bool query of both would score so).
        "doc_plus_maxp": {q: _summed(legs[q]["bm25_deep"], plists[q]["maxp_all"]) for q in queries},
    }
    out["knn"] = round(measure(qrels, {q: list(legs[q]["knn"][0][:10]) for q in queries})[0], 4)
    for variant, bm25 in variants.items():
        out[f"bm25_{variant}"] = round(measure(qrels, {q: list(bm25[q][0][:10]) for q in queries})[0], 4)
        fused = {q: fuse_top({"bm25": bm25[q], "knn": legs[q]["knn"]}, setting, 2 * setting.window) for q in queries}
        out[f"hybrid_{variant}"] = round(measure(qrels, fused)[0], 4)
    # Three legs fused (RRF, the default k, equal weights): whole-text BM25, best-passage BM25, kNN.
    three = {
        q: [
            h.id
            for h in fuse(
                {leg: _hits(legs[q][leg]) for leg in ("bm25", "knn")} | {"bm25p": _hits(plists[q]["maxp"])},
                k=setting.k,
            )[: 2 * WINDOW]
        ]
        for q in queries
    }
    out["hybrid_three_legs"] = round(measure(qrels, three)[0], 4)
    return out


def _hits(columns: tuple[list[str], list[float]]) -> list[LegHit]:
    return [LegHit(id=i, score=sc) for i, sc in zip(*columns, strict=True)]


def _summed(doc: tuple[list[str], list[float]], passage: tuple[list[str], list[float]]) -> tuple[list, list]:
    total: dict[str, float] = {}
    for ids, scores in (doc, passage):
        for i, sc in zip(ids, scores, strict=True):
            total[i] = total.get(i, 0.0) + sc
    ranked = sorted(total, key=lambda i: -total[i])[:WINDOW]
    return ranked, [total[i] for i in ranked]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", nargs="+", default=["scifact-x10", "lisa-x10", "scifact", "cacm", "lisa"])
    args = parser.parse_args()
    results = []
    with url_or_local("bench-pbm25", heap="1g") as url:
        for name in args.sets:
            row = asyncio.run(measure_set(url, name))
            print(json.dumps(row), flush=True)
            results.append(row)
    out = ROOT / "bench" / "results" / "passage_bm25.json"
    out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
