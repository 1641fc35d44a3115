"""The one tool contract: host policy validated when built, the model's arguments validated against the
schema every surface serves, and one sentence for each thing the model got wrong."""

from __future__ import annotations

import pytest

from storage import ConfigurationError
from storage.agent import (
    AnswerArguments,
    DocumentArguments,
    ToolPolicy,
    ToolSettings,
    json_schema,
    parse_arguments,
    search_arguments,
)


def test_a_host_mistake_is_a_configuration_error_naming_the_setting() -> None:
    for values, said in (
        ({"mode": "semantic"}, "mode must be one of bm25, knn, hybrid, not 'semantic'"),
        ({"limit": 100000}, "limit: Input should be less than or equal to 50"),
        ({"limit": 30}, "limit (30) is above max_limit (20)"),
        ({"allowed_filters": ("ticker", "sector")}, "unknown filters ['sector']"),
        ({"max_chars": 10}, "max_chars: Input should be greater than or equal to 500"),
        ({"min_similarity": 1.5}, "min_similarity"),
    ):
        with pytest.raises(ConfigurationError, match="invalid tool settings") as caught:
            ToolPolicy.of(**values)
        assert said in str(caught.value)


def test_the_policy_comes_from_the_environment_and_the_command_line_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOL_LIMIT", "7")
    monkeypatch.setenv("TOOL_MAX_CHARS", "2500")
    monkeypatch.setenv("TOOL_FILTERS", "ticker, date")
    policy = ToolSettings().policy(limit=3)
    assert (policy.limit, policy.max_chars, policy.allowed_filters) == (3, 2500, ("ticker", "date"))
    monkeypatch.setenv("TOOL_MODE", "semantic")
    with pytest.raises(ConfigurationError, match="mode must be one of"):
        ToolSettings().policy()


def test_the_search_schema_has_descriptions_bounds_and_only_the_allowed_filters() -> None:
    schema = json_schema(search_arguments(ToolPolicy(limit=5, max_limit=10, allowed_filters=("ticker", "date"))))
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["query"]
    assert set(schema["properties"]) == {"query", "limit", "facets", "one_per", "ticker", "date_from", "date_to"}
    facets = schema["properties"]["facets"]  # (its one type: no anyOf with null)
    assert (facets["maxItems"], facets["items"]["enum"][0]) == (3, "ticker")
    no_facets = json_schema(search_arguments(ToolPolicy(facets=False)))
    assert "facets" not in no_facets["properties"]
    assert all(prop.get("description") for prop in schema["properties"].values())
    assert (schema["properties"]["limit"]["maximum"], schema["properties"]["limit"]["default"]) == (10, 5)
    assert "title" not in schema


def test_each_bad_argument_gets_one_sentence_saying_what_to_fix() -> None:
    model = search_arguments(ToolPolicy(allowed_filters=("ticker", "date")))
    for arguments, sentence in (
        ({"query": ""}, "Error: the query is empty. Call the tool again with a few words describing what to find."),
        ({}, "Error: the query is empty. Call the tool again with a few words describing what to find."),
        ({"query": 5}, "Error: query must be text. Fix the arguments and call the tool again."),
        ({"query": "x", "limit": "many"}, "Error: limit must be a whole number. Fix the arguments and call"),
        ({"query": "x", "limit": 21}, "Error: limit must be at most 20. Fix the arguments and call the tool again."),
        ({"query": "x", "date_from": "May"}, "Error: date_from must be a date written YYYY-MM-DD. Fix the arguments"),
        ({"query": "x", "sector": "tech"}, "Error: 'sector' is not an argument of this tool (its arguments: date_from"),
        ("{query:", "Error: the arguments are not valid JSON."),
        ("[1]", "Error: the arguments must be an object"),
    ):
        said = parse_arguments(model, arguments)
        assert isinstance(said, str), arguments
        assert said.startswith(sentence), said
        assert "\n" not in said
        assert "pydantic" not in said
    assert isinstance(parse_arguments(AnswerArguments, {"question": " "}), str)
    # Each tool's example names its own argument (get_document was told to send {"query": ...}).
    assert parse_arguments(model, "[1]") == 'Error: the arguments must be an object such as {"query": "..."}.'
    assert parse_arguments(DocumentArguments, "{id:") == (
        'Error: the arguments are not valid JSON. Send an object such as {"id": "..."}.'
    )
    assert str(parse_arguments(AnswerArguments, "5")).endswith('such as {"question": "..."}.')
    ok = parse_arguments(model, '{"query": " revenue ", "ticker": "AAPL"}')
    assert not isinstance(ok, str)
    assert ok.model_dump()["query"] == "revenue"
