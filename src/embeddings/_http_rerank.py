"""Rerankers behind an HTTP API: the Cohere shape and the Text Embeddings Inference (TEI) shape.

- ``cohere-v2`` / ``cohere-v1``: ``POST {base}/v2/rerank`` (or ``/v1/rerank``) with ``{model, query,
  documents, top_n}``; the answer is ``{"results": [{"index", "relevance_score"}, ...]}``. Cohere, Jina,
  Voyage, vLLM's ``/rerank``, LiteLLM and many gateways speak it.
- ``tei``: ``POST {base}/rerank`` with ``{query, texts, truncate}``; the answer is ``[{"index", "score"}]``.

Servers limit the documents per request (TEI: 32 by default) and their length; documents are cut to
``max_document_chars`` and sent in chunks of ``max_documents_per_request`` (concurrently), and the scores
are put back in input order. Every answer is validated (:func:`validate_scores`). The client never retries
by itself: retrying is the caller's resilience policy, so one failure is one request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Literal

import httpx
from pydantic import SecretStr

from ._errors import InvalidResponse, ProviderConfigError, ProviderResponseError, retry_after, unavailable
from ._rerank import check_inputs, validate_scores

__all__ = ["HttpReranker", "RerankApi"]

RerankApi = Literal["cohere-v2", "cohere-v1", "tei"]
_PATHS: dict[str, str] = {"cohere-v2": "/v2/rerank", "cohere-v1": "/v1/rerank", "tei": "/rerank"}
#: Cohere accepts 1,000 documents per request; TEI's default --max-client-batch-size is 32.
_MAX_DOCUMENTS: dict[str, int] = {"cohere-v2": 1000, "cohere-v1": 1000, "tei": 32}
#: About 1,000 tokens of English: past what rerank models read (512 tokens for most cross-encoders, 4,096
#: for Cohere's), small enough that no server refuses the request for its size.
DEFAULT_MAX_DOCUMENT_CHARS = 4000
DEFAULT_TIMEOUT_S = 10.0


class HttpReranker:
    """A reranker over HTTP (see the module docstring for the two API shapes)."""

    def __init__(
        self,
        base_url: str,
        *,
        api: RerankApi = "cohere-v2",
        model: str | None = None,
        api_key: SecretStr | str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_documents_per_request: int | None = None,
        max_document_chars: int = DEFAULT_MAX_DOCUMENT_CHARS,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if api not in _PATHS:
            raise ProviderConfigError(f"rerank api must be one of {sorted(_PATHS)}, got {api!r}")
        if api.startswith("cohere") and not model:
            raise ProviderConfigError(f"the {api} rerank API needs a model name (RERANKER_MODEL)")
        if max_document_chars < 1 or (max_documents_per_request is not None and max_documents_per_request < 1):
            raise ProviderConfigError("max_document_chars and max_documents_per_request must be >= 1")
        if not base_url.startswith(("http://", "https://")):
            raise ProviderConfigError(f"reranker URL must start with http:// or https://, got {base_url!r}")
        key = api_key.get_secret_value() if isinstance(api_key, SecretStr) else api_key
        headers = {"authorization": f"Bearer {key}"} if key else {}
        self._api: RerankApi = api
        self._model = model
        self._url = base_url.rstrip("/") + _PATHS[api]
        self._max_docs = max_documents_per_request or _MAX_DOCUMENTS[api]
        self._max_chars = max_document_chars
        self._client = httpx.AsyncClient(timeout=timeout_s, headers=headers, transport=transport)

    @property
    def model_id(self) -> str:
        return f"{self._api}:{self._model or 'default'}"

    def __repr__(self) -> str:  # no key, ever
        return f"HttpReranker(url={self._url!r}, api={self._api!r}, model={self._model!r})"

    async def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        check_inputs(documents)
        if not documents:
            return []
        texts = [d[: self._max_chars] for d in documents]
        chunks = [(start, texts[start : start + self._max_docs]) for start in range(0, len(texts), self._max_docs)]
        parts = await asyncio.gather(*(self._rerank_chunk(query, chunk, start) for start, chunk in chunks))
        return [score for part in parts for score in part]

    async def _rerank_chunk(self, query: str, texts: list[str], offset: int) -> list[float]:
        if self._api == "tei":
            payload: dict[str, Any] = {"query": query, "texts": texts, "truncate": True}
        else:
            payload = {"model": self._model, "query": query, "documents": texts, "top_n": len(texts)}
        try:
            response = await self._client.post(self._url, json=payload)
        except httpx.TransportError as exc:  # (timeouts included)
            raise unavailable("reranker", exc, self._url) from exc
        if response.status_code >= 400:
            raise ProviderResponseError(
                f"reranker answered HTTP {response.status_code}",
                status=response.status_code,
                retry_after=retry_after(response.headers),
            )
        try:
            body = response.json()
        except ValueError as exc:
            raise InvalidResponse(f"reranker sent a body that is not JSON ({response.status_code})") from exc
        items = body if self._api == "tei" else (body.get("results") if isinstance(body, dict) else None)
        score_key = "score" if self._api == "tei" else "relevance_score"
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise InvalidResponse(f"reranker answer has no list of results ({self._api} shape expected)")
        return validate_scores(((i.get("index"), i.get(score_key)) for i in items), count=len(texts), offset=offset)

    async def aclose(self) -> None:
        await self._client.aclose()
