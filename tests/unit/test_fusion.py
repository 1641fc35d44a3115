"""Properties of the pure fusion core (hypothesis) and a few worked examples."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from storage._fusion.methods import fused_list, rrf
from storage.fusion import LegHit, fuse

ids = st.text(alphabet="abcdefghij", min_size=1, max_size=3)
ranked = st.lists(ids, unique=True, max_size=15).map(
    lambda xs: [LegHit(x, float(len(xs) - i)) for i, x in enumerate(xs)]
)
methods = st.sampled_from(["rrf", "linear_minmax", "linear_zscore", "dbsf"])


@given(bm25=ranked, knn=ranked, method=methods)
def test_documents_absent_from_a_leg_get_nothing_from_it(bm25: list[LegHit], knn: list[LegHit], method: str) -> None:
    fused = fuse({"bm25": bm25, "knn": knn}, method=method)  # type: ignore[arg-type]
    only_bm25 = fuse({"bm25": bm25}, method=method)  # type: ignore[arg-type]
    knn_ids = {h.id for h in knn}
    by_id = {h.id: h for h in fused}
    for h in only_bm25:
        if h.id not in knn_ids:
            assert by_id[h.id].score == pytest.approx(h.score)
            assert set(by_id[h.id].ranks) == {"bm25"}


@given(bm25=ranked, knn=ranked)
def test_rrf_is_the_sum_of_weighted_reciprocal_ranks(bm25: list[LegHit], knn: list[LegHit]) -> None:
    weights = {"bm25": 0.3, "knn": 2.0}
    for hit in rrf({"bm25": bm25, "knn": knn}, k=10, weights=weights):
        expected = sum(weights[leg] / (10 + rank) for leg, rank in hit.ranks.items())
        assert math.isclose(hit.score, expected)
        assert 0 <= hit.normalized_score <= 1


@given(bm25=ranked, knn=ranked, method=methods)
def test_fused_order_is_deterministic_and_independent_of_leg_order(
    bm25: list[LegHit], knn: list[LegHit], method: str
) -> None:
    a = fuse({"bm25": bm25, "knn": knn}, method=method)  # type: ignore[arg-type]
    b = fuse({"knn": knn, "bm25": bm25}, method=method)  # type: ignore[arg-type]
    assert [h.id for h in a] == [h.id for h in b]
    assert [h.id for h in a] == [h.id for h in fuse({"bm25": bm25, "knn": knn}, method=method)]  # type: ignore[arg-type]
    assert len(a) == len({h.id for h in bm25} | {h.id for h in knn})


@given(rank=st.integers(min_value=1, max_value=40), k=st.integers(min_value=1, max_value=100))
def test_with_equal_ranks_a_document_found_by_both_legs_outranks_a_single_leg_one(rank: int, k: int) -> None:
    filler = [LegHit(f"f{i}", 0.0) for i in range(rank - 1)]
    bm25 = [*filler, LegHit("both", 1.0), LegHit("solo", 1.0)]
    knn = [*[LegHit(f"g{i}", 0.0) for i in range(rank - 1)], LegHit("both", 1.0)]
    order = [h.id for h in rrf({"bm25": bm25, "knn": knn}, k=k)]
    assert order.index("both") < order.index("solo")
    # and a tie in score is broken by the number of legs, then the best rank, then the id
    tie = rrf({"bm25": [LegHit("x", 1), LegHit("y", 1)], "knn": [LegHit("y", 1), LegHit("x", 1)]})
    assert [h.id for h in tie] == ["x", "y"]


def test_weights_apply() -> None:
    legs = {"bm25": [LegHit("a", 9.0), LegHit("b", 1.0)], "knn": [LegHit("b", 0.9), LegHit("a", 0.1)]}
    assert fuse(legs, weights={"bm25": 1.0, "knn": 1.0})[0].id == "a"  # tie broken by id
    assert fuse(legs, weights={"bm25": 1.0, "knn": 2.0})[0].id == "b"
    assert fuse(legs, weights={"bm25": 3.0, "knn": 1.0})[0].id == "a"
    assert fuse(legs, weights={"bm25": 0.0, "knn": 1.0})[0].id == "b"


def test_normalized_score_is_one_for_a_document_first_in_every_leg() -> None:
    legs = {"bm25": [LegHit("a", 3.0), LegHit("b", 1.0)], "knn": [LegHit("a", 0.9)]}
    for method in ("rrf", "linear_minmax", "linear_zscore", "dbsf"):
        top = fuse(legs, method=method)[0]  # type: ignore[arg-type]
        assert top.id == "a"
        assert 0 < top.normalized_score <= 1
    assert fuse(legs)[0].normalized_score == pytest.approx(1.0)


def test_score_fusion_normalises_each_leg() -> None:
    legs = {"bm25": [LegHit("a", 30.0), LegHit("b", 10.0)], "knn": [LegHit("b", 0.9), LegHit("a", 0.8)]}
    by_id = {h.id: h.score for h in fuse(legs, method="linear_minmax")}
    assert by_id == {"a": pytest.approx(1.0), "b": pytest.approx(1.0)}
    dbsf = fuse({"bm25": [LegHit("a", 1.0), LegHit("b", 0.0)]}, method="dbsf")
    assert all(0 <= h.score <= 1 for h in dbsf)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"k": 0}, "k must be"),
        ({"weights": {"bm25": -1.0}}, "weight"),
        ({"weights": {"x": 1.0}}, "unknown legs"),
        ({"method": "max"}, "unknown fusion"),
    ],
)
def test_bad_fusion_parameters_are_rejected(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        fuse({"bm25": [LegHit("a", 1.0)]}, **kwargs)  # type: ignore[arg-type]


def test_empty_legs_fuse_to_nothing() -> None:
    assert fuse({"bm25": [], "knn": []}) == []


@given(bm25=ranked, knn=ranked, method=methods, start=st.integers(0, 30), size=st.integers(0, 30))
def test_the_lazy_fused_list_reads_like_the_materialised_one(
    bm25: list[LegHit], knn: list[LegHit], method: str, start: int, size: int
) -> None:
    legs = {"bm25": bm25, "knn": knn}
    full = fuse(legs, method=method, k=10)  # type: ignore[arg-type]
    columns = {leg: ([h.id for h in hits], [h.score for h in hits]) for leg, hits in legs.items()}
    lazy = fused_list(columns, method=method, k=10)  # type: ignore[arg-type]
    assert len(lazy) == len(full)
    assert lazy[start : start + size] == full[start : start + size]  # the head ordered first, on its own
    fresh = fused_list(columns, method=method, k=10)  # type: ignore[arg-type]
    page = fresh.provenances(start, start + size)  # a page read as tuples: FusedHit's fields, in its order
    assert page == [(h.id, h.score, h.normalized_score, h.ranks, h.leg_scores) for h in full[start : start + size]]
    assert fresh.top_ids(size) == [h.id for h in full[:size]]
    if start < len(full):
        assert lazy[start] == full[start]
    assert lazy.ids == [h.id for h in full]  # then the rest
    if full:
        assert lazy[-1] == full[-1]
        assert fused_list(columns, method=method, k=10)[-1] == full[-1]  # type: ignore[arg-type]
        with pytest.raises(IndexError):
            lazy[len(full)]
    kept = lazy.keep(lambda doc_id: doc_id.startswith("a"))
    assert list(kept) == [h for h in full if h.id.startswith("a")]  # same scores, same order


leg_with_duplicates = st.lists(st.tuples(ids, st.sampled_from([0.0, 0.5, 1.0, 2.0])), max_size=15)


@given(
    bm25=leg_with_duplicates,
    knn=leg_with_duplicates,
    method=methods,
    # (a weight so small that RRF terms round together: 1e-310 / (k + r) is subnormal, 5e-324 / (k + r) is 0)
    weights=st.fixed_dictionaries(
        {"bm25": st.sampled_from([0.0, 5e-324, 0.5, 1.0]), "knn": st.sampled_from([0.0, 1e-310, 1.0, 2.0])}
    ),
)
def test_the_fused_order_is_score_then_legs_then_best_rank_then_id_and_a_duplicate_keeps_its_first_rank(
    bm25: list[tuple[str, float]], knn: list[tuple[str, float]], method: str, weights: dict[str, float]
) -> None:
    columns = {"bm25": ([d for d, _ in bm25], [s for _, s in bm25]), "knn": ([d for d, _ in knn], [s for _, s in knn])}
    fused = fused_list(columns, method=method, k=10, weights=weights)  # type: ignore[arg-type]
    first: dict[str, dict[str, tuple[int, float]]] = {}
    for leg, (doc_ids, scores) in columns.items():
        for rank, (doc_id, score) in enumerate(zip(doc_ids, scores, strict=True), start=1):
            first.setdefault(doc_id, {}).setdefault(leg, (rank, score))
    hits = list(fused)
    for hit in hits:
        assert dict(hit.ranks) == {leg: rank for leg, (rank, _) in first[hit.id].items()}
        assert dict(hit.leg_scores) == {leg: score for leg, (_, score) in first[hit.id].items()}
    keys = [(-h.score, -len(h.ranks), min(h.ranks.values()), h.id) for h in hits]
    assert keys == sorted(keys)
    for n in (1, 3, 10):  # a head read first (ordered on its own, ties at its edge included) is the same
        assert fused_list(columns, method=method, k=10, weights=weights)[:n] == hits[:n]  # type: ignore[arg-type]
    assert fused.overlap() == len(set(columns["bm25"][0]) & set(columns["knn"][0]))
