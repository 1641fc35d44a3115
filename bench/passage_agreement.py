"""How far a long document's passages agree with its head, per collection, and what the kNN leg would gain
from each rule that uses it (issue 64: a document-level decision). Exact cosine in memory (no
Elasticsearch), vectors from the embedding cache (``bench/layouts.py``'s embedder, the product's cuts).

Per long document, **agreement** = (mean cosine of its later passages with its head − the collection's
median head-to-head cosine) / (its first passage's cosine with its head − that median): near 1 when the
passages say what the head says (one topic), near 0 when they are as far from it as another document is.
Prints its deciles and the kNN leg's nDCG@10 for: the head only; the better of head and best passage
(today); passages only for the documents under an agreement threshold; RRF of the head ranking and the
better-of ranking (k 10, depth 100); the best passage minus c·log2(passages) (its many chances discounted).

    .venv/bin/python bench/passage_agreement.py --sets manpages lisa-x10 scifact-x10 scifact
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import math
import statistics
from typing import Any

import numpy as np
from layouts import embedder
from long_legs import folder
from output import each_set, save

from storage._types.models import embedding_text
from storage.evaluation import load_beir
from storage.passages import PassageSetting, plan_passages

Matrix = Any  # numpy arrays


def ndcg10(ranked: list[str], rels: dict[str, int]) -> float:
    dcg = sum(rels.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:10]))
    ideal = sum(g / math.log2(i + 2) for i, g in enumerate(sorted(rels.values(), reverse=True)[:10]))
    return dcg / ideal if ideal else 0.0


def ranks(scores: Matrix) -> Matrix:
    """1-based rank of every document for every query."""
    order = np.argsort(-scores, axis=1)
    out = np.empty_like(order)
    out[np.arange(scores.shape[0])[:, None], order] = np.arange(1, scores.shape[1] + 1)[None, :]
    return out


async def measure_set(name: str) -> dict[str, Any]:
    data = load_beir(folder(name))
    emb = embedder()
    docs = list(data.documents)
    spans = await emb.token_spans([d.text for d in docs] + [d.title for d in docs])
    heads, passages = [], []
    cut = functools.partial(plan_passages, window=emb.window_tokens or 512, overhead=emb.overhead_tokens)
    for n, d in enumerate(docs):
        plan = cut(d.text, spans[n], title_tokens=len(spans[len(docs) + n]), setting=PassageSetting())
        texts = [embedding_text(d.title, d.text)] + [embedding_text(d.title, d.text[s:e]) for s, e in plan.passages]
        vectors = np.array(await emb.embed_documents(texts), dtype=np.float32)
        heads.append(vectors[0])
        passages.append(vectors[1:])
    ids = [d.id for d in docs]
    head = np.stack(heads)
    pick = np.random.default_rng(1)
    a, b = pick.integers(0, len(head), 3000), pick.integers(0, len(head), 3000)
    background = float(np.median((head[a] * head[b]).sum(1)))
    agreement = np.full(len(ids), np.inf)  # inf: a document without later passages
    for i, p in enumerate(passages):
        if len(p) > 1:
            sims = p @ head[i]
            agreement[i] = (sims[1:].mean() - background) / (sims[0] - background)
    qids = [q for q in data.qrels if q in data.queries]
    queries = np.array([await emb.embed_query(data.queries[q]) for q in qids], dtype=np.float32)
    head_scores = queries @ head.T
    best = np.full_like(head_scores, -9.0)
    for i, p in enumerate(passages):
        if len(p):
            best[:, i] = (queries @ p.T).max(1)
    better_of = np.maximum(head_scores, best)

    def ndcg(scores: Matrix) -> float:
        top = np.argsort(-scores, axis=1)[:, :10]
        return round(statistics.fmean(ndcg10([ids[t] for t in top[i]], data.qrels[q]) for i, q in enumerate(qids)), 4)

    rh, rb = ranks(head_scores), ranks(better_of)
    long = np.isfinite(agreement)
    count = np.array([len(p) for p in passages])
    out: dict[str, Any] = {
        "set": name,
        "long_documents": int(long.sum()),
        "background": round(background, 3),
        "agreement_deciles": [round(float(x), 3) for x in np.quantile(agreement[long], [0.1, 0.3, 0.5, 0.7, 0.9])],
        "knn": {
            "head": ndcg(head_scores),
            "better_of": ndcg(better_of),
            "rrf(head, better_of)": ndcg(np.where(rh <= 100, 1 / (10 + rh), 0) + np.where(rb <= 100, 1 / (10 + rb), 0)),
        },
    }
    for threshold in (0.4, 0.5, 0.6):
        gate = agreement < threshold
        out["knn"][f"passages where agreement < {threshold} ({gate.sum() / max(long.sum(), 1):.0%})"] = ndcg(
            np.where(gate[None, :], better_of, head_scores)
        )
    for c in (0.005, 0.01, 0.02):
        discounted = best - c * np.log2(np.maximum(count, 1))[None, :]
        out["knn"][f"best - {c}·log2(passages)"] = ndcg(np.maximum(head_scores, discounted))
    return out


def table(rows: list[dict[str, Any]]) -> str:
    lines = []
    for r in rows:
        lines.append(
            f"\n{r['set']}: {r['long_documents']} long documents, background cosine {r['background']}, "
            f"agreement deciles {r['agreement_deciles']}"
        )
        lines += [f"  kNN {rule}: {v:.4f}" for rule, v in r["knn"].items()]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", nargs="+", default=["manpages", "lisa-x10", "scifact-x10", "scifact"])
    args = parser.parse_args()
    rows = each_set(args.sets, lambda name: asyncio.run(measure_set(name)))
    save(rows, "passage_agreement.json", table)


if __name__ == "__main__":
    main()
