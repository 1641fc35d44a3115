"""The pure stages of the engine, without a server: plan, fuse, rerank ordering, respond."""

from __future__ import annotations

import itertools
from typing import Any, cast

import pytest
from elasticsearch import AsyncElasticsearch
from hypothesis import given
from hypothesis import strategies as st

from storage import (
    ConfigurationError,
    DependencyUnavailable,
    Document,
    IndexNotFound,
    InvalidQuery,
    SearchFailed,
    SearchSettings,
)
from storage._dsl.aggregations import parse_facets
from storage._fusion.methods import fused_list
from storage._fusion.setting import configured_fusion
from storage._search.fuse import fuse_legs, raise_if_failed
from storage._search.plan import plan_search
from storage._search.rerank import Ranked, order_by_scores, rerank_text
from storage._search.respond import build_response
from storage._search.state import LegOutcome, SearchState
from storage._transport.backend import Backend
from storage.types import RerankReport, SearchRequest, ShardReport

SETTINGS = SearchSettings(url="http://127.0.0.1:9200", index="docs")


def _plan(**kw: Any) -> Any:
    has_reranker = kw.pop("has_reranker", False)
    below = configured_fusion(SETTINGS.fusion_setting(), SETTINGS.fusion_explicit(), None)
    return plan_search(
        SearchRequest(query=kw.pop("query", "revenue guidance"), **kw), SETTINGS, has_reranker=has_reranker, below=below
    )


def _hits(*ids: str, tenant: str | None = None) -> list[dict[str, Any]]:
    """Leg hits as Elasticsearch returns them: ids and scores, the tenant as a doc-value field."""
    return [
        {"_id": i, "_score": 10.0 - n, **({"fields": {"tenant_id": [tenant]}} if tenant else {})}
        for n, i in enumerate(ids)
    ]


def _down() -> DependencyUnavailable:
    return DependencyUnavailable("down", dependency="embeddings")


def test_the_plan_stage_fills_defaults_from_the_settings_and_leaves_rerank_off() -> None:
    plan = _plan()
    assert plan.legs == ("bm25", "knn")
    assert (plan.method, plan.k, plan.window, plan.candidates) == ("rrf", 10, 50, 100)
    assert not plan.rerank
    assert plan.target == "docs"


def test_the_plan_stage_refuses_rerank_without_a_reranker_and_pages_past_the_candidates() -> None:
    with pytest.raises(ConfigurationError, match="RERANKER_PROVIDER"):
        _plan(rerank=True)
    with pytest.raises(InvalidQuery, match="reranked candidates"):
        _plan(rerank=True, has_reranker=True, rerank_candidates=5, limit=10)
    with pytest.raises(InvalidQuery, match="between 1 and 1000"):
        _plan(rerank=True, has_reranker=True, rerank_candidates=0)
    assert _plan(rerank=True, has_reranker=True).rerank_candidates == 50
    assert _plan(rerank=False, has_reranker=True).rerank_candidates == 0


@pytest.mark.parametrize("weight", [float("nan"), float("inf"), -0.5, "1", None])
def test_the_plan_stage_refuses_a_weight_that_is_not_a_finite_number_at_least_zero(weight: object) -> None:
    with pytest.raises(InvalidQuery, match="weights must be finite numbers >= 0"):
        _plan(weights={"bm25": weight})


def test_the_plan_stage_takes_zero_and_integer_weights() -> None:
    assert _plan(weights={"bm25": 0, "knn": 2}).weights == {"bm25": 0, "knn": 2}


def test_a_query_vector_needs_the_knn_leg_and_finite_numbers_and_alone_needs_knn_mode() -> None:
    assert _plan(mode="knn", query="", query_vector=[1, 0.5]).query_vector == (1.0, 0.5)
    assert _plan(query_vector=[0.1, 0.2]).text == "revenue guidance"  # hybrid: BM25 reads the text
    with pytest.raises(InvalidQuery, match="needs the kNN leg"):
        _plan(mode="bm25", query_vector=[0.1])
    for bad in ([], "0.1", [float("nan")], [True], [None]):
        with pytest.raises(InvalidQuery, match="query_vector must"):
            _plan(mode="knn", query_vector=bad)
    with pytest.raises(InvalidQuery, match="query is empty"):
        _plan(mode="hybrid", query="", query_vector=[0.1])  # the BM25 leg needs words


def test_similarities_need_the_knn_leg() -> None:
    assert _plan(similarities=True).similarities
    with pytest.raises(InvalidQuery, match="similarities needs the kNN leg"):
        _plan(mode="bm25", similarities=True)


def test_fuse_raises_only_when_nothing_can_be_fused() -> None:
    plan = _plan()
    ok, down = LegOutcome("bm25", hits=_hits("a")), LegOutcome("knn", error=_down())
    raise_if_failed(plan, {"bm25": ok, "knn": down})  # degraded, not failed
    with pytest.raises(SearchFailed) as info:
        raise_if_failed(_plan(strict=True), {"bm25": ok, "knn": down})
    assert set(info.value.leg_errors) == {"knn"}
    missing = {leg: LegOutcome(leg, error=IndexNotFound("gone")) for leg in ("bm25", "knn")}  # type: ignore[arg-type]
    with pytest.raises(IndexNotFound):
        raise_if_failed(plan, missing)


def test_fuse_counts_the_overlap_and_drops_other_tenants_by_their_doc_value() -> None:
    bm25 = LegOutcome("bm25", hits=_hits("a", "b"))
    fused = fuse_legs(_plan(), {"bm25": bm25, "knn": LegOutcome("knn", hits=_hits("b", "c"))})
    assert [h.id for h in fused.hits] == ["b", "a", "c"]
    assert fused.overlap == 1
    mixed = LegOutcome("bm25", hits=_hits("t1-doc", tenant="t1") + _hits("t2-doc", tenant="t2"))
    kept = fuse_legs(_plan(tenant_id="t1", mode="bm25"), {"bm25": mixed})
    assert [h.id for h in kept.hits] == ["t1-doc"]


@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, width=32), min_size=1, max_size=30))
def test_rerank_ordering_is_by_descending_score_and_ties_keep_the_fused_order(scores: list[float]) -> None:
    candidates = [f"d{i}" for i in range(len(scores))]
    ordered = order_by_scores(candidates, scores)
    assert sorted(doc_id for doc_id, _ in ordered) == sorted(candidates)
    for (a, sa), (b, sb) in itertools.pairwise(ordered):
        assert sa > sb or (sa == sb and int(a[1:]) < int(b[1:]))


def test_the_reranker_reads_title_and_text() -> None:
    assert rerank_text({"title": "T", "text": "body"}) == "T\nbody"
    assert rerank_text({"text": "body"}) == "body"
    assert rerank_text({"title": "only"}) == "only"


def test_respond_reports_a_failed_rerank_as_degraded_unless_a_leg_failed_first() -> None:
    plan = _plan()
    outcomes = {"bm25": LegOutcome("bm25", hits=_hits("a")), "knn": LegOutcome("knn", hits=_hits("a"))}
    state = SearchState(plan=plan, outcomes=outcomes)
    fused = fuse_legs(plan, outcomes)
    failed = RerankReport(ok=False, model="m", candidates=1, reason="timeout")
    res = build_response(plan, state, fused, Ranked(fused=fused.hits, report=failed), [])
    assert (res.degraded, res.degradation.reason, res.degradation.legs_failed, res.ordered_by) == (
        True,
        "rerank_timeout",
        [],
        "fusion",
    )
    outcomes["knn"] = LegOutcome("knn", error=_down())
    fused = fuse_legs(plan, outcomes)
    res = build_response(plan, state, fused, Ranked(fused=fused.hits, report=failed), [])
    assert (res.degradation.reason, res.degradation.legs_failed) == ("connection_error", ["knn"])
    ok = RerankReport(ok=True, model="m", candidates=1)
    fused = fuse_legs(plan, outcomes)
    res = build_response(plan, state, fused, Ranked(fused=fused.hits, report=ok), [])
    assert res.ordered_by == "rerank"


@pytest.mark.parametrize(("offset", "limit"), [(0, 3), (2, 3), (4, 3), (6, 2)])
def test_a_page_spans_the_reranked_head_then_the_fused_rest(offset: int, limit: int) -> None:
    ids = [f"d{i}" for i in range(8)]
    fused = fused_list({"bm25": (ids, [8.0 - i for i in range(8)])})
    head = order_by_scores(ids[:5], [0.1, 0.9, 0.5, 0.3, 0.7])  # d1 d4 d2 d3 d0, then d5 d6 d7
    expected = [doc_id for doc_id, _ in head] + ["d5", "d6", "d7"]
    page = Ranked(fused=fused, head=head).page(offset, limit)
    assert [hit[0] for hit, _ in page] == expected[offset : offset + limit]
    assert [score is None for _, score in page] == [hit[0] in ("d5", "d6", "d7") for hit, _ in page]
    assert [hit for hit, _ in Ranked(fused=fused).page(offset, limit)] == fused.provenances(offset, offset + limit)
    assert [hit[0] for hit, _ in Ranked(fused=fused).page(offset, limit)] == ids[offset : offset + limit]


def test_a_leg_reads_its_ranking_from_the_response_with_a_missing_score_as_zero() -> None:
    body = {"hits": {"hits": [{"_id": "a", "_score": 2.5, "_index": "i1"}, {"_id": "b", "_score": None}, {"_id": "c"}]}}
    leg = LegOutcome("bm25")
    leg.answered(body)
    assert (leg.ids, leg.scores, leg.index) == (["a", "b", "c"], [2.5, 0.0, 0.0], "i1")
    assert LegOutcome("bm25", hits=body["hits"]["hits"]).scores == [2.5, 0.0, 0.0]  # (built from hits: the same)


def test_a_failed_leg_has_no_ranking_and_no_hits_whichever_the_plan_keeps() -> None:
    answered = LegOutcome("knn")
    answered.answered({"hits": {"hits": _hits("a")}}, keep_hits=False)
    answered.failed(_down())
    for leg in (answered, LegOutcome("knn", error=_down())):
        assert (leg.ids, leg.scores, leg.kept()) == ([], [], [])


@pytest.mark.parametrize(
    ("request_kw", "kept"),
    [
        ({}, {"bm25": False, "knn": False}),
        ({"tenant_id": "t1"}, {"bm25": True, "knn": True}),
        ({"group_by": "ticker"}, {"bm25": True, "knn": True}),
        ({"diversity": 0.5}, {"bm25": True, "knn": True}),
    ],
)
def test_a_leg_lets_its_response_go_once_ranked_unless_a_later_stage_reads_its_hits(
    request_kw: dict[str, Any], kept: dict[str, bool]
) -> None:
    plan = _plan(**request_kw)
    for leg, keep in kept.items():
        outcome = LegOutcome(leg)  # type: ignore[arg-type]
        outcome.answered({"hits": {"hits": _hits("a", "b")}}, keep_hits=plan.keeps_hits(leg))
        assert outcome.ids == ["a", "b"]
        assert (outcome.hits is not None) is keep
        if not keep:
            with pytest.raises(RuntimeError, match="not kept"):
                outcome.kept()


@pytest.mark.parametrize(
    "body",
    [
        {"_shards": {"total": 1, "successful": 1, "skipped": 0, "failed": 0}, "timed_out": False},
        {"_shards": {"total": 3, "successful": 2, "skipped": 0, "failed": 1}, "timed_out": False},
        {"_shards": {"total": 2, "successful": 2, "skipped": 0, "failed": 0}, "timed_out": True},
        {"_shards": {"total": "2", "successful": 2.0, "failed": 0}},
    ],
)
def test_a_shard_report_without_failures_is_built_once_and_reads_as_a_fresh_one(body: dict[str, Any]) -> None:
    first, again = ShardReport.from_body(body), ShardReport.from_body(body)
    shards = body["_shards"]
    fresh = ShardReport(
        total=int(shards["total"]),
        successful=int(shards["successful"]),
        failed=int(shards["failed"]),
        skipped=int(shards.get("skipped", 0)),
        timed_out=bool(body.get("timed_out")),
    )
    assert first is again
    assert first == fresh
    assert first is not None
    assert first.partial == fresh.partial


def test_a_shard_report_with_failures_is_built_each_time() -> None:
    failing = {
        "_shards": {
            "total": 2,
            "successful": 1,
            "failed": 1,
            "failures": [{"reason": {"type": "no_shard_available_action_exception", "reason": "gone"}}],
        }
    }
    first, again = ShardReport.from_body(failing), ShardReport.from_body(failing)
    assert first == again
    assert first is not again
    assert first is not None
    assert first.failure == "no_shard_available_action_exception: gone"


@pytest.mark.parametrize("key", ["region", "fiscal-year_2", "a" * 64])
def test_a_metadata_key_a_document_may_carry_may_be_filtered_faceted_and_grouped_by(key: str) -> None:
    Document(id="d", text="t", metadata={key: "v"})
    plan = _plan(filters={f"metadata.{key}": "v"}, group_by=f"metadata.{key}")
    assert plan.group_by == f"metadata.{key}"
    parse_facets([f"metadata.{key}"], {key: "keyword"})


@pytest.mark.parametrize("key", ["région", "a b", "a" * 65, "x\n", ""])
def test_a_metadata_key_no_document_may_carry_is_refused_everywhere_by_the_same_rule(key: str) -> None:
    with pytest.raises(ValueError, match="metadata key"):
        Document(id="d", text="t", metadata={key: "v"})
    for asked in ({"filters": {f"metadata.{key}": "v"}}, {"group_by": f"metadata.{key}"}):
        with pytest.raises(InvalidQuery):
            _plan(**asked)
    with pytest.raises(InvalidQuery):
        parse_facets([f"metadata.{key}"], {key: "keyword"})


async def test_every_scoring_request_gets_the_configured_server_timeout_or_90_percent_of_what_is_left() -> None:
    """Backend.server_side is what the legs, the facets and the walk's streams send (the facets used to
    ignore ``search_timeout_s``)."""
    es = AsyncElasticsearch("http://127.0.0.1:9")
    try:
        budget = Backend(es, cast(Any, None), SearchSettings(url="http://127.0.0.1:9", leg_timeout_s=2.0))
        configured = SearchSettings(url="http://127.0.0.1:9", search_timeout_s=0.5, allow_partial_search_results=False)
        fixed = Backend(es, cast(Any, None), configured)
        assert budget.server_side({"size": 1}) == {"size": 1, "timeout": "1800000micros"}
        assert budget.server_side({}, 1.0) == {"timeout": "900000micros"}
        assert fixed.server_side({}, 1.0) == {"timeout": "500000micros", "allow_partial_search_results": False}
    finally:
        await es.close()
