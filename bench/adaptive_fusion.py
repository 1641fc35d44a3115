"""Per-query adaptive fusion with no judged queries: schemes from the literature tried offline on the legs
bench/quality.py recorded (bench/results/legs/<set>-<model>.json). Research, not a test: prints a table.

Each scheme sets the two legs' weights (or rewards agreement) per query from the legs alone, then fuses
with the client's own RRF (k=10, window 50: the defaults). Compared with the static default, the best
static setting of the sweep on the mean, and the better single leg of each set.

- ``nqc``: each leg's normalized query commitment, std / mean of its top-20 scores (Shtok et al., 2012),
  calibrated per collection (z-score over the collection's queries, no judgments), weight = 1 + 0.5 z;
- ``wig``: weighted information gain, mean of the top 5 minus mean of the window (Zhou & Croft, 2007),
  calibrated the same way;
- ``gap``: the head's dominance, (s1 - s10) / s1, calibrated the same way;
- ``agreement``: how much of each leg's top 10 the other leg finds in its window: a head the other leg
  confirms is trusted more (weight = 0.5 + agreement);
- ``mnz``: CombMNZ on RRF: each document's fused score times the number of legs that found it.

    .venv/bin/python bench/adaptive_fusion.py [--model bge-small-en-v1.5]
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from storage.evaluation import fuse_top, ndcg_at_10
from storage.fusion import FusionSetting, LegHit, fuse

ROOT = Path(__file__).resolve().parents[1]
SETS = ["scifact", "cacm", "lisa", "npl"]
WINDOW = 50
Legs = dict[str, tuple[list[str], list[float]]]


def load(model: str) -> dict[str, dict[str, Any]]:
    out = {}
    for name in SETS:
        raw = json.loads((ROOT / "bench" / "results" / "legs" / f"{name}-{model}.json").read_text())
        legs = {
            q: {leg: ([h[0] for h in hits], [float(h[1]) for h in hits]) for leg, hits in by.items()}
            for q, by in raw["legs"].items()
        }
        out[name] = {"qrels": raw["qrels"], "legs": legs}
    return out


def nqc(scores: Sequence[float]) -> float:
    top = scores[:20]
    mean = statistics.fmean(top) if top else 0.0
    return statistics.pstdev(top) / abs(mean) if len(top) > 1 and mean else 0.0


def wig(scores: Sequence[float]) -> float:
    return statistics.fmean(scores[:5]) - statistics.fmean(scores[:WINDOW]) if len(scores) > 5 else 0.0


def gap(scores: Sequence[float]) -> float:
    return (scores[0] - scores[min(9, len(scores) - 1)]) / scores[0] if scores and scores[0] else 0.0


def calibrated(
    predictor: Callable[[Sequence[float]], float],
) -> Callable[[Mapping[str, Legs]], dict[str, dict[str, float]]]:
    """Per query, per leg: 1 + 0.5 z, z the predictor's z-score over the collection's queries (floor 0.1)."""

    def weights(collection: Mapping[str, Legs]) -> dict[str, dict[str, float]]:
        values = {q: {leg: predictor(scores) for leg, (_, scores) in legs.items()} for q, legs in collection.items()}
        stats = {}
        for leg in ("bm25", "knn"):
            column = [v[leg] for v in values.values()]
            stats[leg] = (statistics.fmean(column), statistics.pstdev(column) or 1.0)
        return {
            q: {leg: max(0.1, 1 + 0.5 * (v[leg] - stats[leg][0]) / stats[leg][1]) for leg in v}
            for q, v in values.items()
        }

    return weights


def agreement(collection: Mapping[str, Legs]) -> dict[str, dict[str, float]]:
    out = {}
    for q, legs in collection.items():
        heads = {leg: ids[:10] for leg, (ids, _) in legs.items()}
        windows = {leg: set(ids[:WINDOW]) for leg, (ids, _) in legs.items()}
        out[q] = {
            "bm25": 0.5 + sum(d in windows["knn"] for d in heads["bm25"]) / 10,
            "knn": 0.5 + sum(d in windows["bm25"] for d in heads["knn"]) / 10,
        }
    return out


def run_weighted(collection: Mapping[str, Legs], weights: Mapping[str, Mapping[str, float]]) -> dict[str, list[str]]:
    return {
        q: fuse_top(legs, FusionSetting("rrf", 10, weights[q]["bm25"], weights[q]["knn"], WINDOW))
        for q, legs in collection.items()
    }


def run_mnz(collection: Mapping[str, Legs]) -> dict[str, list[str]]:
    out = {}
    for q, legs in collection.items():
        cut = {
            leg: [LegHit(i, s) for i, s in zip(ids[:WINDOW], scores[:WINDOW], strict=True)]
            for leg, (ids, scores) in legs.items()
        }
        fused = fuse(cut, method="rrf", k=10)
        found = {leg: {h.id for h in hits} for leg, hits in cut.items()}
        scored = {h.id: h.score * sum(h.id in f for f in found.values()) for h in fused}
        out[q] = sorted(scored, key=lambda d: (-scored[d], d))[:10]
    return out


def mean(scores: Mapping[str, float]) -> float:
    return sum(scores.values()) / len(scores)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="bge-small-en-v1.5")
    args = parser.parse_args()
    data = load(args.model)
    schemes: dict[str, Callable[[Mapping[str, Legs]], dict[str, list[str]]]] = {
        "static default (rrf k=10 w50 1:1)": lambda c: {q: fuse_top(legs, FusionSetting()) for q, legs in c.items()},
        "static rrf k=20 w100 1:1 (best sweep mean)": lambda c: {
            q: fuse_top(legs, FusionSetting("rrf", 20, 1.0, 1.0, 100)) for q, legs in c.items()
        },
        "nqc": lambda c: run_weighted(c, calibrated(nqc)(c)),
        "wig": lambda c: run_weighted(c, calibrated(wig)(c)),
        "gap": lambda c: run_weighted(c, calibrated(gap)(c)),
        "agreement": lambda c: run_weighted(c, agreement(c)),
        "mnz": run_mnz,
    }
    legs_alone: dict[str, dict[str, float]] = {}
    for name, d in data.items():
        legs_alone[name] = {
            leg: mean(ndcg_at_10(d["qrels"], {q: legs[leg][0][:10] for q, legs in d["legs"].items()}))
            for leg in ("bm25", "knn")
        }
    header = "| scheme | " + " | ".join(SETS) + " | mean | worst margin over the better leg |"
    print(header)
    print("|---" * (len(SETS) + 3) + "|")
    for label, scheme in schemes.items():
        scores = {name: mean(ndcg_at_10(d["qrels"], scheme(d["legs"]))) for name, d in data.items()}
        margins = [scores[n] - max(legs_alone[n].values()) for n in SETS]
        cells = " | ".join(f"{scores[n]:.4f}" for n in SETS)
        print(f"| {label} | {cells} | {statistics.fmean(scores.values()):.4f} | {min(margins):+.4f} |")
    for leg in ("bm25", "knn"):
        cells = " | ".join(f"{legs_alone[n][leg]:.4f}" for n in SETS)
        print(f"| {leg} alone | {cells} | {statistics.fmean(legs_alone[n][leg] for n in SETS):.4f} | |")


if __name__ == "__main__":
    main()
