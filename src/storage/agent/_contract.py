"""The one tool contract every agent surface serves: what the host fixes, what the model may pass, and what
a bad argument is told. ``SearchTool``, the MCP server and the framework tool wrappers all build on it.

- :class:`ToolPolicy` — the host's settings, validated when a tool or server is built (a host mistake is a
  :class:`ConfigurationError` then, never a sentence the model is told to fix on every call). Settable from
  the environment (``TOOL_*``, :class:`ToolSettings`) and the command line (``hybrid-search mcp --limit``...).
- :func:`search_arguments` — the model's arguments (a query, how many results, the filters the host
  allows): a pydantic model with descriptions, bounds and no extra fields; its JSON schema is the tool's
  input schema on every surface.
- :func:`refusal` — one actionable sentence for arguments that do not fit (unknown names, wrong types,
  out-of-bounds values, an empty query).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import date
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from .._errors import ConfigurationError
from .._types.models import SearchMode

__all__ = [
    "ANSWER_DESCRIPTION",
    "DOCUMENT_DESCRIPTION",
    "FILTERS",
    "QUERY_MAX_CHARS",
    "SEARCH_DESCRIPTION",
    "AnswerArguments",
    "DocumentArguments",
    "ToolFilter",
    "ToolPolicy",
    "ToolSettings",
    "json_schema",
    "parse_arguments",
    "refusal",
    "search_arguments",
]

#: Filters a host may expose to the model: name -> its description (``date``: ``date_from`` / ``date_to``).
ToolFilter = Literal["ticker", "doc_type", "source", "date"]
FILTERS: dict[str, str] = {
    "ticker": "Only documents about this company ticker symbol, e.g. AAPL.",
    "doc_type": "Only documents of this type, e.g. news, filing, 10-K.",
    "source": "Only documents from this source, e.g. reuters.",
}
#: The longest query a model may send (the search cuts user text at 1,000 characters; a tool query is
#: a question or a few keywords).
QUERY_MAX_CHARS = 500

#: What each tool does, as the model reads it on every surface.
SEARCH_DESCRIPTION = (
    "Search the document collection (keyword and semantic search combined). Returns a numbered list of the "
    "best matches with [#id] citations, sources, dates and the passage that matched; says so when nothing "
    "matches."
)
DOCUMENT_DESCRIPTION = "Read one document in full by the id a search result cited as [#id]."
ANSWER_DESCRIPTION = (
    "Answer a question from the documents only, with the [#id] sources it rests on. Says so when the "
    "documents do not contain the answer, or when the answer cites no source."
)


#: The facets the model may ask for (``storage._dsl.aggregations`` syntax).
ToolFacet = Literal["ticker", "source", "doc_type", "published_at:year", "published_at:month"]
#: The fields the model may ask one result per (``group_by``).
ToolGroup = Literal["ticker", "source", "doc_type"]


class ToolPolicy(BaseModel):
    """What the host fixes for a tool (the model never sees or changes it), validated at construction."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: Results a search returns when the model does not ask for another number, and the most it may ask.
    limit: int = Field(default=5, ge=1, le=50)
    max_limit: int = Field(default=20, ge=1, le=100)
    #: The whole answer's characters (the list, or a document, or an answer with its sources) at most.
    max_chars: int = Field(default=4000, ge=500, le=200_000)
    #: Characters of each result's snippet at most.
    snippet_chars: int = Field(default=280, ge=40, le=10_000)
    mode: SearchMode = "hybrid"
    tenant_id: str | None = Field(default=None, min_length=1)
    #: The filters the model may use.
    allowed_filters: tuple[ToolFilter, ...] = ()
    #: Filters every call carries, whatever the model passes (host policy wins).
    fixed_filters: dict[str, Any] | None = None
    #: Rerank every search (None: the client's setting).
    rerank: bool | None = None
    #: Results found only by the semantic leg whose similarity is below this are not shown (nonsense finds
    #: nearest neighbours too); None: the embedder's own floor when it has one (see embeddings' catalogue),
    #: 0 turns it off.
    min_similarity: float | None = Field(default=None, ge=0.0, le=1.0)
    #: 0 (the ranked order) to 1: results chosen by maximal marginal relevance, so an agent does not get
    #: the same story ten times.
    diversity: float = Field(default=0.0, ge=0.0, le=1.0)
    #: The model may ask for counts of the matches (``facets``: by ticker, source, doc type, year, month).
    facets: bool = True
    #: The model may ask for one result per ticker, source or doc type (``one_per``).
    groups: bool = True

    @field_validator("mode", mode="before")
    @classmethod
    def _mode(cls, value: Any) -> Any:
        if value not in get_args(SearchMode):
            raise ValueError(f"mode must be one of {', '.join(get_args(SearchMode))}, not {value!r}")
        return value

    @field_validator("allowed_filters", mode="before")
    @classmethod
    def _filters(cls, value: Any) -> Any:
        names = [v.strip() for v in value.split(",") if v.strip()] if isinstance(value, str) else list(value or ())
        unknown = sorted(set(names) - set(get_args(ToolFilter)))
        if unknown:
            raise ValueError(f"unknown filters {unknown}; choose from {', '.join(get_args(ToolFilter))}")
        return tuple(names)

    def model_post_init(self, _: Any) -> None:
        if self.limit > self.max_limit:
            raise ValueError(f"limit ({self.limit}) is above max_limit ({self.max_limit})")

    @classmethod
    def of(cls, **values: Any) -> ToolPolicy:
        """The policy, or a :class:`ConfigurationError` naming what is wrong (a host mistake, found now)."""
        try:
            return cls(**{k: v for k, v in values.items() if v is not None})
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'tool'}: {e['msg']}" for e in exc.errors())
            raise ConfigurationError(f"invalid tool settings: {problems}") from None


class ToolSettings(BaseSettings):
    """The tool policy from the environment (``TOOL_LIMIT``, ``TOOL_MAX_CHARS``, ``TOOL_MODE``,
    ``TOOL_TENANT_ID``, ``TOOL_FILTERS``: a comma-separated list, ``TOOL_MIN_SIMILARITY``, ``TOOL_FACETS``,
    ``TOOL_GROUPS``...), for the MCP
    server; arguments given on the command line win."""

    model_config = SettingsConfigDict(env_prefix="TOOL_", extra="ignore", frozen=True)

    limit: int | None = None
    max_limit: int | None = None
    max_chars: int | None = None
    snippet_chars: int | None = None
    mode: str | None = None
    tenant_id: str | None = None
    filters: str | None = None
    rerank: bool | None = None
    min_similarity: float | None = None
    diversity: float | None = None
    facets: bool | None = None
    groups: bool | None = None

    def policy(self, **overrides: Any) -> ToolPolicy:
        values = self.model_dump(exclude={"filters"}) | {"allowed_filters": self.filters}
        values.update({k: v for k, v in overrides.items() if v is not None})
        if values.get("allowed_filters") is None:
            values["allowed_filters"] = ("ticker", "doc_type", "source", "date")
        return ToolPolicy.of(**values)


def search_arguments(policy: ToolPolicy) -> type[BaseModel]:
    """The model's arguments for a search under ``policy``: ``query``, ``limit`` (up to the host's maximum),
    and the filters the host allows; nothing else is accepted."""
    fields: dict[str, Any] = {
        "query": (
            str,
            Field(
                description="What to look for: a question or a few keywords, in natural language.",
                min_length=1,
                max_length=QUERY_MAX_CHARS,
            ),
        ),
        "limit": (
            int,
            Field(
                default=policy.limit,
                ge=1,
                le=policy.max_limit,
                description=f"How many results to return (1 to {policy.max_limit}; default {policy.limit}).",
            ),
        ),
    }
    if policy.facets:
        fields["facets"] = (
            list[ToolFacet] | None,
            Field(
                None,
                max_length=3,
                description="Also count all the matches by these (e.g. how many per ticker or per year); at most 3.",
            ),
        )
    if policy.groups:
        fields["one_per"] = (
            ToolGroup | None,
            Field(
                None,
                description="Show at most one result per ticker, source or doc type (e.g. the best of each company).",
            ),
        )
    for name in policy.allowed_filters:
        if name == "date":
            fields["date_from"] = (date | None, Field(None, description="Only documents on or after (YYYY-MM-DD)."))
            fields["date_to"] = (date | None, Field(None, description="Only documents on or before (YYYY-MM-DD)."))
        else:
            fields[name] = (str | None, Field(None, description=FILTERS[name], min_length=1, max_length=100))
    model: type[BaseModel] = create_model(
        "SearchArguments", __config__=ConfigDict(extra="forbid", str_strip_whitespace=True), **fields
    )
    return model


class DocumentArguments(BaseModel):
    """``get_document``'s argument."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    id: str = Field(min_length=1, max_length=512, description="The id after [# in a search result.")


class AnswerArguments(BaseModel):
    """``answer``'s argument."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    question: str = Field(
        min_length=1,
        max_length=QUERY_MAX_CHARS,
        description="The question to answer from the documents, in natural language.",
    )


def json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """A model's JSON schema as tools carry it: no titles, and an optional argument as its one type (an
    optional argument is left out, never sent as null): ``{"type": "array", ...}``, not ``anyOf: [array,
    null]``, which clients that convert values by the top-level ``type`` (the MCP Inspector) send as a
    string."""
    schema = model.model_json_schema()
    schema.pop("title", None)
    for name, prop in schema.get("properties", {}).items():
        prop.pop("title", None)
        options = prop.get("anyOf")
        if isinstance(options, list) and {"type": "null"} in options and name not in schema.get("required", ()):
            kept = [o for o in options if o != {"type": "null"}]
            if len(kept) == 1:
                del prop["anyOf"]
                prop.update(kept[0])
                if prop.get("default", ...) is None:
                    del prop["default"]
    return schema


def parse_arguments(model: type[BaseModel], arguments: str | Mapping[str, Any] | None) -> BaseModel | str:
    """The model's arguments validated, or the one sentence that says what to fix."""
    first = next(iter(model.model_fields))  # (the tool's first argument: query, id, question)
    example = f'{{"{first}": "..."}}'
    try:
        data = json.loads(arguments) if isinstance(arguments, str) else dict(arguments or {})
    except json.JSONDecodeError:
        return f"Error: the arguments are not valid JSON. Send an object such as {example}."
    except (TypeError, ValueError):
        return f"Error: the arguments must be an object such as {example}."
    if not isinstance(data, dict):
        return f"Error: the arguments must be an object such as {example}."
    try:
        # Validated as the JSON it is, strictly: what the schema says, no coercion ("3" or true is not a whole
        # number; a date is its YYYY-MM-DD text).
        return model.model_validate_json(json.dumps(data, default=str), strict=True)
    except ValidationError as exc:
        return refusal(exc, sorted(model.model_fields))


def refusal(exc: ValidationError, names: list[str]) -> str:
    """One sentence for the model: what was wrong with its arguments, and what they may be."""
    problems: list[str] = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        kind = err["type"]
        if where == "query" and kind in ("string_too_short", "missing"):
            return "Error: the query is empty. Call the tool again with a few words describing what to find."
        if where == "question" and kind in ("string_too_short", "missing"):
            return "Error: the question is empty. Call the tool again with the question to answer."
        if where == "id" and kind in ("string_too_short", "missing"):
            return "Error: the id is empty. Use an id from a search result (the part after [#)."
        if kind == "extra_forbidden":
            problems.append(f"'{where}' is not an argument of this tool (its arguments: {', '.join(names)})")
        elif kind == "string_type":
            problems.append(f"{where} must be text")
        elif kind in ("int_parsing", "int_type", "int_from_float"):
            problems.append(f"{where} must be a whole number")
        elif kind in ("list_type", "tuple_type"):
            problems.append(f"{where} must be a list")
        elif kind in ("date_from_datetime_parsing", "date_parsing", "date_type"):
            problems.append(f"{where} must be a date written YYYY-MM-DD")
        elif "ctx" in err and kind in ("less_than_equal", "greater_than_equal"):
            bound = err["ctx"].get("le", err["ctx"].get("ge"))
            problems.append(f"{where} must be {'at most' if kind == 'less_than_equal' else 'at least'} {bound}")
        elif kind == "string_too_long":
            problems.append(f"{where} is too long (at most {err.get('ctx', {}).get('max_length')} characters)")
        else:
            problems.append(f"{where}: {err['msg']}")
    return "Error: " + "; ".join(problems) + ". Fix the arguments and call the tool again."
