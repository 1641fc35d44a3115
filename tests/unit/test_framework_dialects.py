"""Each framework's names and filter syntax, translated once into ours (storage.integrations._dialects)."""

from __future__ import annotations

import pytest
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)

from storage import InvalidQuery
from storage._filters import parse_filters
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


def test_haystack_filters_become_one_conjunction_we_validate() -> None:
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
                    {"field": "meta.source", "operator": "==", "value": "ap"},
                ],
            },
            {"field": "meta.doc_type", "operator": "==", "value": None},
        ],
    }
    ours = haystack_filters(filters)
    assert ours == {
        "ticker": ["AAPL", "MSFT"],
        "published_at": {"gte": "2024-01-01", "lt": "2025-01-01"},
        "source": ["reuters", "ap"],
        "doc_type": {"exists": False},
    }
    assert parse_filters(ours)  # a filter our model takes as it is
    assert haystack_filters({"ticker": "AAPL"}) == {"ticker": "AAPL"}  # our own model passes through
    single = haystack_filters({"field": "meta.region", "operator": "==", "value": "emea"})
    assert single == {"metadata.region": "emea"}


@pytest.mark.parametrize(
    ("filters", "said"),
    [
        ({"field": "meta.x", "operator": "!=", "value": 1}, "'!='"),
        ({"field": "meta.x", "operator": "not in", "value": [1]}, "'not in'"),
        ({"operator": "NOT", "conditions": [{"field": "meta.x", "operator": "==", "value": 1}]}, "'NOT'"),
        (
            {
                "operator": "OR",
                "conditions": [
                    {"field": "meta.x", "operator": "==", "value": 1},
                    {"field": "meta.y", "operator": "==", "value": 2},
                ],
            },
            "'OR'",
        ),
        ({"field": "meta.x", "value": 1}, "needs an 'operator'"),
    ],
)
def test_what_our_model_cannot_say_is_an_invalid_query_naming_the_operator(filters: object, said: str) -> None:
    with pytest.raises(InvalidQuery, match=said):
        haystack_filters(filters)


def test_llama_index_metadata_filters_translate_with_their_operators_and_conditions() -> None:
    filters = MetadataFilters(
        filters=[
            MetadataFilter(key="ticker", value="AAPL"),
            MetadataFilter(key="year", value=2020, operator=FilterOperator.GTE),
            MetadataFilters(
                filters=[MetadataFilter(key="source", value="a"), MetadataFilter(key="source", value="b")],
                condition=FilterCondition.OR,
            ),
        ]
    )
    assert llama_index_filters(filters) == {
        "ticker": "AAPL",
        "metadata.year": {"gte": 2020},
        "source": ["a", "b"],
    }
    with pytest.raises(InvalidQuery, match="'!='"):
        llama_index_filters(MetadataFilters(filters=[MetadataFilter(key="x", value=1, operator=FilterOperator.NE)]))
    with pytest.raises(InvalidQuery, match="not supported"):
        llama_index_filters(
            MetadataFilters(filters=[MetadataFilter(key="x", value="y", operator=FilterOperator.TEXT_MATCH)])
        )


def test_langchain_filter_and_counts() -> None:
    assert langchain_filter({"ticker": "AAPL", "region": ["emea", "apac"]}) == {
        "ticker": "AAPL",
        "metadata.region": ["emea", "apac"],
    }
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
