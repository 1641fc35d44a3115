"""The ``Embedder`` protocol and the shared machinery every provider uses: batching, validation, caching."""

from __future__ import annotations

import abc
import math
import re
from collections.abc import Sequence
from typing import Literal, Protocol, runtime_checkable

from cachetools import LRUCache

from ._errors import EmbeddingConfigError, InvalidEmbedding

__all__ = [
    "BaseEmbedder",
    "Embedder",
    "Span",
    "Vector",
    "Windowed",
    "check_texts",
    "estimate_token_spans",
    "validate_vectors",
]

Vector = list[float]
Kind = Literal["query", "document"]
#: A token's character offsets in the text it came from: ``text[start:end]``.
Span = tuple[int, int]
_PIECE = re.compile(r"\w{1,4}|[^\w\s]")

#: Distinct query texts remembered per embedder; a query vector is 384-1536 floats (~3-12 KB as a list).
DEFAULT_QUERY_CACHE_SIZE = 1024


def check_texts(texts: Sequence[str], name: str = "texts") -> None:
    """Refuse what is not a sequence of strings — one string above all, which a loop would read as its
    characters (each embedded, or scored, on its own) — with a ``TypeError`` naming ``name``."""
    if isinstance(texts, str | bytes):
        raise TypeError(f"{name} must be a sequence of strings, not one string: wrap it, [text]")
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"{name} must be strings: item {i} is {type(text).__name__}")


@runtime_checkable
class Embedder(Protocol):
    """What ``storage`` needs from an embedding provider."""

    @property
    def model_id(self) -> str:
        """Identifies the model *and* backend: vectors from different ids must never share an index."""
        ...

    @property
    def dimensions(self) -> int: ...

    @property
    def normalized(self) -> bool:
        """True if every vector has unit length (then dot product == cosine)."""
        ...

    async def embed_documents(self, texts: Sequence[str]) -> list[Vector]: ...

    async def embed_query(self, text: str) -> Vector: ...

    async def probe(self) -> None:
        """Check at start-up that the model answers with the declared dimensions."""
        ...

    async def aclose(self) -> None: ...


@runtime_checkable
class Windowed(Protocol):
    """An embedder that says what it reads of a document (optional; every provider here has it): how many
    tokens its window holds, how many of them its own tokens take (specials, a document prefix), and where
    each token of a text is — what a splitter needs to cut long documents into passages that fit."""

    @property
    def window_tokens(self) -> int | None:
        """Tokens the model reads of a text at most (longer texts are cut there); None: any length."""
        ...

    @property
    def overhead_tokens(self) -> int:
        """Tokens of the window the model's own tokens take for a document (specials, a prefix)."""
        ...

    async def token_spans(self, texts: Sequence[str]) -> list[list[Span]]:
        """Each text's tokens as the model counts them (no specials, no prefix): character offsets."""
        ...


def estimate_token_spans(text: str) -> list[Span]:
    """Tokens estimated without the model's tokenizer: words in pieces of at most four characters, and each
    punctuation mark alone — more pieces than a BPE or word-piece tokenizer makes of English, so passages
    cut by this estimate fit the window."""
    return [m.span() for m in _PIECE.finditer(text)]


def validate_vectors(vectors: object, *, expected_count: int, dimensions: int, offset: int = 0) -> list[Vector]:
    """Check what a provider returned: a list of ``expected_count`` vectors of ``dimensions`` finite floats.

    Raises :class:`InvalidEmbedding` naming the first bad input (``offset`` + position in the batch).
    Returns the vectors as plain ``list[float]``.
    """
    if not isinstance(vectors, Sequence) or isinstance(vectors, str | bytes):
        raise InvalidEmbedding(f"expected a list of vectors, got {type(vectors).__name__}")
    if len(vectors) != expected_count:
        raise InvalidEmbedding(f"expected {expected_count} vectors, got {len(vectors)}")
    out: list[Vector] = []
    for i, vector in enumerate(vectors):
        if not isinstance(vector, Sequence) or isinstance(vector, str | bytes):
            raise InvalidEmbedding(f"input {offset + i}: not a vector", input_index=offset + i)
        if len(vector) != dimensions:
            raise InvalidEmbedding(
                f"input {offset + i}: vector has {len(vector)} dimensions, expected {dimensions}",
                input_index=offset + i,
            )
        try:
            floats = [float(x) for x in vector]
        except (TypeError, ValueError):
            raise InvalidEmbedding(f"input {offset + i}: non-numeric value", input_index=offset + i) from None
        if not all(math.isfinite(x) for x in floats):
            raise InvalidEmbedding(f"input {offset + i}: NaN or infinite value", input_index=offset + i)
        out.append(floats)
    return out


class BaseEmbedder(abc.ABC):
    """Batching (order preserved), validation of every answer, and a bounded LRU of query vectors.

    Subclasses implement :meth:`_embed_batch` for one batch of at most ``max_batch_size`` texts.
    """

    def __init__(self, *, max_batch_size: int, query_cache_size: int = DEFAULT_QUERY_CACHE_SIZE) -> None:
        if max_batch_size < 1:
            raise ValueError("max_batch_size must be >= 1")
        self.max_batch_size = max_batch_size
        self._query_cache: LRUCache[str, Vector] = LRUCache(maxsize=max(query_cache_size, 1))
        self._query_cache_enabled = query_cache_size > 0

    @property
    @abc.abstractmethod
    def model_id(self) -> str: ...

    @property
    @abc.abstractmethod
    def dimensions(self) -> int: ...

    @property
    @abc.abstractmethod
    def normalized(self) -> bool: ...

    @abc.abstractmethod
    async def _embed_batch(self, texts: Sequence[str], kind: Kind) -> object:
        """Embed one batch; return the provider's vectors (validated by the caller)."""

    async def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        check_texts(texts)
        out: list[Vector] = []
        for start in range(0, len(texts), self.max_batch_size):
            batch = texts[start : start + self.max_batch_size]
            raw = await self._embed_batch(batch, "document")
            out.extend(validate_vectors(raw, expected_count=len(batch), dimensions=self.dimensions, offset=start))
        return out

    async def embed_query(self, text: str) -> Vector:
        if not isinstance(text, str):
            raise TypeError(f"the query must be a string, not {type(text).__name__}")
        if self._query_cache_enabled:
            cached = self._query_cache.get(text)  # the cache belongs to one model, so the text is the key
            if cached is not None:
                return list(cached)
        raw = await self._embed_batch([text], "query")
        vector = validate_vectors(raw, expected_count=1, dimensions=self.dimensions)[0]
        if self._query_cache_enabled:
            self._query_cache[text] = vector
        return list(vector)

    async def probe(self) -> None:
        """Embed one short text now, so a wrong model or a dimension mismatch between the settings and the
        model is an :class:`EmbeddingConfigError` at start-up, not a failure at the first document."""
        raw = await self._embed_batch(["dimension probe"], "query")
        try:
            validate_vectors(raw, expected_count=1, dimensions=self.dimensions)
        except InvalidEmbedding as exc:
            raise EmbeddingConfigError(f"{self.model_id} does not match its settings: {exc}") from exc

    @property
    def window_tokens(self) -> int | None:
        """Tokens the model reads of a text at most; None (the default): any length."""
        return None

    @property
    def overhead_tokens(self) -> int:
        return 0

    async def token_spans(self, texts: Sequence[str]) -> list[list[Span]]:
        """Estimated, for providers whose tokenizer is not at hand (:func:`estimate_token_spans`)."""
        return [estimate_token_spans(t) for t in texts]

    async def aclose(self) -> None:  # noqa: B027 - optional hook, most providers hold nothing
        """Release resources (HTTP sessions, thread pools)."""
