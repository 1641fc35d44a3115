"""For LLM agents: a search tool with a JSON schema, LLM-ready observations, and a RAG context assembler.

The tool's surface is minimal on purpose: the model gives a query and, if the host allows them, a few
filters. Retrieval depth, mode, fusion and tenant are host policy, fixed when the tool is built::

    tool = SearchTool(client, allowed_filters=("ticker", "date"), limit=5)
    tools = [tool.definition(), tool.get_document_definition()]   # OpenAI "tools" format
    observation = await tool.run(arguments_json)                   # always a string, never a traceback

The formatting is pure functions (:func:`format_results`, :func:`error_message`); the RAG context
assembly and citation check (:func:`assemble_context`, :func:`extract_citations`) live with the answer in
``storage._context`` and are re-exported here for RAG callers.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping, Sequence
from datetime import date
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from ._answers import Answer
from ._context import AssembledContext, assemble_context, display_value, extract_citations
from ._errors import (
    CircuitOpen,
    DependencyUnavailable,
    IndexNotFound,
    InvalidQuery,
    Overloaded,
    PartialResults,
    SearchError,
    SearchFailed,
)
from ._models import SearchMode
from ._results import SearchHit, SearchResponse

if TYPE_CHECKING:
    from ._client import SearchClient

__all__ = [
    "AssembledContext",
    "SearchTool",
    "assemble_context",
    "error_message",
    "extract_citations",
    "format_answer",
    "format_document",
    "format_results",
]

#: Filters a host may expose to the model: name -> (description, type).
_FILTERS: dict[str, tuple[str, Any]] = {
    "ticker": ("Only documents about this company ticker symbol, e.g. AAPL.", str),
    "doc_type": ("Only documents of this type, e.g. news, filing, 10-K.", str),
    "source": ("Only documents from this source, e.g. reuters.", str),
    "date": ("", None),  # expands to date_from / date_to
}
_EM = re.compile(r"</?em>")
_SPACES = re.compile(r"\s+")
_LEG_NAMES = {"bm25": "keyword", "knn": "semantic"}


# -- formatting (pure) ---------------------------------------------------------------------------------


def _clip(text: str, limit: int) -> str:
    text = _SPACES.sub(" ", text).strip()
    if len(text) <= limit:
        return text
    cut = text[: max(limit - 1, 0)]
    if " " in cut[limit // 2 :]:
        cut = cut[: cut.rfind(" ")]
    return cut + "…"


def _snippet(hit: SearchHit, limit: int) -> str:
    """The hit's best passage (a long document: the part that matched), else its highlights, else its text."""
    if hit.passages:
        return _clip(hit.passages[0].text, limit)
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


def format_results(
    response: SearchResponse, *, max_chars: int = 4000, snippet_chars: int = 280, shown_query: str | None = None
) -> str:
    """A numbered list an LLM can read and cite: ``[#id]``, title, source/date, the relevance that ordered
    it, which legs found it, a capped snippet; the whole within ``max_chars``."""
    query = shown_query if shown_query is not None else response.query
    if not response.hits:
        return (
            f'No matches for "{query}". Try rephrasing with different or fewer keywords, '
            "or drop a filter; do not invent results."
        )
    n_hits = len(response.hits)
    lines = [f'{n_hits} result{"s" if n_hits != 1 else ""} for "{query}", best first. Cite them as [#id].']
    if response.legs_failed:
        lost = ", ".join(_LEG_NAMES.get(leg, leg) for leg in response.legs_failed)
        lines.append(f"Note: partial results — {lost} search was unavailable ({response.degraded_reason}).")
    if response.partial:
        lines.append(
            "Note: results may be incomplete — part of the index did not answer; say so if the answer depends "
            "on finding everything."
        )
    text = "\n".join(lines)
    omitted = 0
    for n, hit in enumerate(response.hits, start=1):
        entry = f"\n{n}. [#{hit.id}] {hit.title or '(untitled)'}\n   {_meta(hit)}\n   {_snippet(hit, snippet_chars)}"
        reserve = 80 if n < len(response.hits) else 0  # room for the "left out" line
        if len(text) + len(entry) + reserve > max_chars:
            if n == 1:  # always show the best hit, shortened
                entry = _clip(entry, max(max_chars - len(text) - reserve, 40))
                text += entry
                continue
            omitted = len(response.hits) - n + 1
            break
        text += entry
    if omitted:
        text += f"\n({omitted} more results left out to stay within the size limit.)"
    return text


def format_document(doc: Mapping[str, Any] | None, doc_id: str, *, max_chars: int = 6000) -> str:
    if doc is None:
        return f"No document with id '{doc_id}'. Use an id from a search result (the part after [#)."
    header = f"[#{doc_id}] {doc.get('title') or '(untitled)'}"
    meta = " | ".join(
        f"{k if k != 'published_at' else 'date'}: {display_value(doc[k])}"
        for k in ("source", "published_at", "ticker", "doc_type")
        if doc.get(k)
    )
    body = _clip(str(doc.get("text", "")), max(max_chars - len(header) - len(meta) - 4, 100))
    return "\n".join(part for part in (header, meta, "", body) if part is not None)


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


def format_answer(answer: Answer) -> str:
    """An :class:`Answer` as an agent should read it: the text, the cited sources, and any caveat (the model
    failed, the search was partial, citations that were not in the context)."""
    lines: list[str] = []
    if answer.status == "llm_failed":
        lines.append(
            f"No answer: the answering model failed ({answer.degraded_reason}). The documents found are listed; "
            "search them or read them with get_document."
        )
    else:
        lines.append(answer.answer or "")
    shown = answer.sources if answer.status != "llm_failed" else answer.entries
    if shown:
        lines.append("")
        lines.append("Sources:" if answer.status != "llm_failed" else "Documents found:")
        lines += [f"[#{e.id}] {e.title or '(untitled)'}" + (f" ({e.source})" if e.source else "") for e in shown]
    if answer.invented_citations:
        lines.append(f"Note: {', '.join('[#' + c + ']' for c in answer.invented_citations)} are not real sources.")
    if answer.search.degraded and answer.search.legs_failed:
        lost = ", ".join(_LEG_NAMES.get(leg, leg) for leg in answer.search.legs_failed)
        lines.append(f"Note: {lost} search was unavailable; the answer may miss documents.")
    if answer.search.partial:
        lines.append("Note: part of the index did not answer; the answer may miss documents.")
    return "\n".join(lines)


# -- the tool ------------------------------------------------------------------------------------------


class SearchTool:
    """A search tool for LLM agents over a :class:`SearchClient` (host policy fixed here, not by the model)."""

    def __init__(
        self,
        client: SearchClient,
        *,
        name: str = "search_documents",
        description: str | None = None,
        allowed_filters: Sequence[str] = (),
        limit: int = 5,
        mode: SearchMode = "hybrid",
        tenant_id: str | None = None,
        fixed_filters: Mapping[str, Any] | None = None,
        max_chars: int = 4000,
        snippet_chars: int = 280,
        rerank: bool | None = None,
    ) -> None:
        """``rerank`` is host policy (None: the client's ``settings.rerank``); the model never sees it."""
        unknown = set(allowed_filters) - set(_FILTERS)
        if unknown:
            raise ValueError(f"unknown filters {sorted(unknown)}; choose from {sorted(_FILTERS)}")
        self.client, self.name = client, name
        self.description = description or (
            "Search the document collection (keyword and semantic search combined). Returns a numbered list "
            "of the best matches with [#id] citations, sources, dates and snippets."
        )
        self.limit, self.mode, self.tenant_id, self.fixed_filters = limit, mode, tenant_id, fixed_filters
        self.max_chars, self.snippet_chars = max_chars, snippet_chars
        self.rerank = rerank
        self.allowed_filters = tuple(allowed_filters)
        self.args_model = self._build_args_model()

    def _build_args_model(self) -> type[BaseModel]:
        fields: dict[str, Any] = {
            "query": (
                str,
                Field(
                    description="What to look for: a question or a few keywords, in natural language.",
                    min_length=1,
                    max_length=500,
                ),
            )
        }
        for name in self.allowed_filters:
            if name == "date":
                fields["date_from"] = (date | None, Field(None, description="Only documents on or after (YYYY-MM-DD)."))
                fields["date_to"] = (date | None, Field(None, description="Only documents on or before (YYYY-MM-DD)."))
            else:
                desc, typ = _FILTERS[name]
                fields[name] = (typ | None, Field(None, description=desc, max_length=100))
        model: type[BaseModel] = create_model("SearchArguments", __config__=ConfigDict(extra="forbid"), **fields)
        return model

    def parameters_schema(self) -> dict[str, Any]:
        schema = self.args_model.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        return schema

    def definition(self) -> dict[str, Any]:
        """The tool in the OpenAI ``tools`` format; ``["function"]`` is the plain JSON-schema function spec
        other frameworks (and MCP) take as-is."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters_schema()},
        }

    def get_document_definition(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": "get_document",
                "description": "Read one document in full by the id a search result cited as [#id].",
                "parameters": {
                    "type": "object",
                    "properties": {"id": {"type": "string", "description": "The id after [# in a result."}},
                    "required": ["id"],
                    "additionalProperties": False,
                },
            },
        }

    def _parse(self, arguments: str | Mapping[str, Any]) -> BaseModel:
        data = json.loads(arguments) if isinstance(arguments, str) else dict(arguments)
        return self.args_model.model_validate(data)

    async def run(self, arguments: str | Mapping[str, Any]) -> str:
        """Run the tool on the model's arguments (a JSON string or a mapping); always returns text."""
        try:
            args = self._parse(arguments)
        except json.JSONDecodeError:
            return 'Error: the arguments are not valid JSON. Send an object such as {"query": "..."}.'
        except ValidationError as exc:
            return _validation_message(exc)
        values = args.model_dump()
        query = str(values.pop("query"))
        filters: dict[str, Any] = {}
        date_range = {
            op: values.pop(key).isoformat()
            for key, op in (("date_from", "gte"), ("date_to", "lte"))
            if values.get(key) is not None
        }
        values.pop("date_from", None)
        values.pop("date_to", None)
        if date_range:
            filters["published_at"] = date_range
        filters.update({k: v for k, v in values.items() if v is not None})
        filters.update(self.fixed_filters or {})  # host policy wins over the model's arguments
        try:
            response = await self.client.search(
                query,
                mode=self.mode,
                filters=filters or None,
                tenant_id=self.tenant_id,
                limit=self.limit,
                rerank=self.rerank,
            )
        except SearchError as exc:
            return error_message(exc, retry_after_s=self.client.settings.breaker_reset_s)
        return format_results(response, max_chars=self.max_chars, snippet_chars=self.snippet_chars)

    async def get_document(self, arguments: str | Mapping[str, Any]) -> str:
        try:
            data = json.loads(arguments) if isinstance(arguments, str) else dict(arguments)
            doc_id = str(data["id"]).strip().removeprefix("#")
        except (json.JSONDecodeError, KeyError, TypeError):
            return 'Error: pass {"id": "<id from a [#id] citation>"}.'
        if not doc_id:
            return "Error: the id is empty. Use an id from a search result."
        try:
            doc = await self.client.get_document(doc_id)
        except SearchError as exc:
            return error_message(exc, retry_after_s=self.client.settings.breaker_reset_s)
        if doc is not None and self.tenant_id is not None and doc.get("tenant_id") != self.tenant_id:
            doc = None  # another tenant's document does not exist for this caller
        return format_document(doc, doc_id, max_chars=self.max_chars)


def _validation_message(exc: ValidationError) -> str:
    problems = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        if where == "query" and err["type"] in ("string_too_short", "missing"):
            return "Error: the query is empty. Call the tool again with a few words describing what to find."
        if err["type"] == "extra_forbidden":
            problems.append(f"'{where}' is not an argument of this tool")
        else:
            problems.append(f"{where}: {err['msg']}")
    return "Error: " + "; ".join(problems) + ". Fix the arguments and call the tool again."
