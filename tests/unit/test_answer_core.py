"""The pure parts of answers: citation parsing and checking, the prompt, the context budget, the reasoning."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from storage import ConfigurationError, SearchHit, SearchResponse
from storage._rag.answerer import reasoning
from storage._rag.context import CitationCheck, context_budget, parse_citations
from storage.agent import assemble_context
from storage.types import AnswerPrompt


def test_citations_come_in_order_of_first_appearance_without_repeats() -> None:
    text = "Yes [#b]. Also [#a] and again [#b]. Lists too: [#c, #d] [#e; #a]."
    assert parse_citations(text) == ["b", "a", "c", "d", "e"]


@pytest.mark.parametrize(
    ("text", "ids"),
    [
        ("no citations at all", []),
        ("a hashtag #b outside brackets is not a citation", []),
        ("[b] without the hash is not one", []),
        ("[#4983].", ["4983"]),
        ("[# 12]", ["12"]),
        ("[#doc-1:part]", ["doc-1:part"]),
        ("[#a] [#a.]", ["a"]),
    ],
)
def test_what_counts_as_a_citation(text: str, ids: list[str]) -> None:
    assert parse_citations(text) == ids


def test_invented_citations_are_kept_apart_never_sources() -> None:
    check = CitationCheck.of("Yes [#x] and [#a], see [#zz].", ["a", "b"])
    assert check.cited == ["a"]
    assert check.invented == ["x", "zz"]
    assert not check.fallback


def test_an_answer_citing_no_entry_cites_them_all() -> None:
    check = CitationCheck.of("Yes, it does [#nope].", ["a", "b"])
    assert check.cited == ["a", "b"]
    assert check.fallback
    assert check.invented == ["nope"]
    assert CitationCheck.of("No idea.", ["a"], allow_fallback=False).cited == []


@given(st.lists(st.text(alphabet="abc123-_", min_size=1, max_size=6), max_size=8), st.data())
def test_cited_ids_are_always_a_subset_of_the_context(ids: list[str], data: st.DataObject) -> None:
    cited = data.draw(st.lists(st.text(alphabet="abcxyz123", min_size=1, max_size=6), max_size=8))
    text = " ".join(f"claim [#{c}]." for c in cited)
    check = CitationCheck.of(text, ids)
    assert set(check.cited) <= set(ids)
    assert not set(check.invented) & set(ids)
    assert len(check.cited) == len(set(check.cited))


def test_the_prompt_fills_its_placeholders_once() -> None:
    prompt = AnswerPrompt()
    messages = prompt.messages("What is {context}?", "ENTRY #1 | - | - | t\nbody {question}")
    assert [m["role"] for m in messages] == ["system", "user"]
    user = messages[1]["content"]
    assert "ENTRY #1" in user
    assert "What is {context}?" in user  # a question with braces is not expanded again
    assert "body {question}" in user
    assert prompt.no_answer in messages[0]["content"]
    assert "[#<id>]" in messages[0]["content"]


def test_a_prompt_without_placeholders_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="context"):
        AnswerPrompt(system="Answer.", user="{question}")


def test_the_context_budget_respects_the_models_window() -> None:
    assert context_budget(6000, context_tokens=None, max_tokens=512, overhead_chars=900) == 6000
    # 2048 tokens, 512 for the answer: (2048 - 512) * 3 - 900 = 3708 characters of context at most.
    assert context_budget(6000, context_tokens=2048, max_tokens=512, overhead_chars=900) == 3708
    assert context_budget(6000, context_tokens=600, max_tokens=512, overhead_chars=900) == 0


def _hit(doc_id: str, text: str) -> SearchHit:
    return SearchHit(id=doc_id, score=1.0, normalized_score=1.0, source={"title": f"t{doc_id}", "text": text})


def _response(hits: list[SearchHit]) -> SearchResponse:
    return SearchResponse(
        query="q",
        mode="hybrid",
        hits=hits,
        total_fused=len(hits),
        offset=0,
        limit=5,
        legs={},
        overlap=0,
        fusion={"method": "rrf"},
    )


def test_the_reasoning_says_what_was_searched_given_and_cited() -> None:
    hits = [_hit("a", "x" * 50), _hit("b", "y" * 50)]
    context = assemble_context(hits, max_context_chars=10_000)
    check = CitationCheck.of("It is [#a] [#q].", context.ids)
    text = reasoning(_response(hits), context, "answered", check, "openai-chat:m", 1.25, None)
    assert "returned 2 hits" in text
    assert "2 went into the context" in text
    assert "citing #a" in text
    assert "#q, not in the context: dropped" in text
    nothing = reasoning(_response([]), None, "nothing_found", CitationCheck([], [], False), "m", None, None)
    assert "no chat model was asked" in nothing


def _long_hit(doc_id: str, text: str, passages: list[tuple[int, int]]) -> SearchHit:
    """A hit of a document read in passages: ``passages`` best first, as the search gives them."""
    return SearchHit.model_validate(
        {
            "id": doc_id,
            "score": 1.0,
            "normalized_score": 1.0,
            "source": {"title": doc_id, "text": text},
            "passages": [
                {"start": s, "end": e, "text": text[s:e], "leg": "knn", "score": 0.9 - n / 10}
                for n, (s, e) in enumerate(passages)
            ],
        }
    )


def test_a_tight_budget_keeps_the_best_passage_and_reads_what_it_kept_in_text_order() -> None:
    # A 6,000-word report: two weaker matches early, the one holding the answer about 60 % in.
    words = [f"w{i}" for i in range(6000)]
    text = " ".join(words)
    early, middle, answer = (
        (len(" ".join(words[:1500])) + 1, len(" ".join(words[:1700]))),
        (len(" ".join(words[:2700])) + 1, len(" ".join(words[:2900]))),
        (len(" ".join(words[:3600])) + 1, len(" ".join(words[:3800]))),
    )
    report = _long_hit("report", text, [answer, early, middle])  # best first: the answer's passage
    other = _long_hit("other", "z " * 1000, [(0, 400)])
    # Room for about two passages: the best passage of each document, nothing earlier in the text instead.
    one_each = assemble_context([report, other], max_context_chars=1800)
    assert one_each.ids == ["report", "other"]
    assert one_each.spans["report"] == [answer]
    assert "w3600" in one_each.text
    assert "w1500" not in one_each.text
    assert one_each.truncated
    # Room for two of the report's passages: the best two by relevance, read in text order.
    two = assemble_context([report], max_context_chars=2 * 1400)
    assert two.spans["report"] == [early, answer]
    assert two.text.index("w1500") < two.text.index("w3600")
    assert "w2700" not in two.text
    # Room for everything: every passage, in text order, nothing truncated.
    whole = assemble_context([report, other], max_context_chars=100_000)
    assert whole.spans["report"] == [early, middle, answer]
    assert not whole.truncated
