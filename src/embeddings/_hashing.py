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
    """Unit-length bag-of-words vectors of ``dimensions`` floats (signed feature hashing)."""

    def __init__(self, *, dimensions: int = 64, max_batch_size: int = 64) -> None:
        super().__init__(max_batch_size=max_batch_size)
        if dimensions < 2:
            raise ValueError("dimensions must be >= 2")
        self._dimensions = dimensions
        self.calls = 0  # embedding requests made (batches), for tests

    @property
    def model_id(self) -> str:
        return f"hashing-{self._dimensions}"

    @property
    def dimensions(self) -> int:
        return self._dimensions

    @property
    def normalized(self) -> bool:
        return True

    def embed_one(self, text: str) -> Vector:
        vector = [0.0] * self._dimensions
        for token in _TOKEN.findall(text.lower()):
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
        return [self.embed_one(t) for t in texts]
