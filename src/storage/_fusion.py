"""Rank fusion: pure functions from ranked lists to one fused list. No I/O, no mutation of inputs.

Methods
- ``rrf``: Reciprocal Rank Fusion as Elasticsearch defines it: score(d) = Σ_leg w_leg / (k + rank_leg(d)),
  rank 1-based; a document absent from a leg gets nothing from it.
- ``linear``: Σ_leg w_leg * norm(score_leg(d)) with ``minmax`` or ``zscore`` normalisation per leg.
- ``dbsf``: Distribution-Based Score Fusion: each leg's scores mapped through mean ± 3σ onto [0, 1]
  (clipped), then summed with weights.

Ties are broken deterministically: higher fused score, then found by more legs, then the better best rank,
then the document id.

``normalized_score`` is in [0, 1] and comparable across queries: the fused score divided by the score a
document would get by ranking first (RRF) / scoring at the top (linear, dbsf) in every leg.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "DEFAULT_RRF_K",
    "FusedHit",
    "FusionMethod",
    "LegHit",
    "fuse",
    "rrf",
]

#: The rank constant: it damps the head of each list so one leg's top hit cannot dominate the fused order.
#: 10, not Elasticsearch's / the paper's 60: chosen on four collections (SciFact, CACM, LISA, NPL; table in
#: docs/benchmarks.md) where k=60 put hybrid below BM25 alone on LISA and k=10 keeps it above the better leg
#: on all four with the best mean nDCG@10 of the equal-weight settings.
DEFAULT_RRF_K = 10

FusionMethod = Literal["rrf", "linear_minmax", "linear_zscore", "dbsf"]


@dataclass(frozen=True, slots=True)
class LegHit:
    """One hit of one leg: the document id and the leg's raw score. Its rank is its list position + 1."""

    id: str
    score: float


@dataclass(frozen=True, slots=True)
class FusedHit:
    """One fused result: score, normalised score in [0, 1], and per-leg (rank, raw score) provenance."""

    id: str
    score: float
    normalized_score: float
    ranks: Mapping[str, int] = field(default_factory=dict)
    leg_scores: Mapping[str, float] = field(default_factory=dict)


def _validate(legs: Mapping[str, Sequence[LegHit]], weights: Mapping[str, float] | None) -> dict[str, float]:
    w = {leg: 1.0 for leg in legs}
    if weights:
        unknown = set(weights) - set(legs)
        if unknown:
            raise ValueError(f"weights given for unknown legs: {sorted(unknown)}")
        w.update(weights)
    for leg, value in w.items():
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"weight for {leg!r} must be a finite number >= 0, got {value}")
    return w


def _provenance(legs: Mapping[str, Sequence[LegHit]]) -> dict[str, tuple[dict[str, int], dict[str, float]]]:
    """id -> ({leg: rank}, {leg: raw score}); a duplicate id within one leg keeps its first (best) rank."""
    out: dict[str, tuple[dict[str, int], dict[str, float]]] = {}
    for leg, hits in legs.items():
        for position, hit in enumerate(hits, start=1):
            ranks, scores = out.setdefault(hit.id, ({}, {}))
            if leg not in ranks:
                ranks[leg] = position
                scores[leg] = hit.score
    return out


def _order(
    scored: dict[str, float], prov: dict[str, tuple[dict[str, int], dict[str, float]]], best: float
) -> list[FusedHit]:
    def key(doc_id: str) -> tuple[float, int, int, str]:
        ranks = prov[doc_id][0]
        return (-scored[doc_id], -len(ranks), min(ranks.values()), doc_id)

    return [
        FusedHit(
            id=doc_id,
            score=scored[doc_id],
            normalized_score=min(max(scored[doc_id] / best, 0.0), 1.0) if best > 0 else 0.0,
            ranks=dict(prov[doc_id][0]),
            leg_scores=dict(prov[doc_id][1]),
        )
        for doc_id in sorted(scored, key=key)
    ]


def rrf(
    legs: Mapping[str, Sequence[LegHit]],
    *,
    k: int = DEFAULT_RRF_K,
    weights: Mapping[str, float] | None = None,
) -> list[FusedHit]:
    """Reciprocal Rank Fusion of ranked lists (best first). See the module docstring."""
    if k < 1:
        raise ValueError("k must be >= 1")
    w = _validate(legs, weights)
    prov = _provenance(legs)
    scored = {
        doc_id: math.fsum(w[leg] / (k + rank) for leg, rank in ranks.items()) for doc_id, (ranks, _) in prov.items()
    }
    return _order(scored, prov, best=math.fsum(w[leg] / (k + 1) for leg in legs))


def _minmax(scores: Sequence[float]) -> list[float]:
    lo, hi = min(scores), max(scores)
    return [1.0 if hi == lo else (s - lo) / (hi - lo) for s in scores]


def _zscore(scores: Sequence[float]) -> list[float]:
    """z-scores mapped onto [0, 1] with a logistic so they combine with weights like the others."""
    if len(scores) < 2:
        return [1.0 for _ in scores]
    mean, sd = statistics.fmean(scores), statistics.pstdev(scores)
    if sd == 0:
        return [1.0 for _ in scores]
    return [1.0 / (1.0 + math.exp(-(s - mean) / sd)) for s in scores]


def _three_sigma(scores: Sequence[float]) -> list[float]:
    if len(scores) < 2:
        return [1.0 for _ in scores]
    mean, sd = statistics.fmean(scores), statistics.pstdev(scores)
    if sd == 0:
        return [1.0 for _ in scores]
    lo, hi = mean - 3 * sd, mean + 3 * sd
    return [min(max((s - lo) / (hi - lo), 0.0), 1.0) for s in scores]


def _score_fusion(
    legs: Mapping[str, Sequence[LegHit]], weights: Mapping[str, float] | None, method: FusionMethod
) -> list[FusedHit]:
    w = _validate(legs, weights)
    prov = _provenance(legs)
    normalise = {"linear_minmax": _minmax, "linear_zscore": _zscore, "dbsf": _three_sigma}[method]
    scored: dict[str, float] = dict.fromkeys(prov, 0.0)
    best = 0.0
    for leg, hits in legs.items():
        first: dict[str, float] = {}
        for hit in hits:
            first.setdefault(hit.id, hit.score)
        if not first:
            continue
        ids = list(first)
        normed = normalise([first[i] for i in ids])
        for doc_id, value in zip(ids, normed, strict=True):
            scored[doc_id] += w[leg] * value
        best += w[leg] * max(normed)
    return _order(scored, prov, best=best)


def fuse(
    legs: Mapping[str, Sequence[LegHit]],
    *,
    method: FusionMethod = "rrf",
    k: int = DEFAULT_RRF_K,
    weights: Mapping[str, float] | None = None,
) -> list[FusedHit]:
    """Fuse ranked lists with the chosen method (``k`` applies to RRF only)."""
    if method == "rrf":
        return rrf(legs, k=k, weights=weights)
    if method in ("linear_minmax", "linear_zscore", "dbsf"):
        return _score_fusion(legs, weights, method)
    raise ValueError(f"unknown fusion method {method!r}")
