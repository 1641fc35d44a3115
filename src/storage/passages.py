"""Passages: where a long document is cut so that every part of it gets a vector. Pure: no I/O.

An embedding model reads a window of tokens (512 word pieces for bge-small: about 350 English words) and
a document's vector represents its first window only — the **head**. A document longer than that also gets
**passages**: windows of the model's own tokens (``PassageSetting.tokens``, never over what the window has
room for next to the title), cut at sentence ends where one is near, overlapping by
``PassageSetting.overlap`` tokens, each embedded with the document's title in front (the title is what
tells a passage from section 6 what it is about). Passages are positions in the text (character offsets),
so the text is stored once.

::

    text:     |=============================================================================|
    head:     |======================|                    (title + text, as far as the window reaches)
    passages: |==========|
                      |===========|          (overlap)
                                |==========|
                                          ...                                 |=============|

A document whose text fits in the window has no passages: its head is all of it (the vector it always had).
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "AGREEMENT_MIN_DOCUMENTS",
    "AGREEMENT_THRESHOLD",
    "DEFAULT_OVERLAP",
    "DEFAULT_TOKENS",
    "HEAD_FIRST_PASSAGE_WEIGHT",
    "Agreement",
    "Found",
    "PassagePlan",
    "PassageSetting",
    "Span",
    "agreement",
    "best_passages",
    "plan_passages",
    "sentence_starts",
    "split",
]

#: A token's (or a passage's) character offsets in the text: ``text[start:end]``.
Span = tuple[int, int]

#: Where a sentence (or a paragraph, or a line) starts: after ``. ! ?`` (and closing quotes or brackets)
#: followed by whitespace, or after a line break.
_SENTENCE_END = re.compile(r"""(?:(?<=[.!?])["'”’)\]]*\s+|\n\s*)""")


#: The defaults, chosen on two long collections (docs/benchmarks.md, bench/passages.py: bge-small int8,
#: exact cosine, nDCG@10 of the best of head and passages): 192 tokens is within 0.006 of the best mean
#: (128: 0.515 vs 0.510) with 40 % fewer vectors, and 0.025 above 256. A quarter of it overlaps.
DEFAULT_TOKENS = 192
DEFAULT_OVERLAP = 48


@dataclass(frozen=True, slots=True)
class PassageSetting:
    """How long documents are cut (recorded with the index, next to the model: ``_meta.embedding.passages``).
    ``tokens``: the model's tokens of text per passage (the title and the model's own tokens come on top;
    a window too small for that many is what bounds it); ``overlap``: tokens two consecutive passages
    share, so a sentence cut at one passage's end is whole in the next."""

    tokens: int = DEFAULT_TOKENS
    overlap: int = DEFAULT_OVERLAP

    def __post_init__(self) -> None:
        if self.tokens < 16:
            raise ValueError("passage tokens must be at least 16")
        if not 0 <= self.overlap <= self.tokens // 2:
            raise ValueError("passage overlap must be between 0 and half the passage tokens")

    def to_meta(self) -> dict[str, Any]:
        return {"tokens": self.tokens, "overlap": self.overlap}

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any]) -> PassageSetting:
        """The stored form; ``ValueError`` when it is not a valid one."""
        try:
            return cls(tokens=int(meta["tokens"]), overlap=int(meta["overlap"]))
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a passage setting: {dict(meta)!r}") from exc


def sentence_starts(text: str) -> list[int]:
    """Character offsets where a sentence (or line) begins, after the first, in order."""
    return [m.end() for m in _SENTENCE_END.finditer(text) if 0 < m.end() < len(text)]


def _cut_points(spans: Sequence[Span], starts: Sequence[int]) -> list[int]:
    """Token indices ``i`` (1..n-1) at which a sentence begins: a sentence start lies between token ``i-1``'s
    end and token ``i``'s start (inclusive)."""
    out: list[int] = []
    for i in range(1, len(spans)):
        j = bisect.bisect_left(starts, spans[i - 1][1])
        if j < len(starts) and starts[j] <= spans[i][0]:
            out.append(i)
    return out


def _word_start(spans: Sequence[Span], i: int, floor: int) -> int:
    """``i`` moved back to the first piece of its word (a word piece glued to the one before it continues
    that word); ``i`` itself when that word begins at ``floor`` or before (a word longer than the room, such
    as a table's border of dashes: cut inside it)."""
    j = i
    while j - 1 > floor and spans[j][0] == spans[j - 1][1]:
        j -= 1
    return i if j - 1 == floor and spans[j][0] == spans[j - 1][1] else j


def split(text: str, spans: Sequence[Span], *, budget: int, overlap: int) -> list[Span]:
    """``text`` cut into passages of at most ``budget`` of its tokens (``spans``: each token's offsets, in
    order), consecutive passages sharing about ``overlap`` tokens: each passage ends at a sentence end
    when there is one in its second half, else at a word start, and the next begins at a sentence start
    near ``overlap`` tokens before that end when there is one. Returns character offsets; every token is in
    a passage, the result depends on nothing but the arguments."""
    n = len(spans)
    if n == 0:
        return []
    if budget < 1:
        raise ValueError("budget must be >= 1")
    overlap = max(0, min(overlap, budget // 2))
    stride = max((budget - overlap) // 4, 1)
    cuts = _cut_points(spans, sentence_starts(text))
    out: list[Span] = []
    start, last_end = 0, 0
    while True:
        end = min(start + budget, n)
        if end < n:
            half = start + max(budget // 2, 1)
            k = bisect.bisect_right(cuts, end) - 1
            # A sentence's end in the second half, else a word's start.
            end = cuts[k] if k >= 0 and cuts[k] > half else _word_start(spans, end, half)
            if end <= last_end:  # it would add nothing the previous passage did not have
                end = min(start + budget, n)
        out.append((spans[start][0], spans[end - 1][1]))
        if end >= n:
            return out
        last_end = end
        target = max(end - overlap, start + 1)
        # (never less than a quarter of budget - overlap on: a text has at most about 4 × its tokens / (budget -
        # overlap) passages, whatever its sentences look like)
        start = max(_next_start(spans, cuts, target, floor=start, end=end, slack=overlap), start + stride)


def _next_start(spans: Sequence[Span], cuts: Sequence[int], target: int, *, floor: int, end: int, slack: int) -> int:
    """Where the next passage begins: the sentence start nearest ``target`` (within ``slack`` tokens of it,
    after ``floor`` and before ``end``), else ``target`` moved back to its word's first piece."""
    k = bisect.bisect_left(cuts, target)
    near = [c for c in cuts[max(k - 1, 0) : k + 1] if floor < c < end and abs(c - target) <= slack]
    if near:
        return min(near, key=lambda c: (abs(c - target), c))
    return _word_start(spans, target, floor)


@dataclass(frozen=True, slots=True)
class PassagePlan:
    """One document's vectors: its head (what the model reads of ``title + text``: the text up to
    ``head_end``) and, when the text goes on past it, its passages (character offsets in the text)."""

    head_end: int
    passages: tuple[Span, ...] = ()


def plan_passages(
    text: str,
    spans: Sequence[Span],
    *,
    title_tokens: int,
    window: int,
    overhead: int,
    setting: PassageSetting,
) -> PassagePlan:
    """Where ``text`` is cut (``spans``: its tokens' offsets under the model's tokenizer): the head is what
    fits in the model's ``window`` after its own ``overhead`` tokens (specials, a prefix), the title and the
    line between them; a text that goes on past the head also gets passages of at most ``setting.tokens``
    (and never more than the window has room for next to the title)."""
    room = window - overhead - (title_tokens + 1 if title_tokens else 0)
    if room < 1:  # a title that fills the window: the head is the title; the text is read in passages
        room = 0
    if len(spans) <= room:
        return PassagePlan(head_end=len(text))
    head_end = spans[room - 1][1] if room else 0
    budget = max(min(setting.tokens, window - overhead - title_tokens - 1), 1)
    return PassagePlan(head_end=head_end, passages=tuple(split(text, spans, budget=budget, overlap=setting.overlap)))


#: A passage a leg found: (start, end, score or None, leg).
Found = tuple[int, int, float | None, str]
_TAG = re.compile(r"</?em>")


def best_passages(
    text: str,
    stored: Sequence[Span],
    knn: Sequence[tuple[int, int, float]],
    fragments: Sequence[str],
    shown: int,
) -> list[Found]:
    """A hit's best passages: the kNN leg's (offsets and scores, best first, as the index returned them) and
    the stored passages that hold the BM25 leg's highlighted fragments (``stored``: the document's passage
    offsets, the head first), at most ``shown`` of each leg, none twice. A document read as one passage (its
    head is all of it) has none: its text is the passage."""
    if len(stored) < 2:
        return []
    out: list[Found] = []
    seen: set[Span] = set()
    for start, end, score in knn:
        span = (max(0, start), min(end, len(text)))
        if span not in seen and span[0] < span[1]:
            seen.add(span)
            out.append((span[0], span[1], score, "knn"))
        if len(out) >= shown:
            break
    found = 0
    windows = sorted(stored[1:]) or list(stored)  # the head overlaps every first window: prefer the windows
    for fragment in fragments:
        plain = _TAG.sub("", fragment).strip()
        at = text.find(plain) if plain else -1
        if at < 0:
            continue
        span = max(windows, key=lambda w: (min(w[1], at + len(plain)) - max(w[0], at), -w[0]))
        if span not in seen:
            seen.add(span)
            out.append((span[0], span[1], None, "bm25"))
            found += 1
        if found >= shown:
            break
    return out


# -- how far a long document's passages agree with its head ----------------------------------------------------

#: A collection whose long documents' median :func:`agreement` is at least this is read **head first**: its long
#: documents are about one topic that their heads already say (a manual page, an article), and the best of
#: many passages is a maximum over many chances that lifts a document by luck. Measured through the ingest
#: (docs/benchmarks.md, "passage agreement"): single-topic collections 0.66 (the Linux manual) and 0.93
#: (SciFact's long abstracts), reports joining many topics 0.37-0.40; the threshold sits midway between the
#: kinds, not on one set.
AGREEMENT_THRESHOLD = 0.55
#: A median of fewer long documents decides nothing (the better of, as before): a handful of long documents
#: among short ones is what passages are added for, and one document is not a collection.
AGREEMENT_MIN_DOCUMENTS = 16
#: Head first: a long document's best passage counts at this weight against its head in the kNN leg (it must
#: beat the head by a margin to decide: a needle deep in a long text is still found), and BM25 reads the
#: whole text only. Otherwise (reports of many topics) the better of head and best passage, each in full.
HEAD_FIRST_PASSAGE_WEIGHT = 0.9


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norms = math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))
    return dot / norms if norms else 0.0


def agreement(head: Sequence[float], passages: Sequence[Sequence[float]], background: float) -> float | None:
    """How far a long document's passages say what its head says: (mean cosine of its passages after the
    first with its head − ``background``) / (its first passage's cosine with its head − ``background``), where
    ``background`` is the cosine of two unrelated documents' heads under the same model (what makes the figure
    mean the same for every model). About 1: one topic throughout; about 0: its passages are as far from its
    head as other documents are. None for fewer than two passages, or a first passage no closer to its head
    than the background (nothing to measure against). Pure."""
    if len(passages) < 2:
        return None
    first = _cosine(passages[0], head) - background
    if first <= 1e-6:
        return None
    later = sum(_cosine(p, head) for p in passages[1:]) / (len(passages) - 1)
    return (later - background) / first


class Agreement:
    """One model's agreement figures: the background (the median cosine between the heads of the first
    :attr:`SAMPLE` documents embedded with it, once there are two) and each long document's
    :func:`agreement`. Kept by an ingester per model: a property of the model, not of a request. Pure."""

    SAMPLE = 48

    def __init__(self) -> None:
        self._heads: list[Sequence[float]] = []
        self._background: float | None = None

    def saw(self, documents: Sequence[Sequence[Sequence[float]]]) -> None:
        """The vectors of documents just embedded (each: its head's, then its passages')."""
        room = self.SAMPLE - len(self._heads)
        if room <= 0 or not documents:
            return
        self._heads += [vectors[0] for vectors in documents[:room]]
        pairs = sorted(_cosine(a, b) for i, a in enumerate(self._heads) for b in self._heads[i + 1 :])
        self._background = pairs[len(pairs) // 2] if pairs else None

    def of(self, vectors: Sequence[Sequence[float]]) -> float | None:
        """A document's agreement (``vectors``: its head's, then its passages'), rounded to three places; None
        for a document without two passages, or before the background is known."""
        if self._background is None or len(vectors) < 3:
            return None
        found = agreement(vectors[0], vectors[1:], self._background)
        return None if found is None else round(found, 3)
