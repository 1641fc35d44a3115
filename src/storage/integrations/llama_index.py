"""Our hybrid search as a LlamaIndex retriever (``pip install 'hybrid-search-es[llama-index]'``).

::

    from storage.integrations.llama_index import HybridSearchRetriever

    retriever = HybridSearchRetriever.from_settings(limit=5)       # ES_URL, EMBEDDINGS_*, ...
    nodes = retriever.retrieve("revenue guidance")                 # also await aretrieve(...)
    nodes[0].node.metadata["id"], nodes[0].score

A ``llama_index.core`` :class:`~llama_index.core.retrievers.BaseRetriever` over
:meth:`SearchClient.search`, returning :class:`~llama_index.core.schema.NodeWithScore`: a ``TextNode``
whose ``id_`` is the hit's id, whose text is the title and text, and whose ``metadata`` carries our
provenance (``id``, scores, per-leg ranks and scores, highlights, ``degraded`` / ``partial``); the score is
what ordered the list. The provenance is kept out of what the node shows an LLM or an embedding model
(``excluded_llm_metadata_keys`` / ``excluded_embed_metadata_keys``): the stored fields (title, source,
date...) stay in.
"""

from __future__ import annotations

from typing import Any

try:
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "the LlamaIndex retriever needs the 'llama-index' extra: pip install 'hybrid-search-es[llama-index]'"
    ) from exc

from .._client import SearchClient
from .._settings import SearchSettings
from ._common import Content, Retrieved, RetrieverCore
from ._dialects import count_argument, llama_index_filters

__all__ = ["HybridSearchRetriever"]

#: Provenance keys: in the metadata for the caller, not in the text an LLM or an embedder is given.
_PROVENANCE = [
    "id",
    "score",
    "fused_score",
    "normalized_score",
    "rerank_score",
    "ranks",
    "leg_scores",
    "highlights",
    "degraded",
    "degraded_reason",
    "legs_failed",
    "partial",
]


def _node(hit: Retrieved) -> NodeWithScore:
    node = TextNode(
        id_=hit.id,
        text=hit.content,
        metadata=hit.metadata,
        excluded_llm_metadata_keys=list(_PROVENANCE),
        excluded_embed_metadata_keys=list(_PROVENANCE),
    )
    return NodeWithScore(node=node, score=hit.score)


class HybridSearchRetriever(BaseRetriever):
    """Hybrid (BM25 + kNN, fused in the client) search as a LlamaIndex retriever.

    ``HybridSearchRetriever(client=..., **options)`` uses your :class:`SearchClient` (yours to close);
    ``HybridSearchRetriever.from_settings(**options)`` makes one from the environment on a loop of its own
    (``close()`` it when done). ``options`` are :meth:`SearchClient.search` arguments (``mode``, ``limit``,
    ``filters``, ``tenant_id``, ``rerank``, ``fusion``, ``strict``...), and LlamaIndex's own names:
    ``similarity_top_k`` (``limit``) and ``filters=MetadataFilters(...)`` (``==``, ``in``, ranges; ``and``,
    ``or`` of equalities on one key). ``content``: a node holds a long document's best passages
    (``passages``, the default) or its whole text (``text``).
    """

    def __init__(
        self,
        *,
        client: SearchClient | None = None,
        settings: SearchSettings | None = None,
        callback_manager: Any = None,
        content: Content = "passages",
        **options: Any,
    ) -> None:
        if "similarity_top_k" in options:  # LlamaIndex's names as ours
            options["limit"] = count_argument("similarity_top_k", options.pop("similarity_top_k"))
        if options.get("filters") is not None and not isinstance(options["filters"], dict | list):
            options["filters"] = llama_index_filters(options["filters"])
        self._core = RetrieverCore(client, settings=settings, options=options, content=content)
        super().__init__(callback_manager=callback_manager)

    @classmethod
    def from_settings(cls, settings: SearchSettings | None = None, **options: Any) -> HybridSearchRetriever:
        """A retriever with a client of its own, made from ``settings`` (default: the environment)."""
        return cls(settings=settings, **options)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [_node(hit) for hit in self._core.search(query_bundle.query_str)]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [_node(hit) for hit in await self._core.asearch(query_bundle.query_str)]

    def close(self) -> None:
        """Close the client this retriever made (``from_settings``); a client you gave stays open."""
        self._core.close()

    async def aclose(self) -> None:
        await self._core.aclose()
