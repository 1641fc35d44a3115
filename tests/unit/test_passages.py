"""The passage splitter (pure): offsets cover the text, no passage over its budget, deterministic."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage._errors import DependencyError
from storage._indexing.intake import Embedded, Record, transport_failure
from storage._transport.targets import TargetInfo
from storage.passages import (
    AGREEMENT_MIN_DOCUMENTS,
    AGREEMENT_THRESHOLD,
    Agreement,
    PassageSetting,
    agreement,
    plan_passages,
    sentence_starts,
    split,
)

_PIECE = re.compile(r"\w{1,4}|[^\w\s]")


def _spans(text: str) -> list[tuple[int, int]]:
    """A word-piece-like tokenizer: words in pieces of at most four characters (glued), punctuation alone."""
    return [m.span() for m in _PIECE.finditer(text)]


_WORDS = st.sampled_from(
    ["revenue", "guidance", "a", "cut", "of", "quarterly", "Apple", "x", "internationalisation", "+" + "-" * 90 + "+"]
)
_TEXTS = st.lists(
    st.tuples(st.lists(_WORDS, min_size=1, max_size=25), st.sampled_from([". ", "! ", "? ", ", ", "\n", " "])),
    min_size=0,
    max_size=40,
).map(lambda parts: "".join(" ".join(words) + end for words, end in parts))


@settings(max_examples=300, deadline=None)
@given(_TEXTS, st.integers(4, 80), st.integers(0, 40))
def test_passages_cover_every_token_stay_within_the_budget_and_are_deterministic(
    text: str, budget: int, overlap: int
) -> None:
    spans = _spans(text)
    passages = split(text, spans, budget=budget, overlap=overlap)
    assert passages == split(text, spans, budget=budget, overlap=overlap)
    if not spans:
        assert passages == []
        return
    covered = set()
    for start, end in passages:
        inside = [i for i, (s, e) in enumerate(spans) if s >= start and e <= end]
        assert 1 <= len(inside) <= budget
        covered.update(inside)
    assert covered == set(range(len(spans)))
    assert passages[0][0] == spans[0][0]
    assert passages[-1][1] == spans[-1][1]
    assert all(a[0] < b[0] and a[1] < b[1] for a, b in itertools.pairwise(passages))
    # Each passage starts at least a quarter of (budget - overlap) tokens after the one before: what a document
    # costs is bounded by its length, whatever its sentences and words look like.
    stride = max((budget - min(overlap, budget // 2)) // 4, 1)
    assert len(passages) <= (len(spans) - 1) // stride + 1


def test_a_word_longer_than_a_passage_is_cut_inside_and_the_passages_still_move_on() -> None:
    """A table's border (``+----...``: hundreds of one-character pieces glued together) used to make every
    passage start one piece after the one before: a 3,000-word README got 15,557 passages (133 MB of JSON
    in one bulk request, which Elasticsearch refused with a 413)."""
    border = "+" + "-" * 600 + "+"
    text = f"Connection parameters follow. {border}\n| host | the server |\n{border}\nThat is all."
    spans = _spans(text)
    passages = split(text, spans, budget=24, overlap=6)
    assert len(passages) <= 2 * len(spans) // (24 - 6) + 1  # about one per 18 pieces, not one per piece
    assert max(len([s for s in spans if a <= s[0] and s[1] <= b]) for a, b in passages) == 24


def test_a_passage_ends_at_a_sentence_end_when_one_is_in_its_second_half() -> None:
    sentence = "Revenue fell in the quarter as demand cooled. "
    text = sentence * 12
    passages = split(text, _spans(text), budget=40, overlap=8)
    assert len(passages) > 2
    for start, end in passages[:-1]:
        assert text[start:end].endswith("cooled.")
        assert text[start:].startswith("Revenue")


def test_a_text_that_fits_the_window_has_no_passages_and_a_longer_one_is_read_to_its_end() -> None:
    setting = PassageSetting(tokens=32, overlap=8)
    short = "Apple cut guidance. " * 3
    plan = plan_passages(short, _spans(short), title_tokens=3, window=64, overhead=2, setting=setting)
    assert plan.head_end == len(short)
    assert plan.passages == ()
    long = "Apple cut its revenue guidance for the quarter. " * 40
    plan = plan_passages(long, _spans(long), title_tokens=3, window=64, overhead=2, setting=setting)
    assert 0 < plan.head_end < len(long)
    assert plan.passages[-1][1] == len(long.rstrip())
    assert all(len(_spans(long[s:e])) <= 32 for s, e in plan.passages)
    tight = plan_passages(long, _spans(long), title_tokens=50, window=64, overhead=2, setting=setting)
    assert all(len(_spans(long[s:e])) <= 64 - 2 - 50 - 1 for s, e in tight.passages)  # the title's room first


def test_sentence_starts_and_the_setting_round_trip() -> None:
    assert sentence_starts('One. "Two!" Three?\nFour') == [5, 12, 19]
    assert PassageSetting.from_meta(PassageSetting(100, 20).to_meta()) == PassageSetting(100, 20)
    with pytest.raises(ValueError, match="overlap"):
        PassageSetting(tokens=100, overlap=80)
    with pytest.raises(ValueError, match="not a passage setting"):
        PassageSetting.from_meta({"tokens": 10})


def _unit(*xs: float) -> list[float]:
    norm = sum(x * x for x in xs) ** 0.5
    return [x / norm for x in xs]


def test_agreement_is_about_one_for_one_topic_and_about_zero_for_passages_as_far_as_other_documents() -> None:
    head = _unit(1, 0, 0, 0)
    first = _unit(1, 0.1, 0, 0)  # the first passage says what the head says
    same = [_unit(1, 0.1, 0.05, 0), _unit(1, 0, 0.1, 0)]
    other = [_unit(0.3, 0, 1, 0), _unit(0.3, 0, 0, 1)]  # as far from the head as another document is
    background = 0.287  # (cosine of two unrelated heads under this "model")
    one_topic = agreement(head, [first, *same], background)
    many = agreement(head, [first, *other], background)
    assert one_topic is not None
    assert one_topic > 0.9
    assert many is not None
    assert abs(many) < 0.05
    assert agreement(head, [first], background) is None  # one passage: nothing to compare
    assert agreement(head, [_unit(0, 1, 0, 0), first], 0.5) is None  # a first passage no closer than background


def test_an_ingest_call_measures_agreement_once_it_has_seen_two_documents() -> None:
    measure = Agreement()
    long = [_unit(1, 0, 0, 0), _unit(1, 0.1, 0, 0), _unit(1, 0, 0.1, 0)]
    measure.saw([long])
    assert measure.of(long) is None  # one document: nothing to tell "unrelated" by yet
    measure.saw([[_unit(0, 1, 0, 0), _unit(0, 1, 0.1, 0)]])
    found = measure.of(long)
    assert found is not None
    assert found > AGREEMENT_THRESHOLD
    assert measure.of(long[:2]) is None  # a head and one passage: not a long document's figure


def test_a_target_whose_long_documents_agree_is_read_head_first() -> None:
    enough = AGREEMENT_MIN_DOCUMENTS
    assert not TargetInfo(passages=True, agreement=None).head_first  # not measured: the better of, in full
    assert not TargetInfo(passages=True, agreement=AGREEMENT_THRESHOLD - 0.01, agreement_documents=enough).head_first
    assert TargetInfo(passages=True, agreement=AGREEMENT_THRESHOLD, agreement_documents=enough).head_first
    assert not TargetInfo(passages=True, agreement=0.9, agreement_documents=enough - 1).head_first  # too few


def test_a_long_documents_head_vector_is_written_once_not_again_among_its_passages() -> None:
    record = Record(id="d", source={"text": "x" * 30}, title="", text="x" * 30)
    spans, vectors = ((0, 12), (10, 22), (20, 30)), [[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]]
    written = Embedded(record, vectors, spans).source_for(with_text=True)
    assert written["embedding"] == [1.0, 0.0]
    head, *rest = written["passages"]
    assert "vector" not in head
    assert (head["start"], head["end"], head["text"]) == (0, 12, "x" * 12)
    assert [p["vector"] for p in rest] == [[0.0, 1.0], [0.6, 0.8]]
    # An index before mapping version 4 reads nested vectors only: there the head keeps its vector.
    old = Embedded(record, vectors, spans).source_for(with_text=True, nested_heads=True)
    assert [p["vector"] for p in old["passages"]] == vectors


def test_a_bulk_request_refused_as_too_large_fails_its_documents_as_too_large_not_as_an_unknown_outcome() -> None:
    refused = DependencyError("Elasticsearch answered 413: None", dependency="elasticsearch", status=413)
    failed = transport_failure("big", refused)
    assert (failed.reason, failed.status) == ("too_large", 413)
    assert "nothing of it was written" in failed.detail
    lost = transport_failure("x", DependencyError("reset", dependency="elasticsearch", status=None))
    assert "outcome unknown" in lost.detail
