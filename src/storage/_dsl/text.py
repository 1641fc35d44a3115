"""Query text hygiene: what user (or LLM) text goes through before it reaches Elasticsearch.

Rules, in order:
- lone surrogates and control characters are removed (tabs and newlines become spaces);
- Unicode is NFC-normalised and whitespace collapsed;
- empty or whitespace-only text is an :class:`InvalidQuery` (a typed error, not an empty result: an empty
  query is a caller bug that an empty list would hide);
- text over ``max_chars`` (1,000) is cut at a word boundary (``truncated`` in the adjustments, logged);
- an odd number of double quotes is repaired by dropping the last one (``quotes_repaired``).
Lucene special characters need no escaping: the BM25 leg uses ``simple_query_string`` with only the
PHRASE and WHITESPACE operators enabled, which treats everything else as literal text and never raises.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field

from .._errors import InvalidQuery

__all__ = ["MAX_QUERY_CHARS", "CleanQuery", "clean_query", "clip"]

MAX_QUERY_CHARS = 1000
_WHITESPACE = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class CleanQuery:
    text: str
    original_length: int
    adjustments: list[str] = field(default_factory=list)


def clean_query(text: object, *, max_chars: int = MAX_QUERY_CHARS) -> CleanQuery:
    if not isinstance(text, str):
        raise InvalidQuery(f"query must be a string, got {type(text).__name__}")
    adjustments: list[str] = []
    if text.isprintable():
        # No control, format or surrogate character, and no whitespace but the ASCII space (isprintable()
        # is False for every other one): nothing to scan, and runs of spaces are the only ones to collapse.
        cleaned = unicodedata.normalize("NFC", text)
        cleaned = (_WHITESPACE.sub(" ", cleaned) if "  " in cleaned else cleaned).strip()
    else:
        cleaned = _scrubbed(text, adjustments)
    if not cleaned:
        raise InvalidQuery("query is empty (or only whitespace / control characters)")
    if len(cleaned) > max_chars:
        cut = cleaned[:max_chars]
        space = cut.rfind(" ")
        cleaned = (cut[:space] if space > max_chars // 2 else cut).rstrip()
        adjustments.append("truncated")
    if cleaned.count('"') % 2:
        last = cleaned.rfind('"')
        cleaned = (cleaned[:last] + cleaned[last + 1 :]).strip()
        adjustments.append("quotes_repaired")
        if not cleaned:
            raise InvalidQuery("query is empty after removing an unbalanced quote")
    return CleanQuery(cleaned, len(text), adjustments)


def _scrubbed(text: str, adjustments: list[str]) -> str:
    """Text with a character :meth:`str.isprintable` refuses: lone surrogates and control / format
    characters removed (the zero-width joiner kept), tabs and newlines as spaces, NFC, whitespace collapsed."""
    kept: list[str] = []
    removed = False
    for ch in text:
        code = ord(ch)
        if 0xD800 <= code <= 0xDFFF:
            removed = True
            continue
        if ch in "\t\n\r\v\f":
            kept.append(" ")
            continue
        if unicodedata.category(ch) in ("Cc", "Cf") and ch not in "\u200d":
            removed = True
            continue
        kept.append(ch)
    if removed:
        adjustments.append("control_chars_removed")
    return _WHITESPACE.sub(" ", unicodedata.normalize("NFC", "".join(kept))).strip()


def clip(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters, cut at a word boundary and marked with an ellipsis (an error
    message cut mid-word reads as a different word: "input is too s")."""
    if len(text) <= limit:
        return text
    cut = text[: max(limit - 1, 0)]
    space = cut.rfind(" ")
    return (cut[:space] if space >= limit // 2 else cut).rstrip(" ,;:") + "…"


_MARKED = re.compile(r"<em>(.*?)</em>")


def around_match(text: str, fragments: Sequence[str], limit: int) -> str:
    """``text`` cut to ``limit`` characters around the first word a highlight fragment marks (``<em>``) —
    from a word boundary a little before it, marked with a leading ellipsis — so that what matched is in
    view; from the start when nothing marked is in ``text`` (a semantic match) or it fits there already."""
    if len(text) <= limit:
        return text
    for fragment in fragments:
        for word in _MARKED.findall(fragment):
            found = re.search(rf"(?<!\w){re.escape(html.unescape(word))}(?!\w)", text, re.IGNORECASE)
            if found is None:
                continue
            if found.end() <= limit - 1:
                return clip(text, limit)
            start = text.rfind(" ", 0, max(found.start() - limit // 4, 0)) + 1
            return "…" + clip(text[start:], limit - 1)
    return clip(text, limit)
