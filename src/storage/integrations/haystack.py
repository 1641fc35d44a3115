"""Our hybrid search as a Haystack component (``pip install 'hybrid-search-es[haystack]'``).

::

    from haystack import Pipeline
    from storage.integrations.haystack import HybridSearchRetriever

    pipeline = Pipeline()
    pipeline.add_component("retriever", HybridSearchRetriever.from_settings(limit=5))
    result = pipeline.run({"retriever": {"query": "revenue guidance", "filters": {"ticker": "AAPL"}}})
    result["retriever"]["documents"][0].meta["ranks"]

A ``haystack-ai`` ``@component`` with ``run`` and ``run_async`` (for ``AsyncPipeline``), over
:meth:`SearchClient.search`: hybrid on the Basic license, where Haystack's Elasticsearch hybrid sends the
``rrf`` retriever Basic refuses. It returns ``documents``: each a Haystack
:class:`~haystack.dataclasses.Document` with the hit's id, the title and text as ``content``, the score
that ordered the list, and our provenance in ``meta`` (``id``, scores, per-leg ranks and scores,
highlights, ``degraded`` / ``partial``). ``filters`` take this library's filter model
(``{"ticker": "AAPL", "published_at": {"gte": "2024-01-01"}}``), not Haystack's filter syntax;
``top_k`` overrides ``limit``. Built ``from_settings`` it serializes with its pipeline (``to_dict``: the
options only; the connection comes from the environment where the pipeline is loaded).
"""

from __future__ import annotations

from typing import Any

try:
    from haystack import Document, component, default_from_dict, default_to_dict
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "the Haystack component needs the 'haystack' extra: pip install 'hybrid-search-es[haystack]'"
    ) from exc

from .._client import SearchClient
from .._errors import ConfigurationError
from .._settings import SearchSettings
from ._common import Content, Retrieved, RetrieverCore, check_options
from ._dialects import count_argument, haystack_filters

__all__ = ["HybridSearchRetriever"]


def _document(hit: Retrieved) -> Document:
    return Document(id=hit.id, content=hit.content, meta=hit.metadata, score=hit.score)


def _overrides(filters: dict[str, Any] | None, top_k: int | None) -> dict[str, Any]:
    """Haystack's names as ours: ``top_k`` is ``limit``; ``filters`` in Haystack's syntax (or ours)."""
    out: dict[str, Any] = {}
    if filters is not None:
        out["filters"] = haystack_filters(filters)
    if top_k is not None:
        out["limit"] = count_argument("top_k", top_k)
    return out


@component
class HybridSearchRetriever:
    """Hybrid (BM25 + kNN, fused in the client) search as a Haystack retriever component.

    ``HybridSearchRetriever(client=..., **options)`` uses your :class:`SearchClient` (yours to close);
    ``HybridSearchRetriever.from_settings(**options)`` makes one from the environment on a loop of its own
    (``close()`` it when done). ``options`` are :meth:`SearchClient.search` arguments (``mode``, ``limit``,
    ``filters``, ``tenant_id``, ``rerank``, ``fusion``, ``strict``...), and Haystack's own: ``top_k``
    (``limit``) and ``filters`` in Haystack's syntax (``{"field": "meta.x", "operator": "==", "value": ..}``,
    ``AND``/``OR`` conditions). ``content``: a document holds a long document's best passages (``passages``,
    the default) or its whole text (``text``).
    """

    def __init__(
        self,
        *,
        client: SearchClient | None = None,
        settings: SearchSettings | None = None,
        content: Content = "passages",
        **options: Any,
    ) -> None:
        self._options = dict(options)  # (as given: what to_dict writes)
        ours = {**options, **_overrides(options.pop("filters", None), options.pop("top_k", None))}
        check_options(ours)
        self._content = content
        self._from_settings = client is None and settings is None
        self._core = RetrieverCore(client, settings=settings, options=ours, content=content)

    @classmethod
    def from_settings(cls, settings: SearchSettings | None = None, **options: Any) -> HybridSearchRetriever:
        """A retriever with a client of its own, made from ``settings`` (default: the environment)."""
        return cls(settings=settings, **options)

    @component.output_types(documents=list[Document])
    def run(self, query: str, filters: dict[str, Any] | None = None, top_k: int | None = None) -> dict[str, Any]:
        """The documents for ``query`` (``filters`` and ``top_k`` override the component's options)."""
        return {"documents": [_document(h) for h in self._core.search(query, **_overrides(filters, top_k))]}

    @component.output_types(documents=list[Document])
    async def run_async(
        self, query: str, filters: dict[str, Any] | None = None, top_k: int | None = None
    ) -> dict[str, Any]:
        """:meth:`run`, for ``AsyncPipeline`` and async callers."""
        hits = await self._core.asearch(query, **_overrides(filters, top_k))
        return {"documents": [_document(h) for h in hits]}

    def to_dict(self) -> dict[str, Any]:
        """The component's options (never a connection or a secret): a pipeline that loads it makes its
        client from the environment."""
        if not self._from_settings:
            raise ConfigurationError(
                "a HybridSearchRetriever built from a SearchClient (or explicit settings) cannot be serialized: "
                "build it with HybridSearchRetriever.from_settings(**options) and configure ES_* where it loads"
            )
        return default_to_dict(self, content=self._content, **self._options)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HybridSearchRetriever:
        return default_from_dict(cls, data)

    def close(self) -> None:
        """Close the client this component made (``from_settings``); a client you gave stays open."""
        self._core.close()

    async def aclose(self) -> None:
        await self._core.aclose()
