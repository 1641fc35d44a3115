"""``SearchTool``: the tool contract (``_contract``) served over a :class:`SearchClient`: ``search``,
``get_document`` and ``answer``, each taking the model's arguments (a JSON string or a mapping) and always
returning text (``_format``) — never a traceback, never a third-party error. :meth:`SearchTool.call` is the
one dispatcher every surface (the MCP server, the framework tools) goes through."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from pydantic import BaseModel

from .._errors import ConfigurationError, SearchError
from .._types.results import SearchHit, relevant, similarity_floor
from ._contract import (
    ANSWER_DESCRIPTION,
    DOCUMENT_DESCRIPTION,
    SEARCH_DESCRIPTION,
    AnswerArguments,
    DocumentArguments,
    ToolPolicy,
    json_schema,
    parse_arguments,
    search_arguments,
)
from ._format import error_message, format_answer, format_document, format_results, no_matches

if TYPE_CHECKING:
    from .._client import SearchClient

__all__ = ["SearchTool", "ToolReply", "tool_specs"]

Arguments = str | Mapping[str, Any] | None


class ToolReply(NamedTuple):
    """What a tool call gives the model: the text, and whether it reports a failure (bad arguments, a
    failed search) rather than a result — MCP's ``isError``, LangChain's ``ToolException``."""

    text: str
    error: bool = False


class ToolSpec(NamedTuple):
    name: str
    description: str
    arguments: type[BaseModel]

    def function(self) -> dict[str, Any]:
        """The OpenAI ``tools`` entry; ``["function"]`` is the plain JSON-schema spec MCP and frameworks take."""
        spec = {"name": self.name, "description": self.description, "parameters": json_schema(self.arguments)}
        return {"type": "function", "function": spec}


def tool_specs(policy: ToolPolicy, *, search_name: str = "search") -> tuple[ToolSpec, ToolSpec, ToolSpec]:
    """The three tools under ``policy``: search, get_document, answer (no client needed: an MCP server lists
    them before it can reach Elasticsearch)."""
    return (
        ToolSpec(search_name, SEARCH_DESCRIPTION, search_arguments(policy)),
        ToolSpec("get_document", DOCUMENT_DESCRIPTION, DocumentArguments),
        ToolSpec("answer", ANSWER_DESCRIPTION, AnswerArguments),
    )


class SearchTool:
    """A search tool for LLM agents over a :class:`SearchClient`: host policy fixed here (``policy``, or its
    fields as keyword arguments), not by the model; a policy that does not fit is a
    :class:`ConfigurationError` now.

    ``definition()`` / ``get_document_definition()`` / ``answer_definition()`` give the OpenAI ``tools``
    format (``["function"]`` is the plain JSON-schema function spec MCP and other frameworks take as-is)."""

    def __init__(
        self,
        client: SearchClient,
        *,
        name: str = "search_documents",
        description: str | None = None,
        policy: ToolPolicy | None = None,
        **settings: Any,
    ) -> None:
        if policy is not None and settings:
            raise ConfigurationError("pass either policy= or its fields, not both")
        self.policy = policy if policy is not None else ToolPolicy.of(**settings)
        self.client, self.name = client, name
        search, document, answer = tool_specs(self.policy, search_name=name)
        self.specs = (search._replace(description=description or search.description), document, answer)
        self.description = self.specs[0].description
        self.args_model: type[BaseModel] = search.arguments
        floor = self.policy.min_similarity
        #: Semantic-only results below this similarity are not shown (0: off).
        self.min_similarity = floor if floor is not None else similarity_floor(client.embedder)

    # -- definitions -----------------------------------------------------------------------------------

    def parameters_schema(self) -> dict[str, Any]:
        return json_schema(self.args_model)

    def definition(self) -> dict[str, Any]:
        return self.specs[0].function()

    def get_document_definition(self) -> dict[str, Any]:
        return self.specs[1].function()

    def answer_definition(self) -> dict[str, Any]:
        return self.specs[2].function()

    # -- calls -----------------------------------------------------------------------------------------

    async def call(self, name: str, arguments: Arguments) -> ToolReply:
        """Call the tool ``name`` (this tool's search name, ``get_document`` or ``answer``)."""
        if name == self.name:
            return await self._search(arguments)
        if name == "get_document":
            return await self._get_document(arguments)
        if name == "answer":
            return await self._answer(arguments)
        names = ", ".join(spec.name for spec in self.specs)
        return ToolReply(f"Error: there is no tool named {name!r}; the tools are {names}.", True)

    async def run(self, arguments: Arguments) -> str:
        """Search with the model's arguments; always returns text."""
        return (await self._search(arguments)).text

    async def get_document(self, arguments: Arguments) -> str:
        return (await self._get_document(arguments)).text

    async def answer(self, arguments: Arguments) -> str:
        """Answer the model's question from the documents; always returns text (an uncited answer says so)."""
        return (await self._answer(arguments)).text

    def _failure(self, exc: SearchError) -> ToolReply:
        return ToolReply(error_message(exc, retry_after_s=self.client.settings.breaker_reset_s), True)

    async def _search(self, arguments: Arguments) -> ToolReply:
        args = parse_arguments(self.args_model, arguments)
        if isinstance(args, str):
            return ToolReply(args, True)
        values = args.model_dump()
        query, limit = str(values.pop("query")), int(values.pop("limit"))
        facets = values.pop("facets", None)
        one_per = values.pop("one_per", None)
        filters: dict[str, Any] = {}
        dates = {op: values.pop(key) for key, op in (("date_from", "gte"), ("date_to", "lte")) if key in values}
        if any(v is not None for v in dates.values()):
            filters["published_at"] = {op: d.isoformat() for op, d in dates.items() if d is not None}
        filters.update({k: v for k, v in values.items() if v is not None})
        filters.update(self.policy.fixed_filters or {})  # host policy wins over the model's arguments
        p = self.policy
        try:
            response = await self.client.search(
                query,
                mode=p.mode,
                filters=filters or None,
                tenant_id=p.tenant_id,
                limit=limit,
                rerank=p.rerank,
                window=max(limit, self.client.settings.window),
                facets=facets or None,
                diversity=p.diversity,
                group_by=one_per,
            )
        except SearchError as exc:
            return self._failure(exc)
        hits = [h for h in response.hits if self._relevant(h)]
        if not hits:
            return ToolReply(no_matches(response.query))
        text = format_results(
            response, max_chars=p.max_chars, snippet_chars=p.snippet_chars, hits=hits, one_per=one_per
        )
        return ToolReply(text)

    def _relevant(self, hit: SearchHit) -> bool:
        """A hit the keyword leg found, or a semantic match close enough (nonsense has nearest neighbours)."""
        return relevant(hit, self.min_similarity)

    async def _get_document(self, arguments: Arguments) -> ToolReply:
        data = parse_arguments(DocumentArguments, arguments)
        if isinstance(data, str):
            return ToolReply(data, True)
        doc_id = str(getattr(data, "id", "")).strip().removeprefix("#")
        if not doc_id:
            return ToolReply("Error: the id is empty. Use an id from a search result (the part after [#).", True)
        try:
            doc = await self.client.documents.get(doc_id, tenant_id=self.policy.tenant_id)
        except SearchError as exc:
            return self._failure(exc)
        return ToolReply(format_document(doc, doc_id, max_chars=self.policy.max_chars))

    async def _answer(self, arguments: Arguments) -> ToolReply:
        if self.client.llm is None:
            return ToolReply(
                "Answering is not set up here (no chat model is configured). Use the search tool instead.", True
            )
        data = parse_arguments(AnswerArguments, arguments)
        if isinstance(data, str):
            return ToolReply(data, True)
        question = str(getattr(data, "question", ""))
        p = self.policy
        try:
            result = await self.client.answer(
                question, mode=p.mode, filters=p.fixed_filters or None, tenant_id=p.tenant_id, limit=p.limit
            )
        except ConfigurationError as exc:
            return ToolReply(f"Answering is not available: {str(exc).splitlines()[0]}", True)
        except SearchError as exc:
            return self._failure(exc)
        return ToolReply(format_answer(result, max_chars=p.max_chars))
