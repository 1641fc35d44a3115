"""What an answer is built from and checked against: the RAG context and its citations. Pure: no I/O.

::

    hits ─assemble_context─▶ ENTRY #id | date | source | title blocks (within a budget): the budget filled
                             by relevance (every hit's best passage first, then the second best...), each
                             entry's chosen passages read in text order (a document read in passages)
    model's text ─parse_citations / CitationCheck─▶ cited ids (in the context) and invented ones

Used by the answer (``storage._rag.answerer``) and re-exported for RAG callers by the agent tool
(``storage.agent``), which sits above the client; nothing here imports either.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .._types.results import SearchHit

__all__ = [
    "AssembledContext",
    "CitationCheck",
    "assemble_context",
    "context_budget",
    "display_value",
    "extract_citations",
    "merged_spans",
    "parse_citations",
]

_SPACES = re.compile(r"\s+")
_MIDNIGHT = re.compile(r"^(\d{4}-\d{2}-\d{2})T00:00(:00(\.0+)?)?(Z|[+-]00:?00)?$")
#: ``[#id]``, and the lists small models write: ``[#a, #b]``, ``[#a; #b]``.
_BRACKETS = re.compile(r"\[\s*(#[^\]\n]{1,600})\]")
_CITED_ID = re.compile(r"#\s*([^\s,;#\]]+)")
#: Chars per token assumed when fitting the context to a model's window: English prose runs ~4, code and
#: numbers fewer; 3 leaves a margin.
_CHARS_PER_TOKEN = 3


def display_value(value: Any) -> str:
    """A value as an LLM should read it: a datetime at midnight is just its date."""
    text = str(value)
    m = _MIDNIGHT.match(text)
    return m.group(1) if m else text


# -- the context ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AssembledContext:
    text: str
    #: The hit ids whose entries are in ``text``, in order.
    ids: list[str]
    #: True when an entry was cut or left out to respect ``max_context_chars``.
    truncated: bool
    #: id -> the parts of its text the entry holds (character offsets, text order): its best passages, or
    #: the whole text (``(0, len)``) for a document that is one passage.
    spans: dict[str, list[tuple[int, int]]] = field(default_factory=dict)


def _entry_header(hit: SearchHit) -> str:
    src = hit.source
    date_ = display_value(src.get("published_at") or "-")
    return f"ENTRY #{hit.id} | {date_} | {src.get('source') or '-'} | {src.get('title') or '-'}"


def merged_spans(spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping or touching spans merged, in text order."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def _parts(hit: SearchHit) -> list[tuple[int, int]]:
    """The parts of a hit's text an entry may hold, best first: its best passages (as its hit ranks them), or
    its whole text when it is one passage."""
    if not hit.passages:
        return [(0, len(hit.text))]
    return list(dict.fromkeys((p.start, p.end) for p in hit.passages))


def _render(text: str, spans: Sequence[tuple[int, int]], cut: int | None = None) -> str:
    """The chosen parts in text order (merged where they overlap, `` … `` between them); ``cut``: the body
    ends there, marked with an ellipsis."""
    parts = [_SPACES.sub(" ", text[start:end]).strip() for start, end in merged_spans(spans)]
    body = " … ".join(p for p in parts if p)
    return body if cut is None or cut >= len(body) else body[: max(cut - 1, 0)] + "…"


def assemble_context(
    hits: Sequence[SearchHit], *, max_context_chars: int, min_partial_chars: int = 100
) -> AssembledContext:
    """``ENTRY #id | date | source | title`` blocks, best first, within ``max_context_chars``.

    What goes into the budget is chosen by relevance, across documents and within one: every hit's best part
    first (in rank order), then each one's second best, and so on — so the passage that matched best is never
    the one left out for a weaker passage that happens to come earlier in the text. Each entry then reads its
    chosen parts in text order. A part is a document's passage (a document read in passages: the ones its
    hit carries) or its whole text. A hit whose best part does not fit whole gets it cut when at least
    ``min_partial_chars`` of it fit (else it and every hit below it are left out); a later part that does not
    fit is left out."""
    text_of = {hit.id: hit.text for hit in hits}
    chosen: dict[str, list[tuple[int, int]]] = {}
    headers: dict[str, str] = {}
    cut: dict[str, int] = {}
    parts = {hit.id: _parts(hit) for hit in hits}
    used = 0
    truncated = False
    depth = max((len(p) for p in parts.values()), default=0)
    for round_ in range(depth):
        for hit in hits:
            if hit.id in cut or round_ >= len(parts[hit.id]) or (round_ > 0 and hit.id not in chosen):
                continue
            start, end = parts[hit.id][round_]
            size = len(_SPACES.sub(" ", hit.text[start:end]).strip())
            if hit.id in chosen:
                cost = 3 + size
            else:
                headers[hit.id] = _entry_header(hit)
                cost = (2 if chosen else 0) + len(headers[hit.id]) + 1 + size
            if used + cost <= max_context_chars:
                chosen.setdefault(hit.id, []).append((start, end))
                used += cost
                continue
            truncated = True
            if round_ == 0:
                room = max_context_chars - used - cost + size
                if room >= min_partial_chars:
                    chosen[hit.id] = [(start, end)]
                    cut[hit.id] = room
                    used = max_context_chars
                break  # nothing below a hit that did not fit
    ids = [hit.id for hit in hits if hit.id in chosen]
    blocks = [f"{headers[i]}\n{_render(text_of[i], chosen[i], cut.get(i))}" for i in ids]
    spans = {i: merged_spans(chosen[i]) for i in ids}
    return AssembledContext(text="\n\n".join(blocks), ids=ids, truncated=truncated, spans=spans)


def context_budget(
    max_context_chars: int, *, context_tokens: int | None, max_tokens: int | None, overhead_chars: int
) -> int:
    """The context's characters: ``max_context_chars``, and, when the model's window is known, what fits in
    it next to the prompt and the answer (at ~3 characters per token)."""
    if context_tokens is None:
        return max_context_chars
    room = (context_tokens - (max_tokens or 0)) * _CHARS_PER_TOKEN - overhead_chars
    return max(0, min(max_context_chars, room))


# -- citations -----------------------------------------------------------------------------------------


def parse_citations(text: str) -> list[str]:
    """Every ``[#id]`` in ``text`` (also ``[#a, #b]``), unique, in order of first appearance."""
    seen: dict[str, None] = {}
    for bracket in _BRACKETS.finditer(text):
        for cited in _CITED_ID.finditer(bracket.group(1)):
            seen.setdefault(cited.group(1).strip().rstrip(".:"), None)
    return [c for c in seen if c]


@dataclass(frozen=True, slots=True)
class CitationCheck:
    """The answer's citations split into real (in the context) and invented ones."""

    cited: list[str]
    invented: list[str]
    fallback: bool

    @classmethod
    def of(cls, text: str, included: Sequence[str], *, allow_fallback: bool = True) -> CitationCheck:
        """Citations of ``text`` against the ``included`` ids; when none is real and ``allow_fallback``,
        every included id (the answer drew on the whole context)."""
        allowed = set(included)
        found = parse_citations(text)
        cited = [c for c in found if c in allowed]
        invented = [c for c in found if c not in allowed]
        if not cited and allow_fallback:
            return cls(cited=list(dict.fromkeys(included)), invented=invented, fallback=bool(included))
        return cls(cited=cited, invented=invented, fallback=False)


def extract_citations(answer: str, included_ids: Sequence[str]) -> list[str]:
    """The ``[#id]`` citations in ``answer`` that refer to included entries, unique and in order; when the
    answer cites none of them, every included id (the answer drew on the whole context)."""
    return CitationCheck.of(answer, included_ids).cited
