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
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, overload

__all__ = [
    "DEFAULT_RRF_K",
    "FusedHit",
    "FusedList",
    "FusionMethod",
    "LegHit",
    "fuse",
    "fused_list",
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


def _validate(legs: Mapping[str, object], weights: Mapping[str, float] | None) -> dict[str, float]:
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


#: One leg as the core takes it: its ids and raw scores, best first (parallel sequences).
LegColumns = tuple[Sequence[str], Sequence[float]]


class FusedList(Sequence[FusedHit]):
    """The fused order, best first; a :class:`FusedHit` is built only when it is read.

    A search fuses two windows (up to 2 × 10,000 hits) and shows ten: building every hit object was most of
    the fusion's time (2 × 1,000 hits: 10.9 ms, 1.9 ms without). ``len()`` is the number of fused documents;
    indexing and slicing return :class:`FusedHit` objects (slices as lists); ``ids`` is the order.
    """

    __slots__ = ("_best", "_leg_scores", "_order", "_ranks", "_scores")

    def __init__(
        self,
        order: list[str],
        scores: dict[str, float],
        ranks: dict[str, dict[str, int]],
        leg_scores: dict[str, dict[str, float]],
        best: float,
    ) -> None:
        self._order, self._scores, self._ranks, self._leg_scores, self._best = order, scores, ranks, leg_scores, best

    @property
    def ids(self) -> list[str]:
        return list(self._order)

    def __len__(self) -> int:
        return len(self._order)

    @overload
    def __getitem__(self, index: int) -> FusedHit: ...

    @overload
    def __getitem__(self, index: slice) -> list[FusedHit]: ...

    def __getitem__(self, index: int | slice) -> FusedHit | list[FusedHit]:
        if isinstance(index, slice):
            return [self._hit(doc_id) for doc_id in self._order[index]]
        return self._hit(self._order[index])

    def __iter__(self) -> Iterator[FusedHit]:
        return (self._hit(doc_id) for doc_id in self._order)

    def keep(self, wanted: Callable[[str], bool]) -> FusedList:
        """The same fusion with only the ids ``wanted`` accepts (their scores and ranks unchanged)."""
        order = [doc_id for doc_id in self._order if wanted(doc_id)]
        return FusedList(order, self._scores, self._ranks, self._leg_scores, self._best)

    def _hit(self, doc_id: str) -> FusedHit:
        score, best = self._scores[doc_id], self._best
        return FusedHit(
            id=doc_id,
            score=score,
            normalized_score=min(max(score / best, 0.0), 1.0) if best > 0 else 0.0,
            ranks=dict(self._ranks[doc_id]),
            leg_scores=dict(self._leg_scores[doc_id]),
        )


def _provenance(legs: Mapping[str, LegColumns]) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]:
    """id -> {leg: rank} and id -> {leg: raw score}; a duplicate id within one leg keeps its first (best)
    rank."""
    ranks: dict[str, dict[str, int]] = {}
    raw: dict[str, dict[str, float]] = {}
    for leg, (ids, scores) in legs.items():
        for position, (doc_id, score) in enumerate(zip(ids, scores, strict=True), start=1):
            seen = ranks.get(doc_id)
            if seen is None:
                ranks[doc_id] = {leg: position}
                raw[doc_id] = {leg: score}
            elif leg not in seen:
                seen[leg] = position
                raw[doc_id][leg] = score
    return ranks, raw


def _ordered(
    scored: dict[str, float], ranks: dict[str, dict[str, int]], raw: dict[str, dict[str, float]], best: float
) -> FusedList:
    """Sorted on plain tuples (no key function): higher score, more legs, better best rank, then the id."""
    keys = [(-score, -len(ranks[doc_id]), min(ranks[doc_id].values()), doc_id) for doc_id, score in scored.items()]
    keys.sort()
    return FusedList([key[3] for key in keys], scored, ranks, raw, best)


def _rrf(legs: Mapping[str, LegColumns], *, k: int, weights: Mapping[str, float] | None) -> FusedList:
    if k < 1:
        raise ValueError("k must be >= 1")
    w = _validate(legs, weights)
    ranks, raw = _provenance(legs)
    # Summed leg by leg in leg order: with two legs this is exactly math.fsum of the two terms.
    scored = dict.fromkeys(ranks, 0.0)
    for doc_id, doc_ranks in ranks.items():
        for leg, rank in doc_ranks.items():
            scored[doc_id] += w[leg] / (k + rank)
    return _ordered(scored, ranks, raw, best=math.fsum(w[leg] / (k + 1) for leg in legs))


def rrf(
    legs: Mapping[str, Sequence[LegHit]],
    *,
    k: int = DEFAULT_RRF_K,
    weights: Mapping[str, float] | None = None,
) -> list[FusedHit]:
    """Reciprocal Rank Fusion of ranked lists (best first). See the module docstring."""
    return list(_rrf(_columns(legs), k=k, weights=weights))


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
    legs: Mapping[str, LegColumns], weights: Mapping[str, float] | None, method: FusionMethod
) -> FusedList:
    w = _validate(legs, weights)
    ranks, raw = _provenance(legs)
    normalise = {"linear_minmax": _minmax, "linear_zscore": _zscore, "dbsf": _three_sigma}[method]
    scored: dict[str, float] = dict.fromkeys(ranks, 0.0)
    best = 0.0
    for leg in legs:
        first = {doc_id: leg_scores[leg] for doc_id, leg_scores in raw.items() if leg in leg_scores}
        if not first:
            continue
        ids = list(first)
        normed = normalise([first[i] for i in ids])
        for doc_id, value in zip(ids, normed, strict=True):
            scored[doc_id] += w[leg] * value
        best += w[leg] * max(normed)
    return _ordered(scored, ranks, raw, best=best)


def fused_list(
    legs: Mapping[str, LegColumns],
    *,
    method: FusionMethod = "rrf",
    k: int = DEFAULT_RRF_K,
    weights: Mapping[str, float] | None = None,
) -> FusedList:
    """:func:`fuse` for legs given as (ids, scores) columns, hits built on demand (what the search uses)."""
    if method == "rrf":
        return _rrf(legs, k=k, weights=weights)
    if method in ("linear_minmax", "linear_zscore", "dbsf"):
        return _score_fusion(legs, weights, method)
    raise ValueError(f"unknown fusion method {method!r}")


def fuse(
    legs: Mapping[str, Sequence[LegHit]],
    *,
    method: FusionMethod = "rrf",
    k: int = DEFAULT_RRF_K,
    weights: Mapping[str, float] | None = None,
) -> list[FusedHit]:
    """Fuse ranked lists with the chosen method (``k`` applies to RRF only)."""
    return list(fused_list(_columns(legs), method=method, k=k, weights=weights))


def _columns(legs: Mapping[str, Sequence[LegHit]]) -> dict[str, LegColumns]:
    return {leg: ([h.id for h in hits], [h.score for h in hits]) for leg, hits in legs.items()}
