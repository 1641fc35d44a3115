"""Retrieval quality on BEIR-layout collections: BM25, kNN, hybrid with the defaults, and a fusion sweep.

For each local model (``--model``, repeatable; default: every catalogue model) and each collection: index
it (embeddings cached in .cache/embeddings, so a re-run never re-embeds), then per judged query
- run BM25 and kNN once each at depth 100 (the legs' ranked lists, ids and scores),
- run the real hybrid search with the library's default settings (``limit=10``; nDCG@10),
- rank the whole corpus by exact cosine with the same vectors (``knn_exact``: what the index's int8 HNSW
  costs against brute force),
- fuse the recorded legs offline with ``storage.fusion.fuse`` (the function the client uses) for every setting of
  the sweep (method, RRF k, window, weights), so the defaults are chosen on all collections at once.
Prints a table and writes JSON to bench/results/quality.json, and each run's legs to
bench/results/legs/<set>-<model>.json (for offline fusion research). Not a test; metrics by ir-measures.

    .venv/bin/python bench/quality.py [--beir DIR ...] [--model NAME ...]   # default: the four sets, every model
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import ir_measures
import numpy as np
from ir_measures import R, nDCG

from embeddings import LOCAL_MODELS, CachedEmbedder, LocalEmbedder
from storage import SearchClient, SearchSettings
from storage.evaluation import BeirDataset, load_beir
from storage.fusion import LegHit, fuse
from storage.local_es import url_or_local

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
DEFAULT_SETS = [SHARED / "beir" / "scifact", SHARED / "ir" / "cacm", SHARED / "ir" / "lisa", SHARED / "ir" / "npl"]
DEPTH = 100
Legs = dict[str, dict[str, list[LegHit]]]  # qid -> leg -> ranked hits


def sweep() -> list[dict[str, Any]]:
    settings: list[dict[str, Any]] = []
    for window in (20, 50, 100):
        for k in (10, 20, 40, 60, 100):
            for weights in ((1.0, 1.0), (1.0, 0.5), (0.5, 1.0)):
                settings.append({"method": "rrf", "k": k, "window": window, "weights": weights})
        for method in ("linear_minmax", "linear_zscore", "dbsf"):
            for weights in ((1.0, 1.0), (1.0, 0.5), (0.5, 1.0)):
                settings.append({"method": method, "k": 60, "window": window, "weights": weights})
    return settings


def ndcg10(qrels: Mapping[str, Mapping[str, int]], run: Mapping[str, Sequence[str]]) -> tuple[float, float]:
    scored = {qid: {doc: float(len(ids) - i) for i, doc in enumerate(ids)} for qid, ids in run.items()}
    result = ir_measures.calc_aggregate([nDCG @ 10, R @ 100], qrels, scored)
    return round(float(result[nDCG @ 10]), 4), round(float(result[R @ 100]), 4)


def fused_run(legs: Legs, setting: Mapping[str, Any]) -> dict[str, list[str]]:
    window, (w_bm25, w_knn) = setting["window"], setting["weights"]
    out = {}
    for qid, by_leg in legs.items():
        hits = fuse(
            {name: ranked[:window] for name, ranked in by_leg.items()},
            method=setting["method"],
            k=setting["k"],
            weights={"bm25": w_bm25, "knn": w_knn},
        )
        out[qid] = [h.id for h in hits]
    return out


async def exact_knn(embedder: CachedEmbedder, data: BeirDataset, depth: int) -> dict[str, list[str]]:
    """Each query's top ``depth`` documents by exact cosine (unit vectors: a dot product), from the cache."""
    vectors = np.asarray(await embedder.embed_documents([d.embedding_text() for d in data.documents]), np.float32)
    ids = [d.id for d in data.documents]
    out = {}
    for qid, text in data.queries.items():
        scores = vectors @ np.asarray(await embedder.embed_query(text), np.float32)
        top = np.argsort(-scores, kind="stable")[:depth]
        out[qid] = [ids[i] for i in top]
    return out


async def evaluate_set(url: str, folder: Path, cache_dir: Path, model: str) -> dict[str, Any]:
    data: BeirDataset = load_beir(folder)
    title_only = sum(1 for d in data.documents if d.title and not d.text)
    settings = SearchSettings(url=url, index=f"quality-{folder.name.lower()}", leg_timeout_s=60, bulk_chunk_size=100)
    out: dict[str, Any] = {
        "dataset": data.name,
        "model": model,
        "documents": len(data.documents),
        "title_only_documents": title_only,
        "judged_queries": len(data.queries),
        "analyzer": settings.analyzer,
    }
    embedder = CachedEmbedder(LocalEmbedder(model), cache_dir)
    async with SearchClient.from_settings(settings, embedder=embedder) as client:
        await client.indices.delete()
        await client.ensure_index()
        t0 = time.perf_counter()
        report = await client.index_documents(data.documents, refresh=True)
        out["index_seconds"] = round(time.perf_counter() - t0, 1)
        out["indexed"] = len(report.indexed)
        out["failed"] = [f.reason for f in report.failed]
        legs: Legs = {}
        defaults: dict[str, list[str]] = {}
        for qid, text in data.queries.items():
            legs[qid] = {}
            for mode in ("bm25", "knn"):
                res = await client.search(text, mode=mode, limit=DEPTH, window=DEPTH, highlight=False)
                legs[qid][mode] = [LegHit(h.id, h.leg_scores[mode]) for h in res.hits]  # the raw leg score
            res = await client.search(text, highlight=False)  # the defaults: hybrid, rrf, window 50, limit 10
            assert not res.degraded, res.degradation
            defaults[qid] = [h.id for h in res.hits]
        await client.indices.delete()
        exact = await exact_knn(embedder, data, DEPTH)
        defaults_setting = {
            "method": client.settings.fusion,
            "k": client.settings.rrf_k,
            "window": client.settings.window,
            "weights": (client.settings.bm25_weight, client.settings.knn_weight),
        }
    out["model_id"] = embedder.model_id
    recorded = {q: {leg: [[h.id, h.score] for h in hits] for leg, hits in by.items()} for q, by in legs.items()}
    out["recorded"] = {"dataset": data.name, "model_id": embedder.model_id, "qrels": data.qrels, "legs": recorded}
    out["bm25"] = ndcg10(data.qrels, {q: [h.id for h in by["bm25"]] for q, by in legs.items()})
    out["knn"] = ndcg10(data.qrels, {q: [h.id for h in by["knn"]] for q, by in legs.items()})
    out["knn_exact"] = ndcg10(data.qrels, exact)
    out["hybrid_defaults"] = {"setting": defaults_setting, "ndcg_at_10": ndcg10(data.qrels, defaults)[0]}
    out["sweep"] = [{**s, "ndcg_at_10": ndcg10(data.qrels, fused_run(legs, s))[0]} for s in sweep()]
    return out


def table(results: list[dict[str, Any]]) -> str:
    """The per-set table, then the sweep over the runs given (one model's runs, one per set)."""
    lines = [
        f"model {results[0]['model']} ({results[0]['model_id']})",
        "",
        "| set | docs (title only) | queries | BM25 | kNN | kNN exact | hybrid (defaults) | better leg "
        "| hybrid − better |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        best = max(r["bm25"][0], r["knn"][0])
        hybrid = r["hybrid_defaults"]["ndcg_at_10"]
        lines.append(
            f"| {r['dataset']} | {r['documents']:,} ({r['title_only_documents']:,}) | {r['judged_queries']} | "
            f"{r['bm25'][0]:.4f} | {r['knn'][0]:.4f} | {r['knn_exact'][0]:.4f} | {hybrid:.4f} | {best:.4f} | "
            f"{hybrid - best:+.4f} |"
        )
    # The sweep: each setting's nDCG@10 on every set, its margin over the better leg (the worst set counts).
    names = [r["dataset"] for r in results]
    rows = []
    for i, setting in enumerate(results[0]["sweep"]):
        scores = [r["sweep"][i]["ndcg_at_10"] for r in results]
        margins = [s - max(r["bm25"][0], r["knn"][0]) for s, r in zip(scores, results, strict=True)]
        rows.append((min(margins), sum(scores) / len(scores), setting, scores))
    rows.sort(key=lambda row: (-row[0], -row[1]))
    lines += ["", f"| method | k | window | weights (bm25, knn) | {' | '.join(names)} | mean | worst margin |"]
    lines.append("|---" * (len(names) + 6) + "|")
    for worst, mean, s, scores in rows[:15]:
        lines.append(
            f"| {s['method']} | {s['k'] if s['method'] == 'rrf' else '-'} | {s['window']} | {tuple(s['weights'])} | "
            + " | ".join(f"{x:.4f}" for x in scores)
            + f" | {mean:.4f} | {worst:+.4f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--beir", type=Path, action="append", help="a BEIR-layout folder (repeatable)")
    parser.add_argument("--model", action="append", help="a local catalogue model (repeatable; default: all)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "quality.json")
    args = parser.parse_args()
    folders = args.beir or DEFAULT_SETS
    models = args.model or list(LOCAL_MODELS)
    cache_dir = ROOT / ".cache" / "embeddings"
    legs_dir = args.out.parent / "legs"
    results: list[dict[str, Any]] = []
    with url_or_local("quality", heap="1g") as url:
        for model in models:
            for folder in folders:
                started = time.perf_counter()
                result = asyncio.run(evaluate_set(url, folder, cache_dir, model))
                legs_dir.mkdir(parents=True, exist_ok=True)
                (legs_dir / f"{result['dataset']}-{model}.json").write_text(json.dumps(result.pop("recorded")))
                results.append(result)
                took = time.perf_counter() - started
                print(f"{model} {folder.name}: done in {took:.0f} s", file=sys.stderr, flush=True)
                args.out.parent.mkdir(parents=True, exist_ok=True)
                args.out.write_text(json.dumps(results, indent=1) + "\n")
    for model in models:
        print(table([r for r in results if r["model"] == model]))
        print()


if __name__ == "__main__":
    main()
