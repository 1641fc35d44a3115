"""What an answer is built from and checked against: the RAG context and its citations. Pure: no I/O.

::

    hits ─assemble_context─▶ ENTRY #id | date | source | title blocks (within a budget): each document's
                             best passages in text order (a document read in passages), else its text
    model's text ─parse_citations / CitationCheck─▶ cited ids (in the context) and invented ones

Used by the answer (``storage._answer``) and re-exported for RAG callers by the agent tool
(``storage.agent``), which sits above the client; nothing here imports either.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ._results import SearchHit

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


def _entry_body(hit: SearchHit) -> tuple[str, list[tuple[int, int]]]:
    """What an entry says of a hit: its best passages in text order (merged where they overlap, `` … ``
    between them), or its whole text when it is one passage; and which parts of the text those are."""
    text = hit.text
    if not hit.passages:
        return _SPACES.sub(" ", text).strip(), [(0, len(text))]
    spans = merged_spans([(p.start, p.end) for p in hit.passages])
    parts = [_SPACES.sub(" ", text[start:end]).strip() for start, end in spans]
    return " … ".join(p for p in parts if p), spans


def assemble_context(
    hits: Sequence[SearchHit], *, max_context_chars: int, min_partial_chars: int = 100
) -> AssembledContext:
    """``ENTRY #id | date | source | title`` blocks, best first, within ``max_context_chars``; the last entry
    is cut only if at least ``min_partial_chars`` of its text fit, otherwise left out. A document read in
    passages contributes its best passages (the ones its hit carries), not its head."""
    blocks: list[str] = []
    ids: list[str] = []
    spans: dict[str, list[tuple[int, int]]] = {}
    used = 0
    truncated = False
    for hit in hits:
        header = _entry_header(hit)
        body, parts = _entry_body(hit)
        sep = 2 if blocks else 0
        block = f"{header}\n{body}"
        if used + sep + len(block) <= max_context_chars:
            blocks.append(block)
            ids.append(hit.id)
            spans[hit.id] = parts
            used += sep + len(block)
            continue
        truncated = True
        room = max_context_chars - used - sep - len(header) - 1
        if room >= min_partial_chars:
            blocks.append(f"{header}\n{body[: room - 1]}…")
            ids.append(hit.id)
            spans[hit.id] = parts
        break
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
