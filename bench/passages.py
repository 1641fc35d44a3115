"""Which passage setting: exact cosine over every document's head and passages, no index (the model's own
ranking, what the kNN leg approximates), for several passage sizes, on long and on the given collections.

For each collection and passage setting (tokens per passage; overlap a quarter of that), each judged query
ranks the documents three ways — by the **head** (today's single vector: title + text up to the window), by
the best **passage** alone, and by the best of **head and passages** (what the index serves: the head is
one of a document's vectors) — and nDCG@10 is computed with ir-measures. A document that fits the window has
no passages (its head is all of it), so the given collections change only where a document is longer.
Also printed: passages per document and the tokens embedded, relative to the heads alone (the ingest cost).

    .venv/bin/python bench/passages.py [--tokens 128 256 384 510] [--sets scifact-x10 lisa-x10 scifact ...]

Vectors are cached (.cache/embeddings), so a re-run embeds nothing again. Prints a table and writes
bench/results/passages.json.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from long_documents import SHARED, long_collection

from embeddings import CachedEmbedder, LocalEmbedder
from storage.evaluation import BeirDataset, load_beir, measure
from storage.passages import PassageSetting, plan_passages

ROOT = Path(__file__).resolve().parents[1]
GIVEN = {
    "scifact": SHARED / "beir" / "scifact",
    "cacm": SHARED / "ir" / "cacm",
    "lisa": SHARED / "ir" / "lisa",
    "npl": SHARED / "ir" / "npl",
}


def folder(name: str) -> Path:
    if name.endswith("-x10"):
        return long_collection(name.removesuffix("-x10"))
    return GIVEN[name]


def _title_text(title: str, text: str) -> str:
    title, text = title.strip(), text.strip()
    return f"{title}\n{text}" if title and text else title or text


def ranked(scores: np.ndarray[Any, Any], ids: list[str], qids: list[str]) -> dict[str, list[str]]:
    top = np.argsort(-scores, axis=1)[:, :100]
    return {q: [ids[i] for i in row] for q, row in zip(qids, top, strict=True)}


async def evaluate_set(name: str, settings: list[PassageSetting], embedder: CachedEmbedder) -> dict[str, Any]:
    data: BeirDataset = load_beir(folder(name))
    qids = [q for q in sorted(data.qrels) if q in data.queries]
    ids = [d.id for d in data.documents]
    started = time.perf_counter()
    heads = np.asarray(await embedder.embed_documents([d.embedding_text() for d in data.documents]), np.float32)
    queries = np.asarray([await embedder.embed_query(data.queries[q]) for q in qids], np.float32)
    head_scores = queries @ heads.T
    qrels = {q: data.qrels[q] for q in qids}
    text_spans = await embedder.token_spans([d.text for d in data.documents])
    title_spans = await embedder.token_spans([d.title for d in data.documents])
    window, overhead = embedder.window_tokens or 512, embedder.overhead_tokens
    head_tokens = sum(min(len(s) + len(t) + 1 + overhead, window) for s, t in zip(text_spans, title_spans, strict=True))
    out: dict[str, Any] = {
        "set": name,
        "documents": len(ids),
        "queries": len(qids),
        "median_words": int(np.median([len(d.text.split()) for d in data.documents])),
        "head": measure(qrels, ranked(head_scores, ids, qids))[0],
        "settings": [],
    }
    for setting in settings:
        owner: list[int] = []
        texts: list[str] = []
        passage_tokens = 0
        for n, (doc, spans, title) in enumerate(zip(data.documents, text_spans, title_spans, strict=True)):
            plan = plan_passages(
                doc.text, spans, title_tokens=len(title), window=window, overhead=overhead, setting=setting
            )
            starts = [s for s, _ in spans]
            for start, end in plan.passages:
                owner.append(n)
                texts.append(_title_text(doc.title, doc.text[start:end]))
                inside = bisect.bisect_left(starts, end) - bisect.bisect_left(starts, start)
                passage_tokens += min(len(title) + 1 + inside + overhead, window)
        best = np.full_like(head_scores, -np.inf)
        if texts:
            vectors = np.asarray(await embedder.embed_documents(texts), np.float32)
            np.maximum.at(best.T, np.asarray(owner), (queries @ vectors.T).T)
        long_docs = len(set(owner))
        only = np.where(np.isfinite(best), best, head_scores)  # a document without passages: its head
        both = np.maximum(head_scores, best)
        row = {
            "tokens": setting.tokens,
            "overlap": setting.overlap,
            "documents_with_passages": long_docs,
            "passages": len(texts),
            "passages_per_long_document": round(len(texts) / max(long_docs, 1), 2),
            "tokens_embedded_vs_heads": round((head_tokens + passage_tokens) / max(head_tokens, 1), 2),
            "passages_only": measure(qrels, ranked(only, ids, qids))[0],
            "head_and_passages": measure(qrels, ranked(both, ids, qids))[0],
        }
        out["settings"].append(row)
        print(json.dumps({"set": name, **row}), flush=True)
    out["seconds"] = round(time.perf_counter() - started, 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, nargs="+", default=[128, 256, 384, 510])
    parser.add_argument("--sets", nargs="+", default=["scifact-x10", "lisa-x10", "scifact", "lisa", "cacm", "npl"])
    args = parser.parse_args()
    settings = [PassageSetting(tokens=t, overlap=t // 4) for t in args.tokens]
    embedder = CachedEmbedder(LocalEmbedder(), ROOT / ".cache" / "embeddings")

    async def run() -> list[dict[str, Any]]:
        try:
            return [await evaluate_set(name, settings, embedder) for name in args.sets]
        finally:
            await embedder.aclose()

    results = asyncio.run(run())
    out = ROOT / "bench" / "results" / "passages.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(
        "\n| set | median words | head | tokens | long docs | passages / long doc | tokens embedded | passages "
        "| best of head + passages |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        for row in r["settings"]:
            print(
                f"| {r['set']} | {r['median_words']} | {r['head']:.4f} | {row['tokens']} | "
                f"{row['documents_with_passages']} | {row['passages_per_long_document']} | "
                f"{row['tokens_embedded_vs_heads']}x | {row['passages_only']:.4f} | {row['head_and_passages']:.4f} |"
            )


if __name__ == "__main__":
    main()
