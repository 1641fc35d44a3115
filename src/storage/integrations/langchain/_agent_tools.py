"""``storage.integrations.langchain.agent_tools``: the agent tool's operations as LangChain tools.

Imported by ``storage.integrations.langchain`` (which checks that LangChain is installed).
"""

from __future__ import annotations

from collections.abc import Callable

from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import ValidationError

from ...agent import SearchTool, ToolReply, ToolSpec
from ...agent._contract import refusal
from .._bridge import ClientBridge

__all__ = ["agent_tools"]


def agent_tools(tool: SearchTool) -> list[BaseTool]:
    """``tool``'s search, get_document and answer as LangChain tools: the contract's argument schemas (with
    their descriptions and bounds), its one-sentence refusals for bad arguments, its texts as results. A
    refusal or a failed search reaches the model as the tool's output (``ToolException``, handled), never
    as an exception that ends the agent's loop. Sync calls run on the client's loop (see ``_bridge``)."""
    bridge = ClientBridge(tool.client)
    return [_structured(tool, spec, bridge) for spec in tool.specs]


def _structured(tool: SearchTool, spec: ToolSpec, bridge: ClientBridge) -> BaseTool:
    names = sorted(spec.arguments.model_fields)

    def reply(answer: ToolReply) -> str:
        if answer.error:
            raise ToolException(answer.text)
        return answer.text

    async def acall(**arguments: object) -> str:
        return reply(await bridge.arun(lambda _: tool.call(spec.name, arguments)))

    def call(**arguments: object) -> str:
        return reply(bridge.run(lambda _: tool.call(spec.name, arguments)))

    refuse: Callable[[ValidationError], str] = lambda exc: refusal(exc, names)  # noqa: E731
    return StructuredTool.from_function(
        func=call,
        coroutine=acall,
        name=spec.name,
        description=spec.description,
        args_schema=spec.arguments,
        handle_tool_error=True,
        handle_validation_error=refuse,
    )
