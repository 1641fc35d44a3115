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
from typing import Any, Literal, overload

__all__ = [
    "DEFAULT_RRF_K",
    "FusedHit",
    "FusedList",
    "FusionMethod",
    "LegHit",
    "Provenance",
    "fuse",
    "fused_list",
    "rrf",
    "tail_provenance",
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


#: A fused document as a page reads it: (id, fused score, normalised score, leg -> rank, leg -> raw score), the
#: fields of a :class:`FusedHit` as a plain tuple (a frozen dataclass costs four times as much to build).
Provenance = tuple[str, float, float, dict[str, int], dict[str, float]]


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
#: One leg as the core keeps it: ``(index, rank_of, scores)``. ``index`` maps each id to its rank (a duplicate
#: id keeps its first, best, position) or, when ``rank_of`` is given, to its RRF term ``w / (k + rank)``, which
#: ``rank_of`` maps back to the rank (the terms strictly decrease with the rank when w > 0, so one dict per leg
#: serves both the sum and the provenance). The score of rank r is ``scores[r - 1]``.
_Leg = tuple[dict[str, Any], dict[float, int] | None, Sequence[float]]


def _rank_map(leg: _Leg) -> dict[str, int]:
    """The leg's whole id -> rank map (what reading the full order needs)."""
    index, rank_of, _ = leg
    if rank_of is None:
        return index
    return dict(zip(index, map(rank_of.__getitem__, index.values()), strict=True))


class FusedList(Sequence[FusedHit]):
    """The fused order, best first; a :class:`FusedHit` is built only when it is read, and the order only as
    far as it is read.

    A search fuses two windows (up to 2 × 10,000 hits) and shows ten: building every hit object (and every
    hit's provenance) was most of the fusion's time, so each leg's index (id -> rank, or id -> RRF term; see
    ``_Leg``) and score column are kept and a hit's provenance is read from them when the hit is (as a
    :data:`Provenance` tuple by a page, :meth:`provenances`). Ordering every document by the full tie-break
    was most of what remained, so reading the first ``n`` orders only the documents scoring at least the
    ``n``-th best score (every other document comes after them in the full order); reading further orders
    the rest. ``len()`` is the number of fused documents; indexing and slicing return :class:`FusedHit`
    objects (slices as lists); ``ids`` is the whole order.
    """

    __slots__ = ("_best", "_complete", "_legs", "_order", "_overlap", "_scores")

    def __init__(
        self,
        scores: dict[str, float],
        legs: dict[str, _Leg],
        best: float,
        order: list[str] | None = None,
        *,
        overlap: int,
    ) -> None:
        self._scores, self._legs, self._best, self._overlap = scores, legs, best, overlap
        #: A prefix of the fused order; all of it once ``_complete`` (always, when ``order`` is given).
        self._order: list[str] = order if order is not None else []
        self._complete = order is not None or not scores

    def _head(self, n: int) -> list[str]:
        """The order's first ``n`` ids or more (a prefix ordered so far may be longer; never shorter)."""
        if self._complete or n <= len(self._order):
            return self._order
        scores = self._scores
        if n >= len(scores):
            self._order, self._complete = _ordered(list(scores), scores, self._legs), True
            return self._order
        by_score = sorted(scores, key=scores.__getitem__, reverse=True)
        threshold, end = scores[by_score[n - 1]], n
        while end < len(by_score) and scores[by_score[end]] == threshold:  # ties with the n-th take part
            end += 1
        self._order = _ordered(by_score[:end], scores, self._legs)
        return self._order

    @property
    def ids(self) -> list[str]:
        return list(self._head(len(self)))

    def __len__(self) -> int:
        return len(self._order) if self._complete else len(self._scores)

    @overload
    def __getitem__(self, index: int) -> FusedHit: ...

    @overload
    def __getitem__(self, index: slice) -> list[FusedHit]: ...

    def __getitem__(self, index: int | slice) -> FusedHit | list[FusedHit]:
        if isinstance(index, slice):
            wanted = range(*index.indices(len(self)))
            order = self._head(max(wanted) + 1) if wanted else []
            return [FusedHit(*p) for p in self.provenances_of([order[i] for i in wanted])]
        size = len(self)
        if not -size <= index < size:
            raise IndexError("fused list index out of range")
        position = index if index >= 0 else size + index
        return self._hit(self._head(position + 1)[position])

    def __iter__(self) -> Iterator[FusedHit]:
        return (self._hit(doc_id) for doc_id in self._head(len(self)))

    def top_ids(self, n: int) -> list[str]:
        """The first ``n`` ids of the order (fewer when the list is shorter)."""
        return self._head(n)[:n] if n > 0 else []

    def provenances(self, start: int, stop: int) -> list[Provenance]:
        """Hits ``start`` to ``stop`` of the order (clamped to the list) as provenance tuples: a page."""
        start, stop = max(start, 0), min(stop, len(self))
        if start >= stop:
            return []
        return self.provenances_of(self._head(stop)[start:stop])

    def provenances_of(self, doc_ids: Sequence[str]) -> list[Provenance]:
        """Fused documents' scores and per-leg provenance (every id must be in the list), in one pass."""
        fused, best, legs = self._scores, self._best, self._legs.items()
        out: list[Provenance] = []
        for doc_id in doc_ids:
            ranks: dict[str, int] = {}
            leg_scores: dict[str, float] = {}
            for leg, (index, rank_of, scores) in legs:
                rank = index.get(doc_id)
                if rank is not None:
                    if rank_of is not None:
                        rank = rank_of[rank]
                    ranks[leg], leg_scores[leg] = rank, scores[rank - 1]
            score = fused[doc_id]
            normalized = score / best if best > 0 else 0.0
            normalized = 0.0 if normalized < 0.0 else 1.0 if normalized > 1.0 else normalized
            out.append((doc_id, score, normalized, ranks, leg_scores))
        return out

    def keep(self, wanted: Callable[[str], bool]) -> FusedList:
        """The same fusion with only the ids ``wanted`` accepts (their scores and ranks unchanged)."""
        order = [doc_id for doc_id in self._head(len(self)) if wanted(doc_id)]
        return FusedList(self._scores, self._legs, self._best, order, overlap=self._overlap)

    def overlap(self) -> int:
        """How many documents every leg found (0 with fewer than two legs), before any :meth:`keep` (the
        fusion counts them while it sums)."""
        return self._overlap

    def provenance(self, doc_id: str) -> Provenance:
        """One fused document's scores and per-leg provenance (``doc_id`` must be in the list)."""
        return self.provenances_of((doc_id,))[0]

    def _hit(self, doc_id: str) -> FusedHit:
        return FusedHit(*self.provenance(doc_id))


def _length(leg: str, ids: Sequence[str], scores: Sequence[float]) -> int:
    """The leg's length; its two columns must be as long as each other."""
    n = len(ids)
    if len(scores) != n:
        raise ValueError(f"leg {leg!r}: {n} ids but {len(scores)} scores")
    return n


def _column_ranks(ids: Sequence[str]) -> dict[str, int]:
    """id -> rank, a duplicate id keeping its first (best) rank (then the map is built over the reversed
    column, so the first occurrence is written last and wins)."""
    n = len(ids)
    ranks = dict(zip(ids, range(1, n + 1), strict=True))
    if len(ranks) < n:  # a duplicate id: written again at a later rank
        ranks = dict(zip(reversed(ids), range(n, 0, -1), strict=True))
    return ranks


def _leg_maps(legs: Mapping[str, LegColumns]) -> dict[str, _Leg]:
    """Each leg kept with its id -> rank map (:func:`_column_ranks`)."""
    out: dict[str, _Leg] = {}
    for leg, (ids, scores) in legs.items():
        _length(leg, ids, scores)
        out[leg] = (_column_ranks(ids), None, scores)
    return out


def _summed(parts: list[dict[str, float]]) -> tuple[dict[str, float], int]:
    """id -> the sum of its values over the parts, added part by part in order (with two parts, exactly the
    two terms' sum), and how many ids every part has. Each further part is merged into the total at once
    (C-level), then only the ids in both are added one by one."""
    if not parts:
        return {}, 0
    total = parts[0]  # (never written to: each merge below makes a new dict)
    common: set[str] | None = None
    for part in parts[1:]:
        both = total.keys() & part.keys()
        merged = total | part
        for doc_id in both:
            merged[doc_id] = total[doc_id] + part[doc_id]
        total = merged
        common = both if common is None else common.intersection(part)
    return total, len(common) if common is not None else 0


def _ordered(doc_ids: list[str], scored: dict[str, float], legs: dict[str, _Leg]) -> list[str]:
    """``doc_ids`` in the fused order: higher score first; a tie is broken by more legs, then the better best
    rank, then the id. A few ids (the head of the order: a page's worth) are sorted by one key tuple each
    (:func:`_head_keys`). Many are sorted once per criterion, least significant first, each keyed by a dict
    lookup (C-level): ties are the rule, not the exception (with equal weights, rank r in one leg ties rank r
    in the other), and this takes a third of the time of sorting a tuple built per document."""
    found = [leg for leg in legs.values() if leg[0]]
    if 4 * len(doc_ids) < sum(len(leg[0]) for leg in found):
        return sorted(doc_ids, key=_head_keys(doc_ids, scored, found).__getitem__)
    order = sorted(doc_ids)
    if len(found) == 1:  # one leg: every document has one, and its rank there is its best
        order.sort(key=_rank_map(found[0]).__getitem__)
    elif found:
        best, found_in = _tie_breaks(found)
        order.sort(key=best.__getitem__)
        order.sort(key=found_in.__getitem__, reverse=True)
    order.sort(key=scored.__getitem__, reverse=True)  # (reverse=True keeps equal keys in their order)
    return order


def _head_keys(
    doc_ids: list[str], scored: dict[str, float], legs: list[_Leg]
) -> dict[str, tuple[float, int, int, str]]:
    """id -> its sort key in the fused order: (-score, -legs that found it, best rank, id)."""
    keys: dict[str, tuple[float, int, int, str]] = {}
    for doc_id in doc_ids:
        found_in = best = 0
        for index, rank_of, _ in legs:
            rank = index.get(doc_id)
            if rank is not None:
                if rank_of is not None:
                    rank = rank_of[rank]
                if not found_in or rank < best:
                    best = rank
                found_in += 1
        keys[doc_id] = (-scored[doc_id], -found_in, best, doc_id)
    return keys


def _tie_breaks(legs: list[_Leg]) -> tuple[dict[str, int], dict[str, int]]:
    """id -> its best (lowest) rank over the legs, and id -> how many legs found it, for every id: dicts
    merged a leg at a time."""
    rank_maps = [_rank_map(leg) for leg in legs]
    best = rank_maps[0]
    for ranks in rank_maps[1:]:
        merged = {**ranks, **best}
        for doc_id in ranks.keys() & best.keys():
            merged[doc_id] = min(ranks[doc_id], best[doc_id])
        best = merged
    return best, Counter(chain.from_iterable(rank_maps))


@functools.lru_cache(maxsize=64)
def _rrf_terms(weight: float, k: int, n: int) -> tuple[float, ...]:
    """``weight / (k + rank)`` for rank 1..n (at index rank - 1): the same few (weight, k, window) every
    search."""
    return tuple(weight / (k + rank) for rank in range(1, n + 1))


@functools.lru_cache(maxsize=64)
def _term_ranks(weight: float, k: int, n: int) -> dict[float, int]:
    """RRF term -> its rank, for the terms of :func:`_rrf_terms` (fewer entries than ``n`` when some terms
    are equal: a weight so small that they round together)."""
    return {term: rank for rank, term in enumerate(_rrf_terms(weight, k, n), start=1)}


def _rrf(legs: Mapping[str, LegColumns], *, k: int, weights: Mapping[str, float] | None) -> FusedList:
    if k < 1:
        raise ValueError("k must be >= 1")
    w = _validate(legs, weights)
    kept: dict[str, _Leg] = {}
    parts = []
    for leg, (ids, scores) in legs.items():
        n = _length(leg, ids, scores)
        terms = _rrf_terms(w[leg], k, n)
        index = dict(zip(ids, terms, strict=True))
        rank_of = _term_ranks(w[leg], k, n)
        if len(index) == n and len(rank_of) == n:  # no duplicate id, every term names one rank
            kept[leg] = (index, rank_of, scores)
            parts.append(index)
            continue
        ranks = _column_ranks(ids)
        kept[leg] = (ranks, None, scores)
        parts.append({doc_id: terms[rank - 1] for doc_id, rank in ranks.items()})
    fused, common = _summed(parts)
    return FusedList(fused, kept, math.fsum(w[leg] / (k + 1) for leg in legs), overlap=common)


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
    for leg, (ranks, _, scores) in maps.items():
        if not ranks:
            continue
        normed = normalise([scores[rank - 1] for rank in ranks.values()])
        weight = w[leg]
        parts.append(dict(zip(ranks, [weight * value for value in normed], strict=True)))
        best += weight * max(normed)
    fused, common = _summed(parts)  # (an empty leg has no part: then no document is in every leg)
    return FusedList(fused, maps, best, overlap=common if len(parts) == len(maps) else 0)


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


def tail_provenance(
    doc_id: str,
    leg: str,
    rank: int,
    raw_score: float,
    *,
    method: FusionMethod,
    k: int,
    weights: Mapping[str, float],
) -> Provenance:
    """A document ranked below a fused head by one leg alone (a walk's BM25 tail, ``rank`` in that leg): what
    fusion gives it from that leg (RRF: ``w / (k + rank)``; the score fusions normalise within the head and
    give it 0), normalised against the best possible score like a fused hit."""
    if method == "rrf":
        best = math.fsum(w / (k + 1) for w in weights.values())
        score = weights[leg] / (k + rank)
    else:
        best, score = 1.0, 0.0
    return (doc_id, score, min(score / best, 1.0) if best > 0 else 0.0, {leg: rank}, {leg: raw_score})


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
