"""The opt-in query syntax: parsed by us into safe clauses, with errors that point at the token."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage import InvalidQuery, QuerySyntaxError
from storage._dsl.syntax import parse_query
from storage.filters import Range, Term, Terms

F = ["title", "text"]


def _words(clause: object) -> str:
    return json.dumps(clause)


def test_words_phrases_and_operators_become_match_clauses() -> None:
    p = parse_query('revenue AND "guidance cut" NOT china', fields=F)
    must = p.clause["bool"]["must"]
    assert [c["multi_match"]["query"] for c in must] == ["revenue", "guidance cut"]
    assert must[1]["multi_match"]["type"] == "phrase"
    assert p.clause["bool"]["must_not"][0]["multi_match"]["query"] == "china"
    assert p.embed_text == "revenue guidance cut"
    assert p.filters == []


def test_or_and_parentheses_nest() -> None:
    p = parse_query("(apple OR microsoft) cloud -hardware", fields=F)
    should = p.clause["bool"]["must"][0]["bool"]["should"]
    assert [c["multi_match"]["query"] for c in should] == ["apple", "microsoft"]
    assert p.clause["bool"]["must_not"][0]["multi_match"]["query"] == "hardware"


def test_field_prefixes_map_onto_filters() -> None:
    p = parse_query("guidance ticker:AAPL ticker:MSFT type:10-K date:2024-06", fields=F)
    assert p.filters == [
        Terms("ticker", ("AAPL", "MSFT")),
        Term("doc_type", "10-K"),
        Range("published_at", gte="2024-06-01", lte="2024-06-30"),
    ]
    assert p.clause == {"multi_match": {"query": "guidance", "fields": F, "tie_breaker": 0.5, "lenient": True}}
    assert parse_query("x date:2024", fields=F).filters == [Range("published_at", gte="2024-01-01", lte="2024-12-31")]
    assert parse_query("x date:2024-02-29", fields=F).filters == [
        Range("published_at", gte="2024-02-29", lte="2024-02-29")
    ]


def test_lower_case_operators_and_lucene_syntax_are_plain_words() -> None:
    p = parse_query("rock and roll ~2 ^3 {} [a TO b] 10:30", fields=F)
    assert "rock" in p.embed_text
    assert "~2" in p.embed_text
    assert "10:30" in p.embed_text  # a digit before ':' is not a field prefix


@pytest.mark.parametrize(
    ("text", "position", "fragment"),
    [
        ("revenue AND", 8, "right"),
        ("AND revenue", 0, "left"),
        ("(revenue OR guidance", 0, "never closed"),
        ("revenue)", 7, "unexpected"),
        ('revenue "guidance', 8, "unterminated"),
        ("revenue NOT", 8, "NOT needs"),
        ("NOT revenue", 11, "not negated"),
        ("foo:bar revenue", 0, "unknown field prefix"),
        ("revenue OR ticker:AAPL", 11, "top level"),
        ("ticker:AAPL revenue OR china", 0, "top level"),
        ("revenue NOT ticker:AAPL", 12, "top level"),
        ("revenue date:2024-13", 8, "YYYY"),
        ("revenue date:yesterday", 8, "YYYY"),
        ("ticker:AAPL", 0, "besides field prefixes"),
        ('revenue ""', 8, "empty phrase"),
        ("revenue ticker:", 8, "needs a value"),
    ],
)
def test_errors_point_at_the_offending_token(text: str, position: int, fragment: str) -> None:
    with pytest.raises(QuerySyntaxError) as info:
        parse_query(text, fields=F)
    assert info.value.position == position
    assert fragment in str(info.value)
    assert isinstance(info.value, InvalidQuery)


def test_nesting_is_bounded() -> None:
    with pytest.raises(QuerySyntaxError, match="nested too deeply"):
        parse_query("(" * 100 + "x" + ")" * 100, fields=F)


_PIECES = [*'ab "()-:', "AND ", "OR ", "NOT ", "ticker:", "date:2024"]


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_PIECES), max_size=25).map("".join))
def test_any_input_parses_or_raises_a_typed_error(text: str) -> None:
    try:
        p = parse_query(text, fields=F)
    except QuerySyntaxError:
        return
    assert p.embed_text.strip()
    json.dumps(p.clause)  # plain data: ready to send
