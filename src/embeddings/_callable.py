"""An embedder made of two functions: how a framework's own embedding object (LangChain's ``Embeddings``,
LlamaIndex's ``BaseEmbedding``, a Haystack embedder) becomes one of ours — batching, validation of every
answer and the query cache come from :class:`BaseEmbedder`, the vectors from the caller's functions."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from ._base import BaseEmbedder, Kind
from ._errors import EmbeddingConfigError

__all__ = ["CallableEmbedder"]

#: Embeds a batch of texts (documents) or one text (a query).
EmbedTexts = Callable[[list[str]], Awaitable[Sequence[Sequence[float]]]]
EmbedText = Callable[[str], Awaitable[Sequence[float]]]


class CallableEmbedder(BaseEmbedder):
    """``embed_texts`` / ``embed_text``: async functions giving the vectors of documents and of a query.
    ``dimensions``: the vectors' length, or None to learn it from the first answer (:meth:`probe`, which a
    client runs before it creates an index). ``normalized``: the vectors are unit length (dot product),
    else cosine. The texts are read whole: the model's window is not known (no passages)."""

    def __init__(
        self,
        model_id: str,
        embed_texts: EmbedTexts,
        embed_text: EmbedText,
        *,
        dimensions: int | None = None,
        normalized: bool = False,
        max_batch_size: int = 64,
    ) -> None:
        super().__init__(max_batch_size=max_batch_size)
        if dimensions is not None and dimensions < 1:
            raise ValueError("dimensions must be >= 1")
        self._model_id = model_id
        self._embed_texts = embed_texts
        self._embed_text = embed_text
        self._dimensions = dimensions
        self._normalized = normalized

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dimensions(self) -> int:
        if self._dimensions is None:
            raise EmbeddingConfigError(f"{self._model_id}: the vectors' length is not known yet (call probe() first)")
        return self._dimensions

    @property
    def normalized(self) -> bool:
        return self._normalized

    async def probe(self) -> None:
        if self._dimensions is None:
            vector = await self._embed_text("dimension probe")
            if not isinstance(vector, Sequence) or isinstance(vector, str | bytes) or not vector:
                raise EmbeddingConfigError(f"{self._model_id} answered {type(vector).__name__}, not a vector")
            self._dimensions = len(vector)
        await super().probe()

    async def _embed_batch(self, texts: Sequence[str], kind: Kind) -> object:
        if kind == "query" and len(texts) == 1:
            return [await self._embed_text(texts[0])]
        return await self._embed_texts(list(texts))
