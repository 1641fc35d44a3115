"""What an agent reads: search results, a document, an answer and every failure, as plain text within a
character budget. Pure: no I/O. Every surface (the agent tool, the MCP server, the framework tools) sends
exactly these texts, once each."""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from datetime import date

from .._dsl.text import around_match, clip
from .._errors import (
    CircuitOpen,
    DependencyUnavailable,
    IndexNotFound,
    InvalidQuery,
    Overloaded,
    PartialResults,
    SearchError,
    SearchFailed,
)
from .._rag.context import display_value
from .._types.answers import Answer
from .._types.models import Document
from .._types.results import SearchHit, SearchResponse

__all__ = ["error_message", "format_answer", "format_document", "format_results", "no_matches", "snippet"]

_EM = re.compile(r"</?em>")
_SPACES = re.compile(r"\s+")
_LEG_NAMES = {"bm25": "keyword", "knn": "semantic"}
#: The shortest snippet a result is given to make room for more results (below it, fewer results instead).
_MIN_SNIPPET = 80


def _clip(text: str, limit: int) -> str:
    return clip(_SPACES.sub(" ", text).strip(), limit)


def snippet(hit: SearchHit, limit: int) -> str:
    """The hit's best passage (a long document: the part that matched, cut around the marked words), else its
    highlights, else its text."""
    if hit.passages:  # (around the words the BM25 leg marked when they are in it: what matched, in view)
        return around_match(_SPACES.sub(" ", hit.passages[0].text).strip(), hit.highlights.get("text") or (), limit)
    fragments = hit.highlights.get("text") or []
    raw = " … ".join(fragments) if fragments else hit.text
    return _clip(html.unescape(_EM.sub("", raw)), limit)


def _meta(hit: SearchHit) -> str:
    src = hit.source
    keys = ("source", "published_at", "ticker", "doc_type")
    parts = [f"{key}: {display_value(src[key])}" for key in keys if src.get(key)]
    found = ", ".join(f"{_LEG_NAMES.get(leg, leg)} #{rank}" for leg, rank in sorted(hit.ranks.items()))
    parts.append(f"relevance: {hit.normalized_score:.2f}")
    if found:
        parts.append(f"found by: {found}")
    return " | ".join(parts).replace("published_at:", "date:")


def no_matches(query: str) -> str:
    return (
        f'No matches for "{query}". Try rephrasing with different or fewer keywords, or drop a filter; '
        "do not invent results."
    )


def format_results(
    response: SearchResponse,
    *,
    max_chars: int = 4000,
    snippet_chars: int = 280,
    shown_query: str | None = None,
    hits: Sequence[SearchHit] | None = None,
    one_per: str | None = None,
) -> str:
    """A numbered list an LLM can read and cite: ``[#id]``, title, source/date, the relevance that ordered it,
    which legs found it, a capped snippet (a long document's best passage); the whole within ``max_chars``:
    snippets shorten (to 80 characters) so that every result asked for fits before results are left out.
    ``hits``: the ones to show (default the response's); ``one_per``: the field they were grouped by. The
    header says how many are shown of how many."""
    query = shown_query if shown_query is not None else response.query
    shown = list(response.hits if hits is None else hits)
    if not shown:
        return no_matches(query)
    notes: list[str] = []
    if response.degradation is not None and response.degradation.legs_failed:
        lost = ", ".join(_LEG_NAMES.get(leg, leg) for leg in response.degradation.legs_failed)
        notes.append(f"Note: partial results — {lost} search was unavailable ({response.degradation.reason}).")
    if response.partial:
        notes.append(
            "Note: results may be incomplete — part of the index did not answer; say so if the answer depends "
            "on finding everything."
        )
    if response.facets is not None and response.facets.counts:
        notes.append(format_facets(response))
    if one_per is not None:
        notes.append(f"One result per {one_per.replace('_', ' ')}.")
    used = 120 + sum(len(n) + 1 for n in notes)  # the header's room
    heads = [f"\n{n}. [#{hit.id}] {hit.title or '(untitled)'}\n   {_meta(hit)}\n   " for n, hit in enumerate(shown, 1)]
    # Asked for many: shorter snippets (down to _MIN_SNIPPET) before fewer results.
    room = (max_chars - used - sum(len(h) for h in heads)) // len(shown)
    snippet_chars = max(min(snippet_chars, room), min(snippet_chars, _MIN_SNIPPET))
    entries: list[str] = []
    for n, (head, hit) in enumerate(zip(heads, shown, strict=True), start=1):
        entry = head + snippet(hit, snippet_chars)
        if used + len(entry) > max_chars:
            if n == 1:  # always show the best hit, shortened
                entries.append(_clip(entry, max(max_chars - used, 40)))
            break
        entries.append(entry)
        used += len(entry)
    total = len(shown)
    count = f"{total} result{'s' if total != 1 else ''}"
    head = (
        f'{count} for "{query}", best first. Cite them as [#id].'
        if len(entries) == total
        else f'Showing {len(entries)} of {count} for "{query}" (the rest did not fit), best first. Cite them as [#id].'
    )
    return "\n".join([head, *notes]) + "".join(entries)


def format_facets(response: SearchResponse, *, values: int = 10) -> str:
    """The facets as one line per field: counts over all the matches, not only the results shown."""
    lines = []
    report = response.facets
    for name, facet in (report.counts if report is not None else {}).items():
        counts = ", ".join(f"{b.value} {b.count}" for b in facet.buckets[:values]) or "none"
        more = f" (and {len(facet.buckets) - values} more)" if len(facet.buckets) > values else ""
        lines.append(f"{name}: {counts}{more}")
    scope = (
        "all matches" if report is None or not report.partial else "the keyword matches only (semantic search failed)"
    )
    return f"Counts over {scope} — " + "; ".join(lines)


def format_document(doc: Document | None, doc_id: str, *, max_chars: int = 6000) -> str:
    if doc is None:
        return f"No document with id '{doc_id}'. Use an id from a search result (the part after [#)."
    header = f"[#{doc_id}] {doc.title or '(untitled)'}"
    shown = {"source": doc.source, "date": doc.published_at, "ticker": doc.ticker, "doc_type": doc.doc_type}
    meta = " | ".join(f"{k}: {display_value(_iso(v))}" for k, v in shown.items() if v)
    body = _clip(doc.text, max(max_chars - len(header) - len(meta) - 4, 100))
    return "\n".join(part for part in (header, meta, "", body) if part is not None)


def _iso(value: object) -> object:
    """A date as JSON writes it (a document read back unvalidated may hold the stored string instead)."""
    return value.isoformat() if isinstance(value, date) else value


def error_message(exc: BaseException, *, retry_after_s: float | None = None) -> str:
    """A short, actionable sentence for the model: never a stack trace, never internals."""
    if isinstance(exc, SearchFailed):
        errors = list(exc.leg_errors.values())
        if errors and all(isinstance(e, CircuitOpen) for e in errors):
            return error_message(errors[0], retry_after_s=retry_after_s)
        if errors and all(getattr(e, "reason", None) == "timeout" for e in errors):
            return "Search timed out. Retry once with a shorter, more specific query."
        return "Search failed on the server side. Retry once; if it fails again, answer without search results."
    if isinstance(exc, PartialResults):
        return (
            "Part of the search index did not answer, so results would be incomplete. Retry once; if it fails "
            "again, tell the user search is partly unavailable."
        )
    if isinstance(exc, CircuitOpen):
        wait = f" in about {int(retry_after_s)} seconds" if retry_after_s else " later"
        return (
            "Search is temporarily unavailable (its backend failed repeatedly and is recovering). "
            f"Try again{wait}, or tell the user search is down."
        )
    if isinstance(exc, Overloaded):
        return "Search is busy right now. Wait a few seconds and retry once."
    if isinstance(exc, DependencyUnavailable) and exc.reason == "timeout":
        return "Search timed out. Retry once with a shorter, more specific query."
    if isinstance(exc, IndexNotFound):
        return "The search index does not exist yet. Tell the user that search is not set up."
    if isinstance(exc, InvalidQuery):
        first = str(exc).splitlines()[0]
        if "empty" in first:
            return "Error: the query is empty. Call the tool again with a few words describing what to find."
        return f"Error: {first}. Fix the arguments and call the tool again."
    if isinstance(exc, SearchError):
        return f"Search failed ({exc.reason}). Retry once; if it fails again, answer without search results."
    return "Search failed unexpectedly. Answer without search results."


def _entries(answer: Answer) -> list[str]:
    return [f"[#{e.id}] {e.title or '(untitled)'}" + (f" ({e.source})" if e.source else "") for e in answer.entries]


def format_answer(answer: Answer, *, max_chars: int = 4000) -> str:
    """An :class:`Answer` as an agent should read it: the text and the sources it cites — and when it cites
    none, that it is not supported by a source (never a "Sources:" list it did not use), when the model
    failed or had nothing to read, that; then any caveat (invented citations, a degraded or partial search).
    The whole within ``max_chars``."""
    lines: list[str] = []
    if answer.status == "llm_failed":
        reason = answer.degradation.reason if answer.degradation is not None else None
        lines.append(
            f"No answer: the answering model failed ({reason}). The documents found are listed; "
            "search them or read them with get_document."
        )
        lines += ["", "Documents found:", *_entries(answer)]
    elif answer.status == "nothing_found":
        lines.append("No answer: the search found no documents for this question. Do not invent one.")
    elif answer.status == "no_context":
        lines.append(
            "No answer: the documents found did not fit the answering model's context, so it was not asked. "
            "Read them with get_document."
        )
        lines += ["", "Documents found:", *(f"[#{h.id}] {h.title or '(untitled)'}" for h in answer.search.hits)]
    elif answer.status == "not_in_entries":
        lines.append(answer.answer or "")
        lines.append("The documents found do not contain the answer.")
    elif answer.citations_fallback:
        lines.append(f"Uncited answer (not supported by a source): {answer.answer or ''}")
        lines.append("The model cited none of the documents it was given; treat the answer as unsupported.")
        lines += ["", "Documents it was given (not cited):", *_entries(answer)]
    else:
        lines.append(answer.answer or "")
        cited = [
            f"[#{e.id}] {e.title or '(untitled)'}" + (f" ({e.source})" if e.source else "") for e in answer.sources
        ]
        lines += ["", "Sources:", *cited]
    if answer.invented_citations:
        lines.append(f"Note: {', '.join('[#' + c + ']' for c in answer.invented_citations)} are not real sources.")
    failed = answer.search.degradation.legs_failed if answer.search.degradation is not None else []
    if failed:
        lost = ", ".join(_LEG_NAMES.get(leg, leg) for leg in failed)
        lines.append(f"Note: {lost} search was unavailable; the answer may miss documents.")
    if answer.search.partial:
        lines.append("Note: part of the index did not answer; the answer may miss documents.")
    text = "\n".join(lines)
    return text if len(text) <= max_chars else _clip(text, max_chars)
