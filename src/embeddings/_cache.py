"""A persistent embedding cache in front of any embedder (``diskcache``, the ``cache`` extra).

Keyed by the model id, the kind (document or query) and a SHA-256 of the text, so a re-run of an
evaluation or a re-index with the same model never re-embeds, and a change of model never reuses vectors.
Vectors are stored as float32 bytes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ._base import Embedder, Span, Vector, Windowed, check_texts, estimate_token_spans

__all__ = ["CachedEmbedder"]


class CachedEmbedder:
    """Wraps ``inner``; misses are embedded in one batch call, hits come from ``directory``."""

    def __init__(self, inner: Embedder, directory: str | Path, *, size_limit_bytes: int = 2**31) -> None:
        try:
            import diskcache
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError("CachedEmbedder needs the 'cache' extra: pip install 'hybrid-search-es[cache]'") from exc
        self.inner = inner
        self._cache: Any = diskcache.Cache(str(directory), size_limit=size_limit_bytes)
        self.hits = 0
        self.misses = 0

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dimensions(self) -> int:
        return self.inner.dimensions

    @property
    def normalized(self) -> bool:
        return self.inner.normalized

    @property
    def similarity_floor(self) -> float:
        return float(getattr(self.inner, "similarity_floor", 0.0))

    @property
    def window_tokens(self) -> int | None:
        return self.inner.window_tokens if isinstance(self.inner, Windowed) else None

    @property
    def overhead_tokens(self) -> int:
        return self.inner.overhead_tokens if isinstance(self.inner, Windowed) else 0

    async def token_spans(self, texts: Sequence[str]) -> list[list[Span]]:
        if isinstance(self.inner, Windowed):
            return await self.inner.token_spans(texts)
        return [estimate_token_spans(t) for t in texts]

    def _key(self, kind: str, text: str) -> str:
        return f"{self.inner.model_id}|{kind}|{hashlib.sha256(text.encode('utf-8', 'surrogatepass')).hexdigest()}"

    def _get(self, key: str) -> Vector | None:
        raw = self._cache.get(key)
        if raw is None:
            return None
        return [float(x) for x in np.frombuffer(raw, dtype=np.float32)]

    def _put(self, key: str, vector: Vector) -> None:
        self._cache.set(key, np.asarray(vector, dtype=np.float32).tobytes())

    async def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        check_texts(texts)
        keys = [self._key("document", t) for t in texts]
        out: list[Vector | None] = [self._get(k) for k in keys]
        missing = [i for i, v in enumerate(out) if v is None]
        self.hits += len(texts) - len(missing)
        self.misses += len(missing)
        if missing:
            fresh = await self.inner.embed_documents([texts[i] for i in missing])
            for i, vector in zip(missing, fresh, strict=True):
                self._put(keys[i], vector)
                out[i] = vector
        return [v for v in out if v is not None]

    async def embed_query(self, text: str) -> Vector:
        if not isinstance(text, str):
            raise TypeError(f"the query must be a string, not {type(text).__name__}")
        key = self._key("query", text)
        cached = self._get(key)
        if cached is not None:
            self.hits += 1
            return cached
        self.misses += 1
        vector = await self.inner.embed_query(text)
        self._put(key, vector)
        return vector

    async def probe(self) -> None:
        await self.inner.probe()

    async def aclose(self) -> None:
        self._cache.close()
        await self.inner.aclose()
