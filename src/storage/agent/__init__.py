"""For LLM agents: one tool contract, served by the agent tool, the MCP server and the framework tools.

The surface the model sees is minimal on purpose: a query, how many results (up to the host's maximum) and
the filters the host allows. Mode, tenant, rerank, the relevance floor and the budgets are host policy
(:class:`ToolPolicy`), fixed — and validated — when the tool is built::

    tool = SearchTool(client, allowed_filters=("ticker", "date"), limit=5, max_chars=3000)
    tools = [tool.definition(), tool.get_document_definition(), tool.answer_definition()]  # OpenAI "tools"
    observation = await tool.run(arguments_json)      # always a string, never a traceback

- ``_contract.py``: the policy, the arguments (pydantic models: their JSON schemas are every surface's input
  schemas), the one-sentence refusals;
- ``_format.py``: results, documents, answers and failures as text within a budget (pure);
- ``_tool.py``: :class:`SearchTool`, the contract over a :class:`SearchClient`, and :meth:`SearchTool.call`,
  the one dispatcher the MCP server and the framework tools go through.

For RAG callers, the context assembly and the citation check (:func:`assemble_context`,
:func:`extract_citations`) are re-exported from ``storage._rag.context``.
"""

from .._rag.context import AssembledContext, assemble_context, extract_citations
from ._contract import (
    AnswerArguments,
    DocumentArguments,
    ToolPolicy,
    ToolSettings,
    json_schema,
    parse_arguments,
    search_arguments,
)
from ._format import error_message, format_answer, format_document, format_results
from ._tool import SearchTool, ToolReply, ToolSpec, tool_specs

__all__ = [
    "AnswerArguments",
    "AssembledContext",
    "DocumentArguments",
    "SearchTool",
    "ToolPolicy",
    "ToolReply",
    "ToolSettings",
    "ToolSpec",
    "assemble_context",
    "error_message",
    "extract_citations",
    "format_answer",
    "format_document",
    "format_results",
    "json_schema",
    "parse_arguments",
    "search_arguments",
    "tool_specs",
]
