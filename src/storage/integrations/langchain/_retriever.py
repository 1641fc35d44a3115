"""The LangChain retriever: our hybrid search as a ``BaseRetriever``, and the error a LangChain tool hands to
the model. Re-exported by :mod:`storage.integrations.langchain` (its docstring tells how to use them)."""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.tools import ToolException
from pydantic import ConfigDict, Field, PrivateAttr

from ..._client import SearchClient
from ..._errors import InvalidQuery
from ..._settings import SearchSettings
from .._common import Content, Retrieved, RetrieverCore
from .._dialects import count_argument, langchain_filter

__all__ = ["HybridSearchRetriever", "InvalidToolQuery", "our_options"]


class InvalidToolQuery(InvalidQuery, ToolException):
    """An :class:`InvalidQuery` from the retriever (an empty query...): also a ``ToolException``, so a LangChain
    tool with ``handle_tool_error`` gives the model the sentence."""


def _document(hit: Retrieved) -> Document:
    return Document(id=hit.id, page_content=hit.content, metadata=hit.metadata)


def our_options(options: dict[str, Any]) -> dict[str, Any]:
    """LangChain's names as ours: ``k`` is ``limit``, ``filter`` (``{key: value}``) is ``filters``, and
    ``search_kwargs`` (what ``as_retriever`` users write) holds either; anything else is one of ours."""
    out = dict(options)
    nested = out.pop("search_kwargs", None)
    if nested is not None:
        if not isinstance(nested, dict):
            raise InvalidToolQuery(f"search_kwargs must be a dict, got {type(nested).__name__}")
        out = {**our_options(nested), **out}
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
        options = our_options(options)
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
            return [_document(hit) for hit in self._core.search(query, **our_options(overrides))]
        except InvalidToolQuery:
            raise
        except InvalidQuery as exc:
            raise InvalidToolQuery(str(exc)) from exc

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **overrides: Any
    ) -> list[Document]:
        try:
            return [_document(hit) for hit in await self._core.asearch(query, **our_options(overrides))]
        except InvalidToolQuery:
            raise
        except InvalidQuery as exc:
            raise InvalidToolQuery(str(exc)) from exc

    def close(self) -> None:
        """Close the client this retriever made (``from_settings``); a client you gave stays open."""
        self._core.close()

    async def aclose(self) -> None:
        await self._core.aclose()
