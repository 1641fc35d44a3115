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

import functools
import math
import statistics
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
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
#: One leg as the core keeps it: id -> its rank (a duplicate id keeps its first, best, position), and the
#: leg's score column (the score of rank r is ``scores[r - 1]``).
_Leg = tuple[dict[str, int], Sequence[float]]


class FusedList(Sequence[FusedHit]):
    """The fused order, best first; a :class:`FusedHit` is built only when it is read.

    A search fuses two windows (up to 2 × 10,000 hits) and shows ten: building every hit object (and every
    hit's provenance) was most of the fusion's time, so each leg's rank map and score column are kept and
    a hit's provenance is read from them when the hit is. ``len()`` is the number of fused documents;
    indexing and slicing return :class:`FusedHit` objects (slices as lists); ``ids`` is the order.
    """

    __slots__ = ("_best", "_legs", "_order", "_scores")

    def __init__(self, order: list[str], scores: dict[str, float], legs: dict[str, _Leg], best: float) -> None:
        self._order, self._scores, self._legs, self._best = order, scores, legs, best

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
        return FusedList(order, self._scores, self._legs, self._best)

    def overlap(self) -> int:
        """How many documents every leg found (0 with fewer than two legs), before any :meth:`keep`."""
        if len(self._legs) < 2:
            return 0
        first, *rest = (ranks.keys() for ranks, _ in self._legs.values())
        common = first & rest[0]
        for keys in rest[1:]:
            common &= keys
        return len(common)

    def _hit(self, doc_id: str) -> FusedHit:
        score, best = self._scores[doc_id], self._best
        return FusedHit(
            id=doc_id,
            score=score,
            normalized_score=min(max(score / best, 0.0), 1.0) if best > 0 else 0.0,
            ranks={leg: ranks[doc_id] for leg, (ranks, _) in self._legs.items() if doc_id in ranks},
            leg_scores={
                leg: scores[ranks[doc_id] - 1] for leg, (ranks, scores) in self._legs.items() if doc_id in ranks
            },
        )


def _leg_maps(legs: Mapping[str, LegColumns]) -> dict[str, _Leg]:
    """Each leg's id -> rank, a duplicate id keeping its first (best) rank (then the map is built over the
    reversed column, so the first occurrence is written last and wins)."""
    out: dict[str, _Leg] = {}
    for leg, (ids, scores) in legs.items():
        n = len(ids)
        if len(scores) != n:
            raise ValueError(f"leg {leg!r}: {n} ids but {len(scores)} scores")
        ranks = dict(zip(ids, range(1, n + 1), strict=True))
        if len(ranks) < n:  # a duplicate id: written again at a later rank
            ranks = dict(zip(reversed(ids), range(n, 0, -1), strict=True))
        out[leg] = (ranks, scores)
    return out


def _summed(parts: list[dict[str, float]]) -> dict[str, float]:
    """id -> the sum of its values over the parts, added part by part in order (with two parts, exactly
    the two terms' sum). Merged a dict at a time; only the ids in both are added one by one."""
    total: dict[str, float] = {}
    for part in parts:
        merged = {**part, **total}
        for doc_id in part.keys() & total.keys():
            merged[doc_id] = total[doc_id] + part[doc_id]
        total = merged
    return total


def _ordered(scored: dict[str, float], legs: dict[str, _Leg], best: float) -> FusedList:
    """Higher score first; a tie is broken by more legs, then the better best rank, then the id. Ties are
    the rule, not the exception (with equal weights, rank r in one leg ties rank r in the other), so this
    is one stable sort per criterion, least significant first, each keyed by a dict lookup (C-level):
    a third of the time of sorting tuples built per document."""
    rank_maps = [ranks for ranks, _ in legs.values()]
    order = sorted(scored)
    if rank_maps:
        order.sort(key=_best_ranks(rank_maps).__getitem__)
        order.sort(key=Counter(chain.from_iterable(rank_maps)).__getitem__, reverse=True)
    order.sort(key=scored.__getitem__, reverse=True)  # (reverse=True keeps equal keys in their order)
    return FusedList(order, scored, legs, best)


def _best_ranks(rank_maps: list[dict[str, int]]) -> dict[str, int]:
    """id -> its best (lowest) rank over the legs."""
    best = rank_maps[0]
    for ranks in rank_maps[1:]:
        merged = {**ranks, **best}
        for doc_id in ranks.keys() & best.keys():
            merged[doc_id] = min(ranks[doc_id], best[doc_id])
        best = merged
    return best


@functools.lru_cache(maxsize=64)
def _rrf_terms(weight: float, k: int, n: int) -> tuple[float, ...]:
    """``weight / (k + rank)`` for rank 0..n (index 0 unused): the same few (weight, k, window) every search."""
    return tuple(weight / (k + rank) for rank in range(n + 1))


def _rrf(legs: Mapping[str, LegColumns], *, k: int, weights: Mapping[str, float] | None) -> FusedList:
    if k < 1:
        raise ValueError("k must be >= 1")
    w = _validate(legs, weights)
    maps = _leg_maps(legs)
    parts = []
    for leg, (ranks, scores) in maps.items():
        by_rank = _rrf_terms(w[leg], k, len(scores))
        parts.append(dict(zip(ranks, map(by_rank.__getitem__, ranks.values()), strict=True)))
    return _ordered(_summed(parts), maps, best=math.fsum(w[leg] / (k + 1) for leg in legs))


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
    maps = _leg_maps(legs)
    normalise = {"linear_minmax": _minmax, "linear_zscore": _zscore, "dbsf": _three_sigma}[method]
    parts = []
    best = 0.0
    for leg, (ranks, scores) in maps.items():
        if not ranks:
            continue
        normed = normalise([scores[rank - 1] for rank in ranks.values()])
        weight = w[leg]
        parts.append(dict(zip(ranks, [weight * value for value in normed], strict=True)))
        best += weight * max(normed)
    return _ordered(_summed(parts), maps, best=best)


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
