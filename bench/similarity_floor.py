"""The agent tool's relevance floor: how close must a semantic-only hit be to be shown?

Nonsense has nearest neighbours: a query like ``zzqxj flurbo`` gets k documents from the kNN leg whatever it
says. The agent tool hides semantic-only hits below a similarity floor, so that nonsense gets "no matches".
This measures, per model and per collection (exact cosine over the cached document vectors, scored as
Elasticsearch scores ``dot_product`` / ``cosine``: (1 + cos) / 2):

- ``relevant_lost``: of the judged-relevant documents in each real query's kNN top 10, the share scoring
  below the floor (an upper bound on what the floor costs: some of those BM25 finds too, and are kept);
- ``nonsense_shown``: of the nonsense queries (seeded pseudo-words, 1 to 3 of them, and keyboard mash), the
  share with at least one kNN top-10 hit at or above the floor (what the floor fails to stop).

The floor chosen for a model is the highest that loses at most 1% of relevant hits on *every* collection
(a floor is a per-model constant; never fitted to one collection). Prints a table and writes JSON to
bench/results/similarity_floor.json. Embeddings come from .cache/embeddings (bench/quality.py fills it).

    .venv/bin/python bench/similarity_floor.py [--model NAME ...] [--beir DIR ...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
from pathlib import Path
from typing import Any

import numpy as np

from embeddings import DEFAULT_LOCAL_MODEL as DEFAULT_MODEL
from embeddings import CachedEmbedder, LocalEmbedder
from storage.evaluation import load_beir

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
DEFAULT_SETS = [SHARED / "beir" / "scifact", SHARED / "ir" / "cacm", SHARED / "ir" / "lisa", SHARED / "ir" / "npl"]
TOP = 10
MAX_LOSS = 0.01
FLOORS = [round(0.50 + 0.01 * i, 2) for i in range(41)]


def nonsense_queries(n: int = 300, seed: int = 7) -> list[str]:
    """Queries that mean nothing: pronounceable pseudo-words and keyboard mash (seeded: the same every run)."""
    rng = random.Random(seed)
    consonants, vowels = "bcdfghjklmnpqrstvwxz", "aeiou"

    def word() -> str:
        return "".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(rng.randint(2, 4)))

    def mash() -> str:
        return "".join(rng.choice("qwertyuiopasdfghjklzxcvbnm") for _ in range(rng.randint(4, 9)))

    return [" ".join((word if i % 2 else mash)() for _ in range(rng.randint(1, 3))) for i in range(n)]


def es_score(cosines: np.ndarray) -> np.ndarray:
    return (1.0 + cosines) / 2.0


async def measure(folder: Path, embedder: CachedEmbedder, nonsense: list[str]) -> dict[str, Any]:
    data = load_beir(folder)
    ids = [d.id for d in data.documents]
    vectors = np.asarray(await embedder.embed_documents([d.embedding_text() for d in data.documents]), np.float32)
    relevant_scores: list[float] = []
    for qid, text in data.queries.items():
        judged = {doc for doc, grade in data.qrels.get(qid, {}).items() if grade > 0}
        if not judged:
            continue
        scores = es_score(vectors @ np.asarray(await embedder.embed_query(text), np.float32))
        top = np.argsort(-scores, kind="stable")[:TOP]
        relevant_scores += [float(scores[i]) for i in top if ids[i] in judged]
    nonsense_best = []
    for text in nonsense:
        scores = es_score(vectors @ np.asarray(await embedder.embed_query(text), np.float32))
        nonsense_best.append(float(scores.max()))
    rel, non = np.asarray(relevant_scores), np.asarray(nonsense_best)
    return {
        "set": folder.name,
        "relevant_hits": len(rel),
        "relevant_p01": round(float(np.quantile(rel, 0.01)), 4),
        "relevant_median": round(float(np.median(rel)), 4),
        "nonsense_best_median": round(float(np.median(non)), 4),
        "nonsense_best_p99": round(float(np.quantile(non, 0.99)), 4),
        "by_floor": {
            f"{f:.2f}": {
                "relevant_lost": round(float((rel < f).mean()), 4),
                "nonsense_shown": round(float((non >= f).mean()), 4),
            }
            for f in FLOORS
        },
    }


async def run_model(model: str, sets: list[Path], nonsense: list[str]) -> dict[str, Any]:
    embedder = CachedEmbedder(LocalEmbedder(model), ROOT / ".cache" / "embeddings")
    try:
        rows = [await measure(folder, embedder, nonsense) for folder in sets]
    finally:
        await embedder.aclose()
    ok = [f for f in FLOORS if all(r["by_floor"][f"{f:.2f}"]["relevant_lost"] <= MAX_LOSS for r in rows)]
    floor = max(ok) if ok else 0.0
    return {"model": model, "floor": floor, "sets": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", help=f"a catalogue model (default {DEFAULT_MODEL}); repeatable")
    parser.add_argument("--beir", action="append", type=Path, help="a BEIR folder (default: the four given sets)")
    args = parser.parse_args()
    nonsense = nonsense_queries()
    results = [asyncio.run(run_model(m, args.beir or DEFAULT_SETS, nonsense)) for m in args.model or [DEFAULT_MODEL]]
    for result in results:
        floor = f"{result['floor']:.2f}"
        print(f"\n{result['model']}: floor {floor} (highest losing <= {MAX_LOSS:.0%} of relevant top-{TOP} hits)")
        head = ("rel p01", "rel med", "junk med", "junk p99")
        print(f"{'set':10} " + " ".join(f"{h:>8}" for h in head) + f" {'lost':>6} {'junk shown':>10}")
        for r in result["sets"]:
            at = r["by_floor"][floor] if result["floor"] else {"relevant_lost": 0, "nonsense_shown": 1}
            print(
                f"{r['set']:10} {r['relevant_p01']:8.4f} {r['relevant_median']:8.4f} {r['nonsense_best_median']:8.4f} "
                f"{r['nonsense_best_p99']:8.4f} {at['relevant_lost']:6.1%} {at['nonsense_shown']:10.1%}"
            )
    out = ROOT / "bench" / "results" / "similarity_floor.json"
    out.write_text(json.dumps(results, indent=1) + "\n")
    print(f"\nwrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
