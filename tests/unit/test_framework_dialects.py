"""Each framework's names and filter syntax, translated once into ours (storage.integrations._dialects)."""

from __future__ import annotations

from datetime import datetime

import pytest
from haystack import Document as HaystackDocument
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)

from storage import ConfigurationError, InvalidQuery, SearchSettings
from storage._dsl.filters import parse_filters, to_es_filters
from storage.filters import AnyOf, Exists, Not, Range, Term, Terms
from storage.integrations._dialects import (
    count_argument,
    haystack_filters,
    langchain_filter,
    llama_index_filters,
    our_field,
)


def test_field_names_map_to_our_fields_or_metadata() -> None:
    assert our_field("meta.ticker") == "ticker"
    assert our_field("published_at") == "published_at"
    assert our_field("meta.region") == "metadata.region"
    assert our_field("metadata.region") == "metadata.region"
    assert our_field("author") == "metadata.author"


def test_haystack_filters_become_one_tree_of_our_filters() -> None:
    filters = {
        "operator": "AND",
        "conditions": [
            {"field": "meta.ticker", "operator": "in", "value": ["AAPL", "MSFT"]},
            {"field": "meta.published_at", "operator": ">=", "value": "2024-01-01"},
            {"field": "meta.published_at", "operator": "<", "value": "2025-01-01"},
            {
                "operator": "OR",
                "conditions": [
                    {"field": "meta.source", "operator": "==", "value": "reuters"},
                    {"field": "meta.region", "operator": "!=", "value": "emea"},
                ],
            },
            {"field": "meta.doc_type", "operator": "==", "value": None},
            {"operator": "NOT", "conditions": [{"field": "meta.year", "operator": "not in", "value": [2020]}]},
        ],
    }
    ours = haystack_filters(filters)
    assert ours == [
        Terms("ticker", ("AAPL", "MSFT")),
        Range("published_at", gte="2024-01-01"),
        Range("published_at", lt="2025-01-01"),
        AnyOf((Term("source", "reuters"), Not((Term("metadata.region", "emea"),)))),
        Exists("doc_type", False),
        Not((Not((Terms("metadata.year", (2020,)),)),)),
    ]
    assert isinstance(ours, list)
    assert parse_filters(ours) == ours
    assert haystack_filters({"ticker": "AAPL"}) == {"ticker": "AAPL"}  # our own model passes through
    assert haystack_filters({"field": "meta.region", "operator": "==", "value": "emea"}) == [
        Term("metadata.region", "emea")
    ]


def test_the_frameworks_comparison_rules_hold() -> None:
    def one(op: str, value: object) -> object:
        return haystack_filters({"field": "meta.n", "operator": op, "value": value}, store=True)

    assert one(">", None) == [AnyOf(())]  # nothing compares with None
    assert one("!=", None) == [Exists("metadata.n", True)]
    assert one(">", "1972-12-11T19:54:58") == [Range("metadata.n", gt=datetime(1972, 12, 11, 19, 54, 58))]
    assert one("in", []) == [AnyOf(())]
    assert one("not in", []) == [Not((AnyOf(()),))]
    assert haystack_filters({}, store=True) is None
    assert haystack_filters({"field": "id", "operator": "==", "value": "a"}, store=True) == [Term("id", "a")]


@pytest.mark.parametrize(
    ("filters", "said"),
    [
        ({"field": "meta.x", "operator": ">", "value": "1"}, "compares only as an ISO-8601 date"),
        ({"field": "meta.x", "operator": "<=", "value": [1]}, "a range needs one value"),
        ({"field": "meta.x", "operator": "in", "value": 9}, "must be a list"),
        ({"field": "meta.x", "operator": "not in", "value": (10, 11)}, "must be a list"),
        ({"field": "meta.x", "operator": "like", "value": 1}, "'like'"),
        ({"operator": "XOR", "conditions": []}, "'XOR'"),
        ({"conditions": [{"field": "meta.x", "operator": "==", "value": 1}]}, "needs an 'operator'"),
        ({"operator": "AND"}, "needs a list of 'conditions'"),
        ({"field": "meta.x", "value": 1}, "needs an 'operator'"),
        ({"field": "meta.x", "operator": "=="}, "needs 'field', 'operator' and 'value'"),
        ({"field": "content", "operator": "==", "value": "x"}, "filters on 'id' and 'meta.<key>'"),
    ],
)
def test_what_the_frameworks_refuse_is_an_invalid_query_naming_it(filters: object, said: str) -> None:
    with pytest.raises(InvalidQuery, match=said):
        haystack_filters(filters, store=True)


def test_llama_index_metadata_filters_translate_with_their_operators_and_conditions() -> None:
    filters = MetadataFilters(
        filters=[
            MetadataFilter(key="ticker", value="AAPL"),
            MetadataFilter(key="year", value=2020, operator=FilterOperator.GTE),
            MetadataFilter(key="x", value=1, operator=FilterOperator.NE),
            MetadataFilters(
                filters=[MetadataFilter(key="source", value="a"), MetadataFilter(key="region", value="b")],
                condition=FilterCondition.OR,
            ),
        ]
    )
    assert llama_index_filters(filters) == [
        Term("ticker", "AAPL"),
        Range("metadata.year", gte=2020),
        Not((Term("metadata.x", 1),)),
        AnyOf((Term("source", "a"), Term("metadata.region", "b"))),
    ]
    with pytest.raises(InvalidQuery, match="not supported"):
        llama_index_filters(
            MetadataFilters(filters=[MetadataFilter(key="x", value="y", operator=FilterOperator.TEXT_MATCH)])
        )


def test_our_filters_compare_a_metadata_value_by_the_type_the_filter_gives() -> None:
    clauses = to_es_filters(
        [
            Term("metadata.n", 2),
            Term("metadata.n", "2"),
            Terms("metadata.n", (1, "a")),
            Range("metadata.d", gte=datetime(1970, 1, 1)),
            Not((Term("metadata.b", True),)),
            AnyOf(()),
        ]
    )
    assert clauses == [
        {"term": {"metadata.n.num": 2}},
        {"term": {"metadata.n": "2"}},
        {
            "bool": {
                "should": [{"terms": {"metadata.n.num": [1]}}, {"terms": {"metadata.n": ["a"]}}],
                "minimum_should_match": 1,
            }
        },
        {"range": {"metadata.d.date": {"gte": "1970-01-01T00:00:00"}}},
        {"bool": {"must_not": [{"term": {"metadata.b": True}}]}},
        {"match_none": {}},
    ]
    with pytest.raises(InvalidQuery, match="of one type"):
        to_es_filters([Range("metadata.n", gte=1, lt="z")])


def test_langchain_filter_and_counts() -> None:
    assert langchain_filter({"ticker": "AAPL", "region": ["emea", "apac"]}) == [
        Term("ticker", "AAPL"),
        Terms("metadata.region", ("emea", "apac")),
    ]
    assert count_argument("k", 3) == 3
    for wrong in ("3", True, 2.5, None):
        with pytest.raises(InvalidQuery, match="k must be a whole number"):
            count_argument("k", wrong)


def test_the_store_refuses_elasticsearchstores_strategy_and_says_what_to_pass_instead() -> None:
    from storage import ConfigurationError
    from storage.integrations.langchain import HybridSearchStore

    with pytest.raises(ConfigurationError, match="mode='knn'"):
        HybridSearchStore(index_name="never-created", strategy="DenseVectorStrategy(hybrid=True)")
    with pytest.raises(ConfigurationError, match="k= / filter="):
        HybridSearchStore(index_name="never-created", limit=3)


def test_the_haystack_store_refuses_what_its_own_arguments_say_and_input_that_is_not_documents() -> None:
    from storage import InvalidDocument
    from storage.integrations.haystack import HybridSearchDocumentStore, HybridSearchRetriever, NotDocuments

    store = HybridSearchDocumentStore(index="never-created")  # (no request until a call needs one)
    with pytest.raises(ConfigurationError, match="top_k= / filters="):
        HybridSearchRetriever(document_store=store, limit=3)
    with pytest.raises(ConfigurationError, match="document_store alone"):
        HybridSearchRetriever(document_store=store, settings=SearchSettings())
    with pytest.raises(NotDocuments) as caught:
        store.write_documents("not a list")  # type: ignore[arg-type]
    assert isinstance(caught.value, ValueError)
    assert isinstance(caught.value, InvalidDocument)
    with pytest.raises(NotDocuments, match="document 1 is a str"):
        store.write_documents([HaystackDocument(content="x"), "y"])  # type: ignore[list-item]
    store.close()
