"""What the three framework retrievers share: the search options they accept, the client they run on, and
one search's hits as (id, content, score, metadata) — each framework wraps these in its own document type.
No search logic: every retriever calls :meth:`SearchClient.search`."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .._client import SearchClient
from .._errors import ConfigurationError
from .._rag.context import merged_spans
from .._settings import SearchSettings
from .._types.models import embedding_text
from .._types.requests import SearchRequest
from .._types.results import SearchHit, SearchResponse
from ._bridge import ClientBridge

__all__ = [
    "OPTION_NAMES",
    "Content",
    "Retrieved",
    "RetrieverCore",
    "check_options",
    "hit_content",
    "hit_metadata",
    "retrieved",
]

#: What a retriever passes to :meth:`SearchClient.search` (every argument but the query).
OPTION_NAMES: frozenset[str] = frozenset(f.name for f in dataclasses.fields(SearchRequest)) - {"query"}


def check_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The search options, or a :class:`ConfigurationError` naming the unknown ones (a typo must not be a
    silently ignored filter)."""
    unknown = sorted(set(options) - OPTION_NAMES)
    if unknown:
        raise ConfigurationError(f"unknown search option(s) {unknown}; the options are {sorted(OPTION_NAMES)}")
    return dict(options)


@dataclass(frozen=True, slots=True)
class Retrieved:
    """One hit as a framework document is built from it."""

    id: str
    #: The title and the text (what the embedder read): what an LLM is given.
    content: str
    #: What ordered the list (the fused score, or the reranker's when the rerank stage ran).
    score: float
    metadata: dict[str, Any]


def hit_metadata(hit: SearchHit, response: SearchResponse) -> dict[str, Any]:
    """The provenance every retriever puts in its documents' metadata: ``id`` (always), the stored fields,
    the scores, each leg's rank and score, highlights, and the search's degraded / partial flags."""
    stored = {k: v for k, v in hit.source.items() if k not in ("title", "text")}
    return {
        **stored,
        "id": hit.id,
        "title": hit.title,
        "score": hit.score,
        "fused_score": hit.fused_score,
        "normalized_score": hit.normalized_score,
        "rerank_score": hit.rerank_score,
        "ranks": dict(hit.ranks),
        "leg_scores": dict(hit.leg_scores),
        "highlights": {field: list(fragments) for field, fragments in hit.highlights.items()},
        "passages": [{"start": p.start, "end": p.end, "leg": p.leg, "score": p.score} for p in hit.passages],
        "degraded": response.degraded,
        "degraded_reason": response.degradation.reason if response.degradation is not None else None,
        "legs_failed": list(response.degradation.legs_failed) if response.degradation is not None else [],
        "partial": response.partial,
    }


#: What a framework document holds: ``passages`` (the default: a long document's best passages, in text order,
#: with the title; a document that is one passage: its whole text) or ``text`` (always the whole text).
Content = Literal["passages", "text"]


def hit_content(hit: SearchHit, content: Content = "passages") -> str:
    """The text a framework document carries for ``hit``."""
    if content == "passages" and hit.passages:
        spans = merged_spans([(p.start, p.end) for p in hit.passages])
        return embedding_text(hit.title, " … ".join(hit.text[a:b].strip() for a, b in spans))
    return embedding_text(hit.title, hit.text)


def retrieved(response: SearchResponse, content: Content = "passages") -> list[Retrieved]:
    return [
        Retrieved(hit.id, hit_content(hit, content), hit.score, hit_metadata(hit, response)) for hit in response.hits
    ]


class RetrieverCore:
    """A retriever's client (given, or owned and made from the environment), its search options and what its
    documents hold (``content``)."""

    def __init__(
        self,
        client: SearchClient | None,
        *,
        settings: SearchSettings | None = None,
        options: Mapping[str, Any] | None = None,
        content: Content = "passages",
    ) -> None:
        if content not in ("passages", "text"):
            raise ConfigurationError(f"content must be 'passages' or 'text', got {content!r}")
        self.content: Content = content
        self.options = check_options(options or {})
        if client is not None:
            self.bridge = ClientBridge(client)
        else:
            self.bridge = ClientBridge(factory=lambda: SearchClient.from_settings(settings))

    def _request(self, query: str, overrides: Mapping[str, Any]) -> SearchRequest:
        return SearchRequest(query=query, **{**self.options, **check_options(overrides)})

    def search(self, query: str, **overrides: Any) -> list[Retrieved]:
        request = self._request(query, overrides)
        return retrieved(self.bridge.run(lambda client: client.search(**request.arguments())), self.content)

    async def asearch(self, query: str, **overrides: Any) -> list[Retrieved]:
        request = self._request(query, overrides)
        return retrieved(await self.bridge.arun(lambda client: client.search(**request.arguments())), self.content)

    def close(self) -> None:
        self.bridge.close()

    async def aclose(self) -> None:
        await self.bridge.aclose()
