"""Our hybrid search as a LangChain retriever (``pip install 'hybrid-search-es[langchain]'``).

::

    from storage.integrations.langchain import HybridSearchRetriever

    retriever = HybridSearchRetriever.from_settings(limit=5, filters={"ticker": "AAPL"})  # ES_URL, ...
    docs = retriever.invoke("revenue guidance")          # also ainvoke, batch, abatch; in any loop or none
    docs[0].metadata["id"], docs[0].metadata["ranks"]    # our provenance

A ``langchain_core`` :class:`~langchain_core.retrievers.BaseRetriever` over :class:`SearchClient.search`:
hybrid on the Basic license (fused in the client, where LangChain's Elasticsearch store sends the ``rrf``
retriever Basic refuses). Each :class:`~langchain_core.documents.Document` has the title and text as
``page_content``, the hit's id as ``id`` and in ``metadata["id"]``, and the provenance in ``metadata``
(scores, per-leg ranks and scores, highlights, ``degraded`` / ``partial``). Per-call options override the
retriever's: ``retriever.invoke("q", filters={...}, limit=3)``. An empty or unusable query raises
:class:`InvalidToolQuery`: an :class:`~storage.InvalidQuery` that is also LangChain's ``ToolException``, so a
``create_retriever_tool(..., handle_tool_error=True)`` tool hands the sentence to the model instead of
ending the agent's loop.

For agents, :func:`agent_tools` serves the one tool contract of :mod:`storage.agent` as LangChain tools —
the same arguments, schemas, refusals and texts as the MCP server::

    tools = agent_tools(SearchTool(client, limit=5, allowed_filters=("ticker", "date")))
"""

from __future__ import annotations

from typing import Any

try:
    from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.tools import BaseTool, StructuredTool, ToolException
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "the LangChain retriever needs the 'langchain' extra: pip install 'hybrid-search-es[langchain]'"
    ) from exc

from collections.abc import Callable

from pydantic import ConfigDict, Field, PrivateAttr, ValidationError

from .._client import SearchClient
from .._errors import InvalidQuery
from .._settings import SearchSettings
from ..agent import SearchTool, ToolReply, ToolSpec
from ..agent._contract import refusal
from ._bridge import ClientBridge
from ._common import Content, Retrieved, RetrieverCore
from ._dialects import count_argument, langchain_filter

__all__ = ["HybridSearchRetriever", "InvalidToolQuery", "agent_tools"]


class InvalidToolQuery(InvalidQuery, ToolException):
    """An :class:`InvalidQuery` from the retriever (an empty query...): also a ``ToolException``, so a LangChain
    tool with ``handle_tool_error`` gives the model the sentence."""


def _document(hit: Retrieved) -> Document:
    return Document(id=hit.id, page_content=hit.content, metadata=hit.metadata)


def _our_options(options: dict[str, Any]) -> dict[str, Any]:
    """LangChain's names as ours: ``k`` is ``limit``, ``filter`` (``{key: value}``) is ``filters``, and
    ``search_kwargs`` (what ``as_retriever`` users write) holds either; anything else is one of ours."""
    out = dict(options)
    nested = out.pop("search_kwargs", None)
    if nested is not None:
        if not isinstance(nested, dict):
            raise InvalidToolQuery(f"search_kwargs must be a dict, got {type(nested).__name__}")
        out = {**_our_options(nested), **out}
    if "k" in out:
        out["limit"] = count_argument("k", out.pop("k"))
    if "filter" in out:
        out["filters"] = langchain_filter(out.pop("filter"))
    return out


class HybridSearchRetriever(BaseRetriever):
    """Hybrid (BM25 + kNN, fused in the client) search as a LangChain retriever.

    ``HybridSearchRetriever(client=..., **options)`` uses your :class:`SearchClient` (yours to close);
    ``HybridSearchRetriever.from_settings(**options)`` makes one from the environment (``ES_*``,
    ``EMBEDDINGS_*``, ...) on a loop of its own (``close()`` it when done). ``options`` are
    :meth:`SearchClient.search` arguments: ``mode``, ``limit``, ``filters``, ``tenant_id``, ``rerank``,
    ``fusion``, ``strict`` (raise our typed errors instead of returning a degraded result), ...; and
    LangChain's own names: ``k`` (``limit``), ``filter`` (``{key: value}``), ``search_kwargs={"k": ..,
    "filter": ..}`` — at construction and per call (``retriever.invoke("q", k=3)``);
    ``content``: a document holds a long document's best passages (``passages``, the default) or its whole
    text (``text``).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    client: SearchClient | None = None
    settings: SearchSettings | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    content: Content = "passages"
    _core: RetrieverCore = PrivateAttr()

    def __init__(
        self,
        *,
        client: SearchClient | None = None,
        settings: SearchSettings | None = None,
        content: Content = "passages",
        **options: Any,
    ) -> None:
        # LangChain's own fields (tags, metadata, verbose) go to it; everything else is a search option.
        fields: dict[str, Any] = {k: options.pop(k) for k in ("tags", "metadata", "verbose") if k in options}
        options = _our_options(options)
        fields.update(client=client, settings=settings, options=options, content=content)
        super().__init__(**fields)
        self._core = RetrieverCore(client, settings=settings, options=options, content=content)

    @classmethod
    def from_settings(cls, settings: SearchSettings | None = None, **options: Any) -> HybridSearchRetriever:
        """A retriever with a client of its own, made from ``settings`` (default: the environment)."""
        return cls(settings=settings, **options)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **overrides: Any
    ) -> list[Document]:
        try:
            return [_document(hit) for hit in self._core.search(query, **_our_options(overrides))]
        except InvalidToolQuery:
            raise
        except InvalidQuery as exc:
            raise InvalidToolQuery(str(exc)) from exc

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **overrides: Any
    ) -> list[Document]:
        try:
            return [_document(hit) for hit in await self._core.asearch(query, **_our_options(overrides))]
        except InvalidToolQuery:
            raise
        except InvalidQuery as exc:
            raise InvalidToolQuery(str(exc)) from exc

    def close(self) -> None:
        """Close the client this retriever made (``from_settings``); a client you gave stays open."""
        self._core.close()

    async def aclose(self) -> None:
        await self._core.aclose()


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
