"""What :meth:`SearchClient.health` and ``client.breakers`` return: the cluster, the alias's index, the
client's breakers, its models and the fusion in force. Every part the credentials may not see is left empty
(``None``, ``unknown``), never an error."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .._fusion.setting import FusionSetting

__all__ = ["BreakerStatus", "ClusterHealth", "Health", "IndexHealth"]


class BreakerStatus(BaseModel):
    """One dependency's circuit breaker and its counters (a snapshot; nothing of it can change the breaker)."""

    model_config = ConfigDict(frozen=True)

    #: ``closed`` (calls go through), ``open`` (calls fail fast) or ``half-open`` (one probe is let through).
    state: Literal["closed", "open", "half-open"]
    #: Consecutive failures counted so far (the breaker opens at ``breaker_fail_max``).
    failures: int
    #: Calls made, attempts sent (retries included), retries, and calls refused while open.
    calls: int
    attempts: int
    retries: int
    rejected_open: int
    #: Retries the retry budget holds now (each call earns a fifth of one).
    retry_budget: float
    #: The last failure the breaker counted (its error type and message), None before any: why it opened.
    last_failure: str | None = None


class ClusterHealth(BaseModel):
    """Elasticsearch's cluster health (None where the credentials lack the ``monitor`` privilege)."""

    model_config = ConfigDict(frozen=True)

    name: str | None = None
    #: ``green``, ``yellow`` or ``red``.
    status: str | None = None
    nodes: int | None = None


class IndexHealth(BaseModel):
    """The alias and the index versions behind it."""

    model_config = ConfigDict(frozen=True)

    alias: str
    exists: bool
    #: The index versions the alias points at.
    indices: list[str] = Field(default_factory=list)
    #: Documents a user wrote (a long document's passages are not counted).
    documents: int = 0
    #: Primary store size, bytes.
    size_bytes: int = 0
    #: Versions a reembed is building (or an interrupted one left): not searched yet.
    building: list[str] = Field(default_factory=list)
    #: A search reads nested passages (some document is longer than the model's window, or the index predates
    #: mapping version 4); else it costs what an index without passages does.
    searches_passages: bool = False
    #: The median agreement of its long documents' passages with their heads (``storage.passages.agreement``:
    #: about 1, one topic throughout; about 0, many), or None (none measured: no long document yet, or an
    #: index built before the client recorded it).
    passage_agreement: float | None = None
    #: Its long documents agree with their heads (``passage_agreement`` at least
    #: ``storage.passages.AGREEMENT_THRESHOLD``): a search reads them head first — BM25 their whole text, kNN a
    #: passage only where it beats the head by a margin; else by the better of head and best passage.
    long_documents_head_first: bool = False


class Health(BaseModel):
    """What the client knows of the cluster, the alias and its own dependencies."""

    model_config = ConfigDict(frozen=True)

    cluster: ClusterHealth
    #: The nodes' Elasticsearch versions, joined (``unknown (no monitor privilege)`` when not readable).
    version: str
    #: ``basic``, ``trial``, ``platinum``...; ``unknown`` when not readable.
    license: str
    index: IndexHealth
    #: dependency -> its breaker (``elasticsearch``, ``embeddings``, and ``reranker`` / ``llm`` when set).
    breakers: dict[str, BreakerStatus]
    #: The embedding model and its vectors' length.
    embedding_model: str
    embedding_dimensions: int
    #: The reranker's model, None when there is none.
    reranker_model: str | None = None
    #: The fusion a search of the alias uses when the call passes none, and where each parameter comes from
    #: (as ``SearchResponse.fusion`` and ``fusion_sources``).
    fusion: FusionSetting
    fusion_sources: dict[str, str] = Field(default_factory=dict)
