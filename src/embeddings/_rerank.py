"""The ``Reranker`` protocol and the validation every answer goes through. Knows nothing of Elasticsearch.

A reranker scores (query, document) pairs jointly — a cross-encoder reads both texts at once, which a
bi-encoder embedding cannot — so it is run on a short list (the fused top 50), never on the whole index.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

from ._base import check_texts
from ._errors import InvalidResponse

__all__ = ["Reranker", "validate_scores"]


@runtime_checkable
class Reranker(Protocol):
    """What ``storage`` needs from a reranking provider."""

    @property
    def model_id(self) -> str:
        """Identifies the model and backend (logged with every reranked search)."""
        ...

    async def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        """One relevance score per document, **in the order given** (higher is more relevant)."""
        ...

    async def aclose(self) -> None: ...


def validate_scores(pairs: Iterable[tuple[object, object]], *, count: int, offset: int = 0) -> list[float]:
    """Check a provider's ``(index, score)`` pairs and return the scores in input order.

    Every index must be an integer in ``[0, count)``, appear exactly once, and carry a finite number;
    anything else is an :class:`InvalidResponse` naming the problem (``offset`` is added to the indices in
    messages, for providers that split a request).
    """
    scores: list[float | None] = [None] * count
    for raw_index, raw_score in pairs:
        if isinstance(raw_index, bool) or not isinstance(raw_index, int):
            raise InvalidResponse(f"rerank answer has a non-integer index {raw_index!r}")
        if not 0 <= raw_index < count:
            raise InvalidResponse(f"rerank answer has index {offset + raw_index}, outside 0..{offset + count - 1}")
        if scores[raw_index] is not None:
            raise InvalidResponse(f"rerank answer scores input {offset + raw_index} twice", input_index=raw_index)
        if isinstance(raw_score, bool) or not isinstance(raw_score, int | float):
            raise InvalidResponse(f"input {offset + raw_index}: non-numeric score", input_index=raw_index)
        value = float(raw_score)
        if not math.isfinite(value):
            raise InvalidResponse(f"input {offset + raw_index}: NaN or infinite score", input_index=raw_index)
        scores[raw_index] = value
    missing = [i for i, s in enumerate(scores) if s is None]
    if missing:
        raise InvalidResponse(f"rerank answer scores {count - len(missing)} of {count} inputs")
    return [s for s in scores if s is not None]


def check_inputs(documents: Sequence[str]) -> None:
    """Callers pass a list of strings; anything else is a programming error (``TypeError``)."""
    check_texts(documents, "documents")
