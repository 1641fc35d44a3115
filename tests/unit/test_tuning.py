"""The pure core of fusion tuning: honest cross-validation, paired tests, the grid, and where a search's
fusion comes from (call > settings > the index's stored setting > defaults)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from storage import SearchSettings
from storage._fusion.setting import FusionInForce, FusionSetting, configured_fusion
from storage._search.plan import plan_search
from storage.evaluation._statistics import cross_validate, default_grid, fold_of, fuse_top, paired_test
from storage.types import SearchRequest

STORED = FusionSetting(method="dbsf", k=40, bm25_weight=1.0, knn_weight=0.25, window=100)


@given(st.integers(2, 60), st.integers(2, 10), st.integers(0, 1000))
def test_cross_validation_never_scores_a_fold_on_the_queries_that_chose_its_setting(
    queries: int, folds: int, seed: int
) -> None:
    folds = min(folds, queries)
    matrix = np.random.default_rng(seed).random((7, queries))
    assignment = fold_of([f"q{i}" for i in range(queries)], folds, seed)
    seen: list[set[int]] = []

    def spy(m: np.ndarray, train: list[int], prefer: int) -> int:  # type: ignore[type-arg]
        seen.append(set(train))
        return int(np.argmax(m[:, train].mean(axis=1)))

    cv = cross_validate(matrix, assignment, choose=spy)
    assert len(seen) == folds
    for fold, train in enumerate(seen):
        scored = {q for q, f in enumerate(assignment) if f == fold}
        assert scored
        assert not scored & train  # the held-out queries never chose
        assert scored | train == set(range(queries))
        for q in scored:
            assert cv.held_out[q] == matrix[cv.chosen[fold], q]


def test_the_cross_validated_estimate_is_not_the_best_of_the_grid_on_the_queries_that_chose_it() -> None:
    # Each setting is perfect on one query and mediocre elsewhere: in-sample the best looks better than any
    # setting is for a new query. Leave-one-out sees that.
    n = 10
    matrix = np.full((n, n), 0.5)
    np.fill_diagonal(matrix, 1.0)
    cv = cross_validate(matrix, list(range(n)))
    assert float(matrix.mean(axis=1).max()) == pytest.approx(0.55)
    assert cv.mean == pytest.approx(0.5)
    assert all(chosen != fold for fold, chosen in enumerate(cv.chosen))


def test_folds_are_balanced_and_seeded() -> None:
    folds = fold_of([f"q{i}" for i in range(23)], 5, seed=3)
    assert sorted(folds.count(f) for f in range(5)) == [4, 4, 5, 5, 5]
    assert folds == fold_of([f"q{i}" for i in range(23)], 5, seed=3)
    assert folds != fold_of([f"q{i}" for i in range(23)], 5, seed=4)


def test_paired_test_finds_a_real_gain_and_not_a_null_one() -> None:
    rng = np.random.default_rng(1)
    base = rng.random(200)
    better = paired_test(base + 0.05 + rng.normal(0, 0.02, 200), base)
    assert better.significant()
    assert better.low > 0
    assert better.gain == pytest.approx(0.05, abs=0.01)
    noise = np.abs(rng.normal(0, 0.05, 100))
    same = paired_test(base + np.concatenate([noise, -noise]), base)  # as much lost as gained
    assert not same.significant()
    assert paired_test(base, base).p_value == 1.0


def test_the_default_grid_covers_every_method_and_each_leg_alone() -> None:
    grid = default_grid()
    assert len(grid) == len(set(grid)) == 191
    assert {s.method for s in grid} == {"rrf", "linear_minmax", "linear_zscore", "dbsf"}
    assert FusionSetting("rrf", 10, 1.0, 0.0, 100) in grid
    assert FusionSetting("rrf", 10, 0.0, 1.0, 100) in grid
    assert FusionSetting() in grid  # the library's default


def test_a_leg_with_weight_zero_leaves_the_other_legs_order() -> None:
    legs = {"bm25": (["a", "b", "c"], [3.0, 2.0, 1.0]), "knn": (["c", "b", "x"], [0.9, 0.8, 0.7])}
    assert fuse_top(legs, FusionSetting(bm25_weight=1.0, knn_weight=0.0), n=3) == ["a", "b", "c"]
    assert fuse_top(legs, FusionSetting(bm25_weight=1.0, knn_weight=0.0, window=2), n=3) == ["a", "b", "c"]


def test_a_stored_setting_round_trips_and_a_broken_one_is_refused() -> None:
    assert FusionSetting.from_meta(STORED.to_meta()) == STORED
    for broken in ({"method": "nope"}, {"method": "rrf", "k": 0}, {"method": "rrf", "weights": {"knn": -1}}, 5, []):
        with pytest.raises(ValueError, match="not a fusion setting"):
            FusionSetting.from_meta(broken)


def _below(settings: SearchSettings, stored: FusionSetting | None) -> FusionInForce:
    return configured_fusion(settings.fusion_setting(), settings.fusion_explicit(), stored)


def test_precedence_call_over_settings_over_the_index_over_defaults() -> None:
    plain = SearchSettings()
    in_force = _below(plain, None)
    assert (in_force.setting, in_force.sources) == tuple(in_force)  # named, and unpacks as a pair
    setting, sources = in_force
    assert setting == FusionSetting()
    assert set(sources.values()) == {"default"}
    setting, sources = _below(plain, STORED)
    assert setting == STORED
    assert set(sources.values()) == {"index"}
    explicit = SearchSettings(rrf_k=7, knn_weight=2.0)  # (as ES_RRF_K / ES_KNN_WEIGHT would)
    setting, sources = _below(explicit, STORED)
    assert (setting.method, setting.k, setting.weights, setting.window) == ("dbsf", 7, {"bm25": 1.0, "knn": 2.0}, 100)
    assert sources == {"method": "index", "k": "settings", "weights": "settings", "window": "index"}
    request = SearchRequest(query="q", fusion="rrf", weights={"bm25": 3.0}, window=20)
    plan = plan_search(request, explicit, has_reranker=False, below=_below(explicit, STORED))
    assert (plan.method, plan.k, plan.weights, plan.window) == ("rrf", 7, {"bm25": 3.0, "knn": 2.0}, 20)
    assert plan.fusion_sources == {"method": "call", "k": "settings", "weights": "call", "window": "call"}
