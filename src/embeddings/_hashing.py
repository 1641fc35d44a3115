"""A deterministic, dependency-free embedder for tests and offline demos: feature hashing of word tokens.

Texts that share words get similar vectors, so kNN behaves plausibly on toy corpora; it has no notion of
meaning. Never use it for real retrieval.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence

from ._base import BaseEmbedder, Kind, Vector

__all__ = ["HashingEmbedder"]

_TOKEN = re.compile(r"\w+", re.UNICODE)


class HashingEmbedder(BaseEmbedder):
    """Unit-length bag-of-words vectors of ``dimensions`` floats (signed feature hashing). ``window_tokens``:
    read only a document's first that many words, as a model reads its window (None, the default: all)."""

    def __init__(self, *, dimensions: int = 64, max_batch_size: int = 64, window_tokens: int | None = None) -> None:
        super().__init__(max_batch_size=max_batch_size)
        if dimensions < 2:
            raise ValueError("dimensions must be >= 2")
        if window_tokens is not None and window_tokens < 8:
            raise ValueError("window_tokens must be at least 8")
        self._dimensions = dimensions
        self._window = window_tokens
        self.calls = 0  # embedding requests made (batches), for tests
        self.texts = 0  # texts embedded, for tests

    @property
    def model_id(self) -> str:
        return f"hashing-{self._dimensions}"

    @property
    def dimensions(self) -> int:
        return self._dimensions

    @property
    def normalized(self) -> bool:
        return True

    @property
    def window_tokens(self) -> int | None:
        return self._window

    async def token_spans(self, texts: Sequence[str]) -> list[list[tuple[int, int]]]:
        """Its own tokens: words."""
        return [[m.span() for m in _TOKEN.finditer(t)] for t in texts]

    def embed_one(self, text: str) -> Vector:
        vector = [0.0] * self._dimensions
        tokens = _TOKEN.findall(text.lower())
        for token in tokens if self._window is None else tokens[: self._window]:
            digest = hashlib.blake2b(token.encode(), digest_size=8).digest()
            bucket = int.from_bytes(digest[:4], "little") % self._dimensions
            vector[bucket] += 1.0 if digest[4] & 1 else -1.0
        norm = math.sqrt(sum(x * x for x in vector))
        if norm == 0.0:
            vector[0] = 1.0  # no tokens: a fixed unit vector, never a zero vector (cosine needs a norm)
            return vector
        return [x / norm for x in vector]

    async def _embed_batch(self, texts: Sequence[str], kind: Kind) -> list[Vector]:
        self.calls += 1
        self.texts += len(texts)
        return [self.embed_one(t) for t in texts]
