"""Model providers: embedders and rerankers, behind small protocols. Knows nothing of Elasticsearch.

Embedders (the ``Embedder`` protocol):

- :class:`LocalEmbedder`: the default, a model of the local catalogue (``LOCAL_MODELS``: bge-small-en-v1.5,
  e5-small-v2, all-MiniLM-L6-v2...) on onnxruntime; fetched once from Maven Central (verified, cached) or
  installed from PyPI, then offline.
- :class:`OpenAIEmbedder`: OpenAI or any OpenAI-compatible ``/v1/embeddings`` server.
- :class:`HashingEmbedder`: deterministic feature hashing, for tests.
- :class:`CachedEmbedder`: a persistent cache (model, kind, text hash) in front of any of them.
- :class:`CallableEmbedder`: two async functions (a framework's own embedding object, adapted).

Chat models (the ``LLM`` protocol; optional, off by default): :class:`OpenAIChat`, the OpenAI
chat-completions API or any compatible server (vLLM, Ollama, LM Studio, llama.cpp's server...).

Rerankers (the ``Reranker`` protocol; optional, off by default):

- :class:`HttpReranker`: the Cohere ``/v1|v2/rerank`` shape (Cohere, Jina, Voyage, vLLM, gateways) or TEI's
  ``/rerank``.
- :class:`CrossEncoderReranker`: a cross-encoder from a local ONNX model directory, on onnxruntime.
"""

from ._base import BaseEmbedder, Embedder, Span, Vector, Windowed, estimate_token_spans, validate_vectors
from ._cache import CachedEmbedder
from ._callable import CallableEmbedder
from ._catalogue import CATALOGUE as LOCAL_MODELS
from ._catalogue import DEFAULT_MODEL as DEFAULT_LOCAL_MODEL
from ._catalogue import LocalModel, MavenArtifact, ModelFile, PyPIFiles, find_model
from ._cross_encoder import CrossEncoderReranker
from ._errors import (
    ContextTooLong,
    EmbeddingConfigError,
    EmbeddingError,
    EmbeddingResponseError,
    EmbeddingUnavailable,
    InvalidEmbedding,
    InvalidResponse,
    ModelIntegrityError,
    ModelUnavailable,
    ProviderConfigError,
    ProviderError,
    ProviderResponseError,
    ProviderUnavailable,
)
from ._fetch import DEFAULT_REPOSITORY, ModelFiles, default_cache_dir, locate_model
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
    "DEFAULT_LOCAL_MODEL",
    "DEFAULT_REPOSITORY",
    "LLM",
    "LOCAL_MODELS",
    "BaseEmbedder",
    "CachedEmbedder",
    "CallableEmbedder",
    "ChatMessage",
    "Completion",
    "ContextTooLong",
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
    "LocalModel",
    "MavenArtifact",
    "ModelFile",
    "ModelFiles",
    "ModelIntegrityError",
    "ModelUnavailable",
    "OpenAIChat",
    "OpenAIEmbedder",
    "ProviderConfigError",
    "ProviderError",
    "ProviderResponseError",
    "ProviderUnavailable",
    "PyPIFiles",
    "RerankApi",
    "Reranker",
    "RerankerSettings",
    "Span",
    "Usage",
    "Vector",
    "Windowed",
    "create_embedder",
    "create_llm",
    "create_reranker",
    "default_cache_dir",
    "estimate_token_spans",
    "find_model",
    "locate_model",
    "validate_scores",
    "validate_vectors",
]
