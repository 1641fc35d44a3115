"""The filter model, the query builders and query hygiene: pure functions, no server."""

from __future__ import annotations

from datetime import date

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from storage import InvalidQuery
from storage._dsl.filters import parse_filters, to_es_filters
from storage._dsl.mapping import carried_settings, index_body
from storage._dsl.queries import EXACT_CANDIDATES, bm25_request, fetch_request, knn_request
from storage._dsl.tenancy import read_scope
from storage._dsl.text import _scrubbed, clean_query
from storage._transport.targets import TargetInfo, target_info
from storage.filters import Exists, Range, Term, Terms
from storage.passages import PassageSetting


def test_mapping_filters_render_to_term_terms_range_and_exists() -> None:
    clauses = to_es_filters(
        parse_filters(
            {
                "ticker": "AAPL",
                "doc_type": ["news", "filing"],
                "published_at": {"gte": "2024-01-01", "lt": date(2025, 1, 1)},
                "metadata.region": {"exists": True},
                "source": {"exists": False},
                "id": ["a", "b"],
            }
        )
    )
    assert clauses == [
        {"term": {"ticker": "AAPL"}},
        {"terms": {"doc_type": ["news", "filing"]}},
        {"range": {"published_at": {"gte": "2024-01-01", "lt": "2025-01-01"}}},
        {"exists": {"field": "metadata.region"}},
        {"bool": {"must_not": [{"exists": {"field": "source"}}]}},
        {"terms": {"_id": ["a", "b"]}},
    ]


@pytest.mark.parametrize("given", [5, 3.5, True, "ticker"])
def test_filters_that_are_neither_a_mapping_nor_a_list_are_refused_by_name(given: object) -> None:
    with pytest.raises(InvalidQuery, match="filters must be a mapping or a list of Filter objects"):
        parse_filters(given)  # type: ignore[arg-type]


def test_filter_objects_are_accepted_as_a_list() -> None:
    filters = [Term("ticker", "X"), Terms("source", ("a",)), Range("published_at", gte="2024-01-01"), Exists("title")]
    with pytest.raises(InvalidQuery, match="unknown filter field 'title'"):
        parse_filters(filters)
    assert len(parse_filters(filters[:3])) == 3


@pytest.mark.parametrize(
    ("filters", "match"),
    [
        ({"price": 1}, "unknown filter field"),
        ({"embedding": [1]}, "unknown filter field"),
        ({"ticker": []}, "empty list"),
        ({"ticker": {"gte": 1, "foo": 2}}, "range"),
        ({"published_at": {"gte": "yesterday"}}, "ISO-8601"),
        ({"published_at": {"gt": "2024-01-01", "gte": "2024-01-01"}}, "one lower"),
        ({"ticker": {"exists": "yes"}}, "true or false"),
        ({"ticker": None}, "expected a string"),
        ({"metadata.bad key": "x"}, "unknown filter field"),
        ("ticker=AAPL", "mapping"),
    ],
)
def test_malformed_filters_are_typed_errors(filters: object, match: str) -> None:
    with pytest.raises(InvalidQuery, match=match):
        parse_filters(filters)  # type: ignore[arg-type]


def test_both_legs_receive_the_same_filter_clauses() -> None:
    clauses = to_es_filters(parse_filters({"ticker": "AAPL"}))
    scope = read_scope({"ticker": "AAPL"}, None, what="search", multi_tenant=False)
    bm25 = bm25_request("q", scope=scope, size=50)
    knn = knn_request([0.1, 0.2], scope=scope, k=50, num_candidates=20, similarity=0.5)
    assert bm25["query"]["bool"]["filter"] == knn["knn"]["filter"] == clauses
    assert knn["knn"]["num_candidates"] == 50  # never below k
    assert knn["knn"]["similarity"] == 0.5
    assert bm25["source"] is knn["source"] is False  # ids and scores only: the page is fetched after fusion
    keywords = bm25["query"]["bool"]["must"][0]["dis_max"]
    assert keywords["tie_breaker"] == 0.5  # best field + half the other: BEIR's Elasticsearch scoring
    assert [q["simple_query_string"]["fields"] for q in keywords["queries"]] == [["title"], ["text"]]
    assert {q["simple_query_string"]["flags"] for q in keywords["queries"]} == {"PHRASE|WHITESPACE"}


def test_an_index_with_flat_heads_scores_a_document_by_the_better_of_its_head_and_its_best_passage() -> None:
    scope = read_scope({"ticker": "AAPL"}, None, what="search", multi_tenant=False)
    knn = knn_request([0.1, 0.2], scope=scope, k=50, num_candidates=20, similarity=0.5, passages=3)
    heads, nested = knn["query"]["dis_max"]["queries"]  # a maximum of the two, not a sum
    assert "tie_breaker" not in knn["query"]["dis_max"]
    assert heads["knn"]["field"] == "embedding"
    assert nested["nested"]["query"]["knn"]["field"] == "passages.vector"
    assert nested["nested"]["score_mode"] == "max"
    assert nested["nested"]["inner_hits"]["size"] == 3
    for part in (heads["knn"], nested["nested"]["query"]["knn"]):
        assert part["num_candidates"] == 50  # never below the documents asked for
        assert part["filter"] == to_es_filters(parse_filters({"ticker": "AAPL"}))
        assert part["similarity"] == 0.5
    assert knn["size"] == 50
    # An index built before mapping version 4 (every vector nested): one nested kNN section, as before.
    old = knn_request([0.1, 0.2], scope=scope, k=50, num_candidates=20, passages=3, head_vectors=False)
    assert old["knn"]["field"] == "passages.vector"
    assert old["knn"]["inner_hits"]["size"] == 3
    assert "boost" not in nested["nested"]
    # Head first (the index's long documents agree with their heads): the best passage counts at a weight.
    first = knn_request([0.1, 0.2], scope=scope, k=50, num_candidates=20, passages=3, passage_weight=0.9)
    assert first["query"]["dis_max"]["queries"][1]["nested"]["boost"] == 0.9
    assert "boost" not in first["query"]["dis_max"]["queries"][0]["knn"]


def test_head_first_the_passages_clause_gathers_half_the_candidates_unless_the_search_is_exact() -> None:
    scope = read_scope(None, None, what="search", multi_tenant=False)

    def candidates(num: int, weight: float) -> tuple[int, int]:
        body = knn_request([0.1, 0.2], scope=scope, k=10, num_candidates=num, passages=3, passage_weight=weight)
        heads, nested = body["query"]["dis_max"]["queries"]
        return heads["knn"]["num_candidates"], nested["nested"]["query"]["knn"]["num_candidates"]

    assert candidates(100, 0.9) == (100, 50)  # head first: a passage decides only far ahead of its head
    assert candidates(100, 1.0) == (100, 100)  # the better of: every passage competes in full
    assert candidates(EXACT_CANDIDATES, 0.9) == (EXACT_CANDIDATES, EXACT_CANDIDATES)  # (the probe: exact)


def test_the_shown_hits_passages_come_with_the_fetch_found_among_their_own_not_for_every_candidate() -> None:
    scope = read_scope({"ticker": "AAPL"}, None, what="search", multi_tenant=False)
    leg = knn_request([0.1, 0.2], scope=scope, k=50, num_candidates=20, passages=3, inner_hits=False)
    assert "inner_hits" not in leg["query"]["dis_max"]["queries"][1]["nested"]
    body = fetch_request("q", ["a", "b"], highlight=False, scope=scope, passages_for=([0.1, 0.2], 3))
    (nested,) = body["query"]["bool"]["should"]
    knn = nested["nested"]["query"]["knn"]
    assert knn["num_candidates"] == 10_000  # more than the shown documents' passages: an exact search
    assert {"ids": {"values": ["a", "b"]}} in knn["filter"]
    assert nested["nested"]["inner_hits"]["size"] == 3
    assert fetch_request("q", ["a"], highlight=False, scope=scope)["query"]["bool"].get("should") is None


def test_the_fetch_asks_its_highlighter_to_stop_where_the_targets_indices_allow() -> None:
    scope = read_scope(None, None, what="search", multi_tenant=False)
    assert fetch_request("q", ["a"], highlight=True, scope=scope)["highlight"]["max_analyzed_offset"] == 1_000_000
    body = fetch_request("q", ["a"], highlight=True, scope=scope, highlight_limit=5_000)
    assert body["highlight"]["max_analyzed_offset"] == 5_000
    assert "highlight" not in fetch_request("q", ["a"], highlight=False, scope=scope)
    # The limits come from a get-index answer: the smallest highlight limit of the target's indices, the
    # nested limit of its newest (the one written to); an index that sets none has Elasticsearch's defaults.
    answer = {
        "t-000001": {"mappings": {}, "settings": {"index": {"highlight": {"max_analyzed_offset": "20000"}}}},
        "t-000002": {"mappings": {}, "settings": {"index": {"mapping": {"nested_objects": {"limit": "50"}}}}},
    }
    info = target_info(answer)
    assert (info.highlight_limit, info.nested_limit) == (20_000, 50)
    assert (target_info({"t-000001": {"mappings": {}}}).highlight_limit, TargetInfo().nested_limit) == (
        1_000_000,
        10_000,
    )


def test_one_field_needs_no_dis_max() -> None:
    bm25 = bm25_request("q", scope=read_scope(None, None, what="search", multi_tenant=False), size=10, fields=["text"])
    assert bm25["query"]["bool"]["must"][0]["simple_query_string"]["fields"] == ["text"]


def test_query_hygiene_repairs_what_it_can() -> None:
    q = clean_query('  revenue\t"guidance \x00cut\ud800 ')
    assert q.text == "revenue guidance cut"
    assert q.adjustments == ["control_chars_removed", "quotes_repaired"]
    assert clean_query('"exact phrase" here').text == '"exact phrase" here'
    long = clean_query("word " * 400)
    assert len(long.text) <= 1000
    assert "truncated" in long.adjustments
    assert long.original_length == 2000


#: What str.isprintable() accepts: no control, format, surrogate, private or unassigned character, and no
#: separator but the ASCII space.
_PRINTABLE = st.characters(blacklist_categories=("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs")) | st.just(" ")


@given(st.text(alphabet=_PRINTABLE, max_size=40) | st.sampled_from(["a  b", " e\u0301  x ", "  "]))
def test_printable_text_skips_the_scan_and_gets_what_the_scan_would_give(text: str) -> None:
    """Printable text takes the short path (only runs of ASCII spaces to collapse); the rest of the cleaning
    must see what the full scrub, which every other text takes, would have given."""
    assume(text.isprintable())
    scrubbed = _scrubbed(text, adjustments := [])
    assert adjustments == []
    assume(scrubbed and not scrubbed.count('"') % 2)
    assert clean_query(text).text == scrubbed


@pytest.mark.parametrize("text", ["", "   ", "\x00\x01", '"', None, 42])
def test_empty_or_non_text_queries_are_invalid(text: object) -> None:
    with pytest.raises(InvalidQuery):
        clean_query(text)


def test_a_quoted_phrase_counts_as_a_phrase_in_the_whole_text_and_as_its_words_in_a_passage() -> None:
    scope = read_scope(None, None, what="search", multi_tenant=False)
    body = bm25_request('"heart attack" aspirin', scope=scope, size=10, passage_text=True, head_vectors=True)
    whole, best = body["query"]["bool"]["must"][0]["dis_max"]["queries"]
    assert {q["simple_query_string"]["query"] for q in whole["dis_max"]["queries"]} == {'"heart attack" aspirin'}
    # (a passage's text is indexed without positions: a phrase query there would match nothing)
    assert best["nested"]["query"]["simple_query_string"]["query"] == " heart attack  aspirin"
    assert best["nested"]["query"]["simple_query_string"]["fields"] == ["passages.text"]
    body = index_body(dimensions=2, normalized=True, model_id="m", analyzer="standard", passages=PassageSetting())
    passage = body["mappings"]["properties"]["passages"]["properties"]
    assert passage["text"]["index_options"] == "freqs"
    assert "index_options" not in body["mappings"]["properties"]["text"]  # the whole text keeps its positions


def test_a_new_version_of_an_index_takes_over_the_limits_set_on_the_one_it_follows() -> None:
    info = {
        "settings": {
            "index": {
                "number_of_shards": "3",
                "refresh_interval": "30s",
                "mapping": {"total_fields": {"limit": "2000"}, "nested_objects": {"limit": "20000"}},
                "highlight": {"max_analyzed_offset": "5000"},
            }
        }
    }
    assert carried_settings(info) == {
        "mapping.total_fields.limit": "2000",
        "mapping.nested_objects.limit": "20000",
        "highlight.max_analyzed_offset": "5000",
    }
    assert carried_settings({"settings": {"index": {"number_of_shards": "1"}}}) == {}
    assert carried_settings({}) == {}
