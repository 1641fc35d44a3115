"""LLM-facing text is pure: formatting, budgets, the context assembler and citation extraction."""

from __future__ import annotations

from typing import Any

from storage import Answer, SearchHit, SearchResponse
from storage._errors import CircuitOpen, InvalidQuery, Overloaded, SearchFailed
from storage._types.answers import AnswerEntry, AnswerTimings
from storage.agent import assemble_context, error_message, extract_citations, format_answer, format_results
from storage.fusion import FusionSetting
from storage.types import Degradation


def _hit(i: int, text: str = "", **source: str) -> SearchHit:
    return SearchHit(
        id=f"d{i}",
        score=1 / (60 + i),
        normalized_score=1 - i / 100,
        ranks={"bm25": i, "knn": i + 1},
        source={"title": f"Title {i}", "text": text or f"Body of document {i}. " * 20, **source},
        highlights={"text": [f"the <em>revenue</em> of {i}"]},
    )


def _response(hits: list[SearchHit], **kw: object) -> SearchResponse:
    return SearchResponse(
        query="revenue",
        mode="hybrid",
        hits=hits,
        total_fused=len(hits),
        offset=0,
        limit=10,
        legs={},
        overlap=0,
        fusion=FusionSetting(),
        **kw,  # type: ignore[arg-type]
    )


def test_results_are_a_numbered_list_with_citations_provenance_and_clean_snippets() -> None:
    text = format_results(_response([_hit(1, source="reuters", published_at="2024-02-01")]))
    assert text.splitlines()[0] == '1 result for "revenue", best first. Cite them as [#id].'
    assert "1. [#d1] Title 1" in text
    assert "date: 2024-02-01" in text
    assert "relevance: 0.99" in text
    assert "found by: keyword #1, semantic #2" in text
    assert "the revenue of 1" in text
    assert "<em>" not in text


def test_the_observation_stays_within_its_budget_and_says_what_it_left_out() -> None:
    hits = [_hit(i) for i in range(1, 30)]
    text = format_results(_response(hits), max_chars=1200, snippet_chars=200)
    assert len(text) <= 1200
    assert text.startswith('Showing 11 of 29 results for "revenue" (the rest did not fit)')
    assert text.count("\n   relevance") == 11


def test_asked_for_many_results_snippets_shorten_before_results_are_left_out() -> None:
    hits = [_hit(i, text=f"revenue detail {i} " * 40) for i in range(1, 21)]
    for hit in hits:
        hit.highlights.clear()
    text = format_results(_response(hits), max_chars=4000, snippet_chars=280)
    assert len(text) <= 4000
    assert text.startswith('20 results for "revenue"')
    few = format_results(_response(hits[:3]), max_chars=4000, snippet_chars=280)
    assert max(len(line) for line in few.splitlines()) > 200  # few results keep their whole snippet
    tiny = format_results(_response(hits[:1]), max_chars=150)
    assert "[#d1]" in tiny


def test_no_hits_and_degraded_results_are_said_in_one_line() -> None:
    assert "No matches" in format_results(_response([]))
    assert "rephras" in format_results(_response([]))
    degraded = format_results(_response([_hit(1)], degradation=Degradation(legs_failed=["knn"], reason="timeout")))
    assert "Note: partial results — semantic search was unavailable (timeout)." in degraded


def test_typed_errors_become_short_actionable_sentences() -> None:
    assert "about 30 seconds" in error_message(CircuitOpen("x", dependency="elasticsearch"), retry_after_s=30)
    both_open = SearchFailed("x", leg_errors={"bm25": CircuitOpen("x", dependency="elasticsearch")})
    assert "temporarily unavailable" in error_message(both_open)
    assert "busy" in error_message(Overloaded("x", dependency="elasticsearch"))
    assert "empty" in error_message(InvalidQuery("query is empty"))
    for msg in (error_message(both_open), error_message(InvalidQuery("a\nb"))):
        assert "Traceback" not in msg
        assert "\n" not in msg


def test_context_entries_fit_and_only_the_last_is_cut_when_enough_of_it_fits() -> None:
    hits = [_hit(i, text="x" * 300, published_at="2024-01-0" + str(i), source="wire") for i in range(1, 5)]
    whole = assemble_context(hits[:2], max_context_chars=10_000)
    assert whole.ids == ["d1", "d2"]
    assert not whole.truncated
    assert whole.text.startswith("ENTRY #d1 | 2024-01-01 | wire | Title 1\n")
    one_and_a_bit = len(whole.text.split("\n\n")[0]) + 2 + 40 + 150
    cut = assemble_context(hits, max_context_chars=one_and_a_bit)
    assert cut.ids == ["d1", "d2"]
    assert cut.truncated
    assert cut.text.endswith("…")
    assert len(cut.text) <= one_and_a_bit
    no_room = assemble_context(hits, max_context_chars=len(whole.text.split("\n\n")[0]) + 60)
    assert no_room.ids == ["d1"]
    assert no_room.truncated


def test_citations_are_unique_in_order_and_fall_back_to_everything_included() -> None:
    included = ["a", "b", "c"]
    assert extract_citations("B says [#b], and [#a]; again [#b] and [#zz].", included) == ["b", "a"]
    assert extract_citations("No citations here.", included) == included


def _answer(**fields: Any) -> Answer:
    entries = [AnswerEntry(id=f"d{i}", title=f"Title {i}", score=1.0, rank=i) for i in (1, 2)]
    values: dict[str, Any] = {
        "question": "Why?",
        "answer": "Because [#d2].",
        "status": "answered",
        "citations": ["d2"],
        "entries": entries,
        "search": _response([_hit(1), _hit(2)]),
        "timings": AnswerTimings(search_ms=1.0, total_ms=2.0),
        "reasoning": "",
    }
    return Answer(**(values | fields))


def test_a_cited_answer_lists_only_the_sources_it_cites() -> None:
    text = format_answer(_answer())
    assert text == "Because [#d2].\n\nSources:\n[#d2] Title 2"


def test_an_uncited_answer_is_never_shown_with_sources() -> None:
    answer = _answer(answer="Ulaanbaatar.", citations=["d1", "d2"], citations_fallback=True)
    assert answer.uncited
    assert answer.sources == []
    text = format_answer(answer)
    assert text.startswith("Uncited answer (not supported by a source): Ulaanbaatar.")
    assert "Sources:" not in text
    assert "Documents it was given (not cited):\n[#d1] Title 1\n[#d2] Title 2" in text


def test_an_answer_with_no_context_or_a_failed_model_says_so() -> None:
    none_fit = format_answer(_answer(answer=None, status="no_context", citations=[], entries=[]))
    assert none_fit.startswith("No answer: the documents found did not fit the answering model's context")
    assert "[#d1] Title 1" in none_fit
    failed = format_answer(
        _answer(answer=None, status="llm_failed", degradation=Degradation(reason="llm_context_too_long"))
    )
    assert failed.startswith("No answer: the answering model failed (llm_context_too_long).")
    assert "Sources:" not in failed


def test_a_long_passage_is_cut_around_the_words_that_matched_and_from_its_start_when_the_match_is_semantic() -> None:
    from storage._dsl.text import around_match
    from storage.agent._format import snippet
    from storage.types import Passage

    passage = "Previous human glioblastoma publications have identified many markers. " * 6 + (
        "The Orvieto ceramic kiln reached a firing temperature of 1,287 degrees in the winter trial."
    )
    fragments = ["a <em>firing</em> <em>temperature</em> of 1,287"]
    hit = SearchHit(
        id="d1",
        score=0.1,
        normalized_score=0.5,
        source={"text": passage},
        highlights={"text": fragments},
        passages=[Passage(start=0, end=len(passage), text=passage, leg="bm25")],
    )
    shown = snippet(hit, 120)
    assert shown.startswith("…")
    assert "firing temperature of 1,287 degrees" in shown
    assert len(shown) <= 120
    assert around_match(passage, [], 120).startswith("Previous human glioblastoma")  # semantic: its start
    assert around_match("short text", fragments, 120) == "short text"
    early = around_match(passage, ["<em>Previous</em> human"], 120)
    assert early.startswith("Previous human")
    assert len(early) <= 120
