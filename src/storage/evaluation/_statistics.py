"""Scoring and choosing fusion settings from judged queries, honestly. Pure: no I/O (the shell is ``_runs``).

::

    legs (each query's BM25 and kNN lists, retrieved once) ─fuse every setting─▶ nDCG@10 per (setting, query)
        ─k-fold CV─▶ what a new query can expect from choosing on judgments ─paired tests─▶ change or keep

- **Fusion** of a setting re-uses the client's own functions (:func:`storage._fusion.methods.fused_list`) on the
  recorded lists cut to the setting's window: a grid of a few hundred settings over 300 queries costs
  seconds, not a search per setting.
- **Cross-validation** over queries: each fold's setting is chosen on the other folds' queries and scored on
  its own, so the estimate is what choosing on judgments gives a query that did not choose (the best of the
  grid on the queries that chose it is biased up).
- **Paired tests** against the current setting, query by query: a bootstrap confidence interval on the gain
  and a randomization (sign-flip) test. A change is recommended only when it is significant.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._errors import ConfigurationError
from .._fusion.methods import DEFAULT_RRF_K, FusionMethod, LegColumns, fused_list
from .._fusion.setting import FusionSetting

__all__ = [
    "MIN_QUERIES",
    "CrossValidation",
    "Paired",
    "cross_validate",
    "default_grid",
    "fold_of",
    "fuse_top",
    "leg_only",
    "measure",
    "ndcg_at_10",
    "paired_test",
    "score_matrix",
    "switch_if_significant",
    "unique",
]

#: Fewer judged queries than this: the choice is not trustworthy (one or two queries swing a fold's mean by
#: more than the differences between settings); tuning reports, warns and never applies.
MIN_QUERIES = 20


def default_grid(
    *,
    windows: Sequence[int] = (20, 50, 100),
    rrf_ks: Sequence[int] = (5, 10, 20, 40, 60, 100),
    weights: Sequence[tuple[float, float]] = ((1, 1), (1, 0.75), (0.75, 1), (1, 0.5), (0.5, 1), (1, 0.25), (0.25, 1)),
    methods: Sequence[FusionMethod] = ("rrf", "linear_minmax", "linear_zscore", "dbsf"),
) -> list[FusionSetting]:
    """The settings tried by default: every method, RRF k, weight pair and window (189), plus each leg alone
    (a corpus where one leg is far better should be allowed to say so)."""
    grid: list[FusionSetting] = []
    for window in windows:
        for method in methods:
            for k in rrf_ks if method == "rrf" else (DEFAULT_RRF_K,):
                grid += [FusionSetting(method, k, float(b), float(n), window) for b, n in weights]
    top = max(windows)
    grid += [FusionSetting("rrf", DEFAULT_RRF_K, 1.0, 0.0, top), FusionSetting("rrf", DEFAULT_RRF_K, 0.0, 1.0, top)]
    return grid


def fuse_top(legs: Mapping[str, LegColumns], setting: FusionSetting, n: int = 10) -> list[str]:
    """The first ``n`` ids of ``legs`` (each cut to the setting's window) fused with ``setting``."""
    cut = {leg: (ids[: setting.window], scores[: setting.window]) for leg, (ids, scores) in legs.items()}
    weights = {leg: setting.weights[leg] for leg in cut}
    return fused_list(cut, method=setting.method, k=setting.k, weights=weights).top_ids(n)


def ndcg_at_10(qrels: Mapping[str, Mapping[str, int]], ranked: Mapping[str, Sequence[str]]) -> dict[str, float]:
    """nDCG@10 of each judged query (0.0 for a judged query with no ranking), by ir-measures (the ``eval``
    extra)."""
    return _per_query("nDCG@10", qrels, ranked)


def measure(qrels: Mapping[str, Mapping[str, int]], ranked: Mapping[str, Sequence[str]]) -> tuple[float, float]:
    """The mean nDCG@10 and Recall@100 over the judged queries (a query with no ranking counts as 0), each
    rounded to four places: every entry point (``evaluate``, ``tune``, the benchmarks) scores this way."""
    ndcg, recall = _per_query("nDCG@10", qrels, ranked), _per_query("R@100", qrels, ranked)
    return _mean(ndcg.values()), _mean(recall.values())


def _mean(values: Iterable[float]) -> float:
    items = list(values)
    return round(math.fsum(items) / len(items), 4) if items else 0.0


def _per_query(
    measure_name: str, qrels: Mapping[str, Mapping[str, int]], ranked: Mapping[str, Sequence[str]]
) -> dict[str, float]:
    try:
        import ir_measures
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ConfigurationError("evaluation needs the 'eval' extra: pip install 'hybrid-search-es[eval]'") from exc

    run = {qid: {doc: float(len(ids) - i) for i, doc in enumerate(ids)} for qid, ids in ranked.items() if ids}
    out = dict.fromkeys(qrels, 0.0)
    for metric in ir_measures.iter_calc([ir_measures.parse_measure(measure_name)], qrels, run):
        out[metric.query_id] = float(metric.value)
    return out


def fold_of(queries: Sequence[str], folds: int, seed: int) -> list[int]:
    """Each query's fold (0..folds-1): a seeded shuffle dealt round-robin, so folds differ by one at most."""
    order = list(range(len(queries)))
    random.Random(seed).shuffle(order)
    out = [0] * len(queries)
    for position, query in enumerate(order):
        out[query] = position % folds
    return out


@dataclass(frozen=True, slots=True)
class CrossValidation:
    """What k-fold cross-validation found."""

    #: Per query (in the matrix's column order): the held-out score of the setting its fold chose.
    held_out: list[float]
    #: Per fold: the setting (row index) chosen on the other folds' queries.
    chosen: list[int]
    #: Per query: its fold.
    folds: list[int]

    @property
    def mean(self) -> float:
        return float(np.mean(self.held_out)) if self.held_out else 0.0


def best_on(matrix: np.ndarray[Any, np.dtype[np.float64]], queries: Sequence[int], prefer: int) -> int:
    """The row with the best mean over ``queries``; a tie keeps ``prefer`` (the current setting), then the
    first row."""
    means = matrix[:, list(queries)].mean(axis=1)
    best = float(means.max())
    return prefer if math.isclose(float(means[prefer]), best, abs_tol=1e-12) else int(np.argmax(means))


def switch_if_significant(
    alpha: float = 0.05, *, resamples: int = 2000, seed: int = 0
) -> Callable[[np.ndarray[Any, np.dtype[np.float64]], Sequence[int], int], int]:
    """The choice ``tune`` makes, as a chooser for :func:`cross_validate`: the best row on the queries given,
    but only if it beats ``prefer`` (the current setting) significantly on them; else ``prefer``. Picking
    the plain best of a few hundred near-equal settings fits the noise of the queries that choose (on SciFact
    it lost 0.013 nDCG@10 on held-out folds against keeping the default); cross-validating the whole rule
    measures what tuning really does."""

    def choose(matrix: np.ndarray[Any, np.dtype[np.float64]], queries: Sequence[int], prefer: int) -> int:
        best = best_on(matrix, queries, prefer)
        if best == prefer:
            return prefer
        columns = list(queries)
        test = paired_test(matrix[best, columns], matrix[prefer, columns], resamples=resamples, seed=seed)
        return best if test.significant(alpha) and test.gain > 0 else prefer

    return choose


def cross_validate(
    matrix: np.ndarray[Any, np.dtype[np.float64]],
    folds: Sequence[int],
    *,
    prefer: int = 0,
    choose: Callable[[np.ndarray[Any, np.dtype[np.float64]], Sequence[int], int], int] = best_on,
) -> CrossValidation:
    """``matrix[setting, query]`` scores; ``folds[query]`` its fold. For each fold, ``choose`` sees only the
    other folds' queries, and the chosen row is scored on the fold's own queries."""
    n_folds = max(folds) + 1 if folds else 0
    held_out = [0.0] * matrix.shape[1]
    chosen: list[int] = []
    for fold in range(n_folds):
        test = [q for q, f in enumerate(folds) if f == fold]
        train = [q for q, f in enumerate(folds) if f != fold]
        row = choose(matrix, train, prefer)
        chosen.append(row)
        for q in test:
            held_out[q] = float(matrix[row, q])
    return CrossValidation(held_out=held_out, chosen=chosen, folds=list(folds))


@dataclass(frozen=True, slots=True)
class Paired:
    """A paired comparison of per-query scores: ``candidate - baseline``."""

    gain: float
    #: The 95 % bootstrap interval of the mean gain (percentiles of resampled queries).
    low: float
    high: float
    #: Two-sided randomization test: how often flipping the signs of the per-query differences at random
    #: gives a mean gain at least this large.
    p_value: float
    queries: int = field(default=0)

    def significant(self, alpha: float = 0.05) -> bool:
        return self.p_value < alpha and (self.low > 0 or self.high < 0)


def paired_test(
    candidate: Sequence[float] | np.ndarray[Any, np.dtype[np.float64]],
    baseline: Sequence[float] | np.ndarray[Any, np.dtype[np.float64]],
    *,
    resamples: int = 10_000,
    seed: int = 0,
) -> Paired:
    """Bootstrap interval and randomization p-value of the mean per-query gain of ``candidate``."""
    diff = np.asarray(candidate, dtype=np.float64) - np.asarray(baseline, dtype=np.float64)
    n = diff.size
    if n == 0:
        return Paired(0.0, 0.0, 0.0, 1.0, 0)
    rng = np.random.default_rng(seed)
    observed = float(diff.mean())
    boot = diff[rng.integers(0, n, size=(resamples, n))].mean(axis=1)
    low, high = (float(x) for x in np.percentile(boot, [2.5, 97.5]))
    signs = rng.choice(np.array([-1.0, 1.0]), size=(resamples, n))
    flipped = np.abs((signs * diff).mean(axis=1))
    p_value = float((np.count_nonzero(flipped >= abs(observed) - 1e-12) + 1) / (resamples + 1))
    return Paired(observed, low, high, p_value, n)


def score_matrix(
    grid: Sequence[FusionSetting],
    legs: Mapping[str, Mapping[str, LegColumns]],
    qrels: Mapping[str, Mapping[str, int]],
    *,
    on_setting: Callable[[], None] | None = None,
) -> tuple[list[str], np.ndarray[Any, np.dtype[np.float64]]]:
    """(the judged query ids, ``matrix[setting, query]`` = nDCG@10 of the query fused with the setting)."""
    queries = sorted(qrels)
    matrix = np.zeros((len(grid), len(queries)), dtype=np.float64)
    for row, setting in enumerate(grid):
        ranked = {qid: fuse_top(legs[qid], setting) for qid in queries if qid in legs}
        scores = ndcg_at_10({q: qrels[q] for q in queries}, ranked)
        matrix[row] = [scores[q] for q in queries]
        if on_setting is not None:
            on_setting()
    return queries, matrix


def leg_only(legs: Mapping[str, Mapping[str, LegColumns]], leg: str) -> dict[str, list[str]]:
    """Each query's ranking by one leg alone (its top ten)."""
    return {qid: list(by_leg[leg][0][:10]) for qid, by_leg in legs.items() if leg in by_leg}


def unique(settings: Iterable[FusionSetting]) -> list[FusionSetting]:
    return list(dict.fromkeys(settings))
