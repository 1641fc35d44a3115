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
retriever's: ``retriever.invoke("q", filters={...}, limit=3)``.
"""

from __future__ import annotations

from typing import Any

try:
    from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "the LangChain retriever needs the 'langchain' extra: pip install 'hybrid-search-es[langchain]'"
    ) from exc

from pydantic import ConfigDict, Field, PrivateAttr

from .._client import SearchClient
from .._settings import SearchSettings
from ._common import Content, Retrieved, RetrieverCore

__all__ = ["HybridSearchRetriever"]


def _document(hit: Retrieved) -> Document:
    return Document(id=hit.id, page_content=hit.content, metadata=hit.metadata)


class HybridSearchRetriever(BaseRetriever):
    """Hybrid (BM25 + kNN, fused in the client) search as a LangChain retriever.

    ``HybridSearchRetriever(client=..., **options)`` uses your :class:`SearchClient` (yours to close);
    ``HybridSearchRetriever.from_settings(**options)`` makes one from the environment (``ES_*``,
    ``EMBEDDINGS_*``, ...) on a loop of its own (``close()`` it when done). ``options`` are
    :meth:`SearchClient.search` arguments: ``mode``, ``limit``, ``filters``, ``tenant_id``, ``rerank``,
    ``fusion``, ``strict`` (raise our typed errors instead of returning a degraded result), ...;
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
        return [_document(hit) for hit in self._core.search(query, **overrides)]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **overrides: Any
    ) -> list[Document]:
        return [_document(hit) for hit in await self._core.asearch(query, **overrides)]

    def close(self) -> None:
        """Close the client this retriever made (``from_settings``); a client you gave stays open."""
        self._core.close()

    async def aclose(self) -> None:
        await self._core.aclose()
