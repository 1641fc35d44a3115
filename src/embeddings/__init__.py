"""Model providers: embedders and rerankers, behind small protocols. Knows nothing of Elasticsearch.

Embedders (the ``Embedder`` protocol):

- :class:`LocalEmbedder`: the offline default, all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime.
- :class:`OpenAIEmbedder`: OpenAI or any OpenAI-compatible ``/v1/embeddings`` server.
- :class:`HashingEmbedder`: deterministic feature hashing, for tests.
- :class:`CachedEmbedder`: a persistent cache (model, kind, text hash) in front of any of them.

Chat models (the ``LLM`` protocol; optional, off by default): :class:`OpenAIChat`, the OpenAI
chat-completions API or any compatible server (vLLM, Ollama, LM Studio, llama.cpp's server...).

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
from ._llm import LLM, ChatMessage, Completion, OpenAIChat, Usage
from ._local import LocalEmbedder
from ._openai import OpenAIEmbedder
from ._rerank import Reranker, validate_scores
from ._settings import (
    EmbeddingSettings,
    LLMSettings,
    RerankerSettings,
    create_embedder,
    create_llm,
    create_reranker,
)

__all__ = [
    "LLM",
    "BaseEmbedder",
    "CachedEmbedder",
    "ChatMessage",
    "Completion",
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
    "LLMSettings",
    "LocalEmbedder",
    "OpenAIChat",
    "OpenAIEmbedder",
    "ProviderConfigError",
    "ProviderError",
    "ProviderResponseError",
    "ProviderUnavailable",
    "RerankApi",
    "Reranker",
    "RerankerSettings",
    "Usage",
    "Vector",
    "create_embedder",
    "create_llm",
    "create_reranker",
    "validate_scores",
    "validate_vectors",
]
