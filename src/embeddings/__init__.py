"""Model providers: embedders and rerankers, behind small protocols. Knows nothing of Elasticsearch.

Embedders (the ``Embedder`` protocol):

- :class:`LocalEmbedder`: the offline default, all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime.
- :class:`OpenAIEmbedder`: OpenAI or any OpenAI-compatible ``/v1/embeddings`` server.
- :class:`HashingEmbedder`: deterministic feature hashing, for tests.
- :class:`CachedEmbedder`: a persistent cache (model, kind, text hash) in front of any of them.

Rerankers (the ``Reranker`` protocol; optional, off by default):

- :class:`HttpReranker`: the Cohere ``/v1|v2/rerank`` shape (Cohere, Jina, Voyage, vLLM, gateways) or TEI's
  ``/rerank``.
- :class:`CrossEncoderReranker`: a cross-encoder from a local ONNX model directory, on onnxruntime.
"""

from ._base import BaseEmbedder, Embedder, Vector, validate_vectors
from ._cache import CachedEmbedder
from ._cross_encoder import CrossEncoderReranker
from ._errors import (
    EmbeddingConfigError,
    EmbeddingError,
    EmbeddingResponseError,
    EmbeddingUnavailable,
    InvalidEmbedding,
    InvalidResponse,
    ProviderConfigError,
    ProviderError,
    ProviderResponseError,
    ProviderUnavailable,
)
from ._hashing import HashingEmbedder
from ._http_rerank import HttpReranker, RerankApi
from ._local import LocalEmbedder
from ._openai import OpenAIEmbedder
from ._rerank import Reranker, validate_scores
from ._settings import EmbeddingSettings, RerankerSettings, create_embedder, create_reranker

__all__ = [
    "BaseEmbedder",
    "CachedEmbedder",
    "CrossEncoderReranker",
    "Embedder",
    "EmbeddingConfigError",
    "EmbeddingError",
    "EmbeddingResponseError",
    "EmbeddingSettings",
    "EmbeddingUnavailable",
    "HashingEmbedder",
    "HttpReranker",
    "InvalidEmbedding",
    "InvalidResponse",
    "LocalEmbedder",
    "OpenAIEmbedder",
    "ProviderConfigError",
    "ProviderError",
    "ProviderResponseError",
    "ProviderUnavailable",
    "RerankApi",
    "Reranker",
    "RerankerSettings",
    "Vector",
    "create_embedder",
    "create_reranker",
    "validate_scores",
    "validate_vectors",
]
