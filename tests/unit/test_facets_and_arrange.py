"""Facet syntax and validation, and the arrange stage's orders (pure)."""

from __future__ import annotations

import pytest

from storage import InvalidQuery
from storage._dsl.aggregations import facet_aggregations, parse_facets, read_facets
from storage._search.arrange import group_ids, mmr_order
from storage.types import FacetSpec

TYPES = {"region": "keyword", "score": "long", "note": "text"}


def test_facet_strings_become_terms_histograms_and_ranges() -> None:
    specs = (
        parse_facets(["ticker", "source:25", "published_at:quarter"], TYPES)
        + parse_facets(["published_at:2024-01-01..2024-07-01,2024-07-01.."], TYPES)
        + parse_facets(["metadata.region", "metadata.score:0..10,10.."], TYPES)
    )
    assert [(s.field, s.kind) for s in specs] == [
        ("ticker", "terms"),
        ("source", "terms"),
        ("published_at", "date_histogram"),
        ("published_at", "range"),
        ("metadata.region", "terms"),
        ("metadata.score", "range"),
    ]
    aggs = facet_aggregations([specs[0], specs[1], specs[2], specs[5]])
    assert aggs["ticker"] == {"terms": {"field": "ticker", "size": 10}}
    assert aggs["source"]["terms"]["size"] == 25
    assert aggs["published_at"]["date_histogram"]["calendar_interval"] == "quarter"
    assert aggs["metadata.score"] == {
        "range": {"field": "metadata.score", "ranges": [{"from": 0.0, "to": 10.0}, {"from": 10.0}]}
    }


def test_one_facet_per_field() -> None:
    with pytest.raises(InvalidQuery, match="asked twice"):
        parse_facets(["published_at:month", "published_at:2024..2025"], TYPES)


@pytest.mark.parametrize(
    ("facet", "message"),
    [
        ("title", "full text cannot be counted"),
        ("price", "unknown field"),
        ("metadata.missing", "unmapped"),
        ("metadata.note", "cannot count a text field"),
        ("metadata.region:0..5", "ranges need a number"),
        ("ticker:1000", "between 1 and 100"),
        ("ticker:month", "how many values"),
        ("published_at", None),
        ("published_at:fortnight", "give an interval"),
        ("published_at:2024-01-01..soon", "not a date"),
        ("published_at:2024-13..", None),
        ("ticker:0..5", "counted by value"),
        (FacetSpec("published_at", "terms"), "by interval"),
    ],
)
def test_a_bad_facet_is_invalid_query_naming_it(facet: str | FacetSpec, message: str | None) -> None:
    if message is None:
        parse_facets([facet], TYPES)  # valid
        return
    with pytest.raises(InvalidQuery, match=message):
        parse_facets([facet], TYPES)


def test_buckets_are_read_in_the_servers_order() -> None:
    specs = parse_facets(["ticker", "published_at:year"], TYPES)
    aggs = {
        "ticker": {"buckets": [{"key": "AAPL", "doc_count": 3}, {"key": "MSFT", "doc_count": 1}]},
        "published_at": {"buckets": [{"key": 1, "key_as_string": "2024-01-01", "doc_count": 4}]},
    }
    assert read_facets(aggs, specs) == {"ticker": [("AAPL", 3), ("MSFT", 1)], "published_at": [("2024-01-01", 4)]}


def test_mmr_with_no_diversity_is_the_ranked_order() -> None:
    ids = ["a", "b", "c"]
    vectors = {"a": [1.0, 0.0], "b": [1.0, 0.0], "c": [0.0, 1.0]}
    assert mmr_order(ids, vectors, 0.0) == ids


def test_mmr_spreads_exact_duplicates_out() -> None:
    ids = ["a1", "a2", "a3", "b", "c"]
    same = [1.0, 0.0, 0.0]
    vectors = {"a1": same, "a2": same, "a3": same, "b": [0.0, 1.0, 0.0], "c": [0.0, 0.0, 1.0]}
    order = mmr_order(ids, vectors, 0.5)
    assert order[:3] == ["a1", "b", "c"]  # one copy, then the distinct ones, then the other copies
    assert sorted(order) == sorted(ids)


def test_mmr_keeps_a_document_without_a_vector_where_relevance_puts_it() -> None:
    order = mmr_order(["a", "x", "b"], {"a": [1.0, 0.0], "b": [1.0, 0.0]}, 0.5)
    assert order[:2] == ["a", "x"]


def test_groups_keep_each_values_first_hits_in_order_and_count_them_all() -> None:
    values = {"a1": "A", "b1": "B", "a2": "A", "x": None, "a3": "A", "b2": "B", "y": None}
    groups = group_ids(list(values), values.get, per_group=2)
    assert [(g.value, g.ids, g.known_matches) for g in groups] == [
        ("A", ["a1", "a2"], 3),
        ("B", ["b1", "b2"], 2),
        (None, ["x"], 1),  # a hit without a value: a group of its own, in its place
        (None, ["y"], 1),
    ]
