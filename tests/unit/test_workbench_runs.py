"""Two runs compared query by query: pure arithmetic on the scores each run kept."""

from __future__ import annotations

from storage.workbench._runs import Run, compare_runs

SETTING = {"method": "rrf", "k": 60, "weights": {"bm25": 1.0, "knn": 1.0}, "window": 100}


def _run(name: str, per_query: dict[str, float], *, mode: str = "hybrid") -> Run:
    return Run(
        name=name,
        mode=mode,  # type: ignore[arg-type]
        setting=SETTING if mode == "hybrid" else {},
        in_force=mode == "hybrid",
        per_query=per_query,
        texts={q: f"text of {q}" for q in per_query},
    )


def test_a_comparison_counts_wins_losses_and_ties_on_the_queries_both_runs_measured() -> None:
    a = _run("a", {"1": 0.5, "2": 0.8, "3": 0.3, "old": 1.0})
    b = _run("b", {"1": 0.7, "2": 0.6, "3": 0.3, "new": 0.0}, mode="bm25")
    c = compare_runs(a, b)
    assert (c["queries"], c["wins"], c["losses"], c["ties"]) == (3, 1, 1, 1)
    assert (c["only_in_a"], c["only_in_b"]) == (1, 1)
    assert [r["query_id"] for r in c["rows"]] == ["1", "3", "2"]  # best gain first
    assert [r["delta"] for r in c["rows"]] == [0.2, 0.0, -0.2]
    assert (c["mean_a"], c["mean_b"]) == (round((0.5 + 0.8 + 0.3) / 3, 4), round((0.7 + 0.6 + 0.3) / 3, 4))
    assert c["rows"][0]["query"] == "text of 1"
    assert (c["a"]["label"], c["b"]["label"]) == ("rrf k=60 window=100 bm25:knn=1:1 (in force)", "bm25 alone")


def test_runs_with_no_query_in_common_compare_to_nothing_rather_than_dividing_by_zero() -> None:
    c = compare_runs(_run("a", {"1": 1.0}), _run("b", {"2": 0.0}))
    assert (c["queries"], c["mean_a"], c["mean_b"], c["rows"]) == (0, 0.0, 0.0, [])
