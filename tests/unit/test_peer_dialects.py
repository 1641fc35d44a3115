"""The Elasticsearch stores' arguments and filter lists, translated or refused by name (issue 62)."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from storage import ConfigurationError, InvalidQuery
from storage.filters import AllOf, AnyOf, Exists, Not, Range, Term, Terms
from storage.integrations._dialects import elasticsearch_filters, haystack_store_field
from storage.integrations._peers import api_key_of, haystack_arguments, peer_arguments, refresh_of


def test_an_elasticsearch_filter_list_becomes_our_filters_clause_by_clause() -> None:
    assert elasticsearch_filters([{"term": {"metadata.page": "1"}}]) == [Term("metadata.page", "1")]
    assert elasticsearch_filters([{"term": {"metadata.author.keyword": {"value": "Ann"}}}]) == [
        Term("metadata.author", "Ann")
    ]
    assert elasticsearch_filters([{"terms": {"metadata.tag": ["a", "b"]}}, {"ids": {"values": ["x"]}}]) == [
        Terms("metadata.tag", ("a", "b")),
        Terms("id", ("x",)),
    ]
    (ranged,) = elasticsearch_filters([{"range": {"metadata.year": {"gte": 2020, "lt": 2024}}}]) or []
    assert ranged == AllOf((Range("metadata.year", gte=2020), Range("metadata.year", lt=2024)))
    (tree,) = (
        elasticsearch_filters(
            {"bool": {"should": [{"term": {"metadata.a": 1}}, {"exists": {"field": "metadata.b"}}], "must_not": []}}
        )
        or []
    )
    assert tree == AllOf((AnyOf((Term("metadata.a", 1), Exists("metadata.b", True))),))
    (negated,) = elasticsearch_filters([{"bool": {"must_not": [{"term": {"metadata.a": "x"}}]}}]) or []
    assert negated == AllOf((Not((Term("metadata.a", "x"),)),))
    assert elasticsearch_filters([]) is None
    assert elasticsearch_filters(None) is None


@pytest.mark.parametrize(
    ("clauses", "message"),
    [
        ([{"match": {"text": "x"}}], "'match' clause cannot be a filter"),
        ([{"term": {"text": "x"}}], "filter on metadata.<key> fields"),
        ([{"range": {"metadata.d": {"gte": "now-1d", "format": "x"}}}], "no format or time_zone"),
        ([{"bool": {"must": [{"term": {"metadata.a": 1}}], "should": [{"term": {"metadata.a": 2}}]}}], "only score"),
        ([{"bool": {"should": [{"term": {"metadata.a": 1}}], "minimum_should_match": 2}}], "is not supported"),
        ([{"term": {"metadata.a": 1, "metadata.b": 2}}], "must name one field"),
        ("metadata.a:1", "a list of clauses"),
    ],
)
def test_a_clause_that_cannot_be_a_filter_is_refused_by_name(clauses: Any, message: str) -> None:
    with pytest.raises(InvalidQuery, match=message):
        elasticsearch_filters(clauses)


def test_equal_to_a_list_is_refused_rather_than_read_as_any_of_it() -> None:
    from storage.integrations._dialects import haystack_filters

    with pytest.raises(InvalidQuery, match="use in for any of them"):
        haystack_filters({"field": "meta.tags", "operator": "==", "value": ["a", "b"]}, store=True)


def test_a_bare_haystack_field_is_its_meta_as_the_peer_reads_it() -> None:
    assert haystack_store_field("type") == haystack_store_field("meta.type") == "metadata.type"
    with pytest.raises(InvalidQuery, match=r"filters on 'id' and 'meta\.<key>'"):
        haystack_store_field("content")


def test_the_peers_constructor_arguments_are_taken_or_refused_with_what_to_pass() -> None:
    given: dict[str, Any] = {"distance_strategy": "COSINE", "query_field": "text", "batch_size": 50, "mode": "bm25"}
    assert peer_arguments(given, fields={"query_field": "text"}) == {"bulk_chunk_size": 50}
    assert given == {"mode": "bm25"}  # what is left: search options
    for argument, message in (
        ({"num_dimensions": 3}, "dimensions from the embedding model"),
        ({"custom_index_settings": {}}, "number_of_shards"),
        ({"query_field": "body"}, "import_index"),
        ({"distance_strategy": "DOT_PRODUCT"}, "cosine"),
        ({"batch_size": 0}, "whole number"),
    ):
        with pytest.raises(ConfigurationError, match=message):
            peer_arguments(dict(argument), fields={"query_field": "text"})


def test_haystack_connection_arguments_map_to_our_settings() -> None:
    assert haystack_arguments({"basic_auth": ("u", "p"), "verify_certs": False, "request_timeout": 3}) == {
        "username": "u",
        "password": "p",
        "verify_certs": False,
        "request_timeout_s": 3,
    }
    assert haystack_arguments({"embedding_similarity_function": "cosine"}) == {}
    for argument, message in (
        ({"custom_mapping": {}}, "mapping is this library's"),
        ({"embedding_similarity_function": "l2_norm"}, "cosine"),
        ({"headers": {"x": "1"}}, "other headers are not sent"),
        ({"timeout": 3}, r"unknown argument\(s\) \['timeout'\]"),
    ):
        with pytest.raises(ConfigurationError, match=message):
            haystack_arguments(dict(argument))


def test_an_api_key_and_its_id_are_one_encoded_key() -> None:
    assert api_key_of("secret", "id") == base64.b64encode(b"id:secret").decode()
    assert api_key_of("encoded", None) == "encoded"
    assert api_key_of(None, None) is None
    with pytest.raises(ConfigurationError, match="api_key is missing"):
        api_key_of(None, "id")


def test_a_per_call_refresh_is_ours() -> None:
    assert [refresh_of(v) for v in (True, False, "wait_for", None)] == [True, False, True, None]
    with pytest.raises(ConfigurationError, match="wait_for"):
        refresh_of("later")
