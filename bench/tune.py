"""Fusion tuning on BEIR-layout collections: what `storage.evaluation.tune` (hybrid-search tune) finds on each, with the
default local model. Not a test; prints a table and writes bench/results/tune.json.

For each collection: index it (embeddings cached in .cache/embeddings), then run `tune` as a user would
(the default grid, 5-fold cross-validation over the judged queries), and report the current (default)
setting, each leg alone, the cross-validated tuned estimate with its interval, the best setting of the grid,
and the time of the retrieval (each query's legs, once) apart from the fusion of every setting.

    .venv/bin/python bench/tune.py [--beir DIR ...]      # default: scifact, cacm, lisa, npl
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from embeddings import CachedEmbedder, LocalEmbedder
from storage import SearchClient, SearchSettings
from storage.evaluation import load_beir, load_judgments, tune
from storage.local_es import url_or_local

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
DEFAULT_SETS = [SHARED / "beir" / "scifact", SHARED / "ir" / "cacm", SHARED / "ir" / "lisa", SHARED / "ir" / "npl"]


async def tune_set(url: str, folder: Path, cache_dir: Path) -> dict[str, Any]:
    data = load_beir(folder)
    settings = SearchSettings(url=url, index=f"tune-{folder.name.lower()}", leg_timeout_s=60, bulk_chunk_size=100)
    async with SearchClient.from_settings(settings, embedder=CachedEmbedder(LocalEmbedder(), cache_dir)) as client:
        await client.indices.delete()
        await client.ensure_index()
        report = await client.index_documents(data.documents, refresh=True)
        assert report.ok, report.failed[:3]
        started = time.perf_counter()
        tuned = await tune(client, load_judgments(folder))
        total = time.perf_counter() - started
        await client.indices.delete()
    out = tuned.model_dump(mode="json")
    out["tune_seconds"] = round(total, 1)
    return out


def table(results: list[dict[str, Any]]) -> str:
    lines = [
        "| set | queries | BM25 | kNN | defaults | tuned (5-fold CV) | gain vs defaults [95 % CI], p | "
        "tuned − better leg | best of grid (in-sample) | decision | retrieval s | fusion s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        cv, best = r["cross_validated"], r["best"]
        better = max(r["bm25_ndcg"], r["knn_ndcg"])
        lines.append(
            f"| {r['dataset']} | {r['queries']} | {r['bm25_ndcg']:.4f} | {r['knn_ndcg']:.4f} | "
            f"{r['current']['ndcg']:.4f} | {cv['ndcg']:.4f} | {cv['gain']:+.4f} [{cv['low']:+.4f}, {cv['high']:+.4f}], "
            f"{cv['p_value']:.3f} | {cv['ndcg'] - better:+.4f} | {best['ndcg']:.4f} ({best['label']}) | "
            f"{r['decision']} | {r['retrieval_seconds']:.1f} | {r['fusion_seconds']:.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--beir", type=Path, action="append", help="a BEIR-layout folder (repeatable)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "tune.json")
    args = parser.parse_args()
    results = []
    with url_or_local("tune", heap="1g") as url:
        for folder in args.beir or DEFAULT_SETS:
            started = time.perf_counter()
            results.append(asyncio.run(tune_set(url, folder, ROOT / ".cache" / "embeddings")))
            print(f"{folder.name}: done in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    print(table(results))


if __name__ == "__main__":
    main()
