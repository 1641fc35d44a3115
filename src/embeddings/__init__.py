"""Embedding providers behind one ``Embedder`` protocol. Knows nothing of Elasticsearch.

- :class:`LocalEmbedder`: the offline default, all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime.
- :class:`OpenAIEmbedder`: OpenAI or any OpenAI-compatible ``/v1/embeddings`` server.
- :class:`HashingEmbedder`: deterministic feature hashing, for tests.
- :class:`CachedEmbedder`: a persistent cache (model, kind, text hash) in front of any of them.
"""

from ._base import BaseEmbedder, Embedder, Vector, validate_vectors
from ._cache import CachedEmbedder
from ._errors import (
    EmbeddingConfigError,
    EmbeddingError,
    EmbeddingResponseError,
    EmbeddingUnavailable,
    InvalidEmbedding,
)
from ._hashing import HashingEmbedder
from ._local import LocalEmbedder
from ._openai import OpenAIEmbedder
from ._settings import EmbeddingSettings, create_embedder

__all__ = [
    "BaseEmbedder",
    "CachedEmbedder",
    "Embedder",
    "EmbeddingConfigError",
    "EmbeddingError",
    "EmbeddingResponseError",
    "EmbeddingSettings",
    "EmbeddingUnavailable",
    "HashingEmbedder",
    "InvalidEmbedding",
    "LocalEmbedder",
    "OpenAIEmbedder",
    "Vector",
    "create_embedder",
    "validate_vectors",
]
