"""The data that crosses the public API: documents in, reports and search results out."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from datetime import date, datetime
from typing import Any, Literal, TypedDict

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "Answer",
    "AnswerDelta",
    "AnswerDone",
    "AnswerEntry",
    "AnswerEvent",
    "AnswerStatus",
    "AnswerTimings",
    "AnswerUsage",
    "Document",
    "FailedDocument",
    "IndexProgress",
    "IndexReport",
    "LegReport",
    "ReembedReport",
    "RerankReport",
    "SearchHit",
    "SearchPage",
    "SearchResponse",
    "ShardReport",
    "TuneReport",
    "TuneRow",
    "embedding_text",
]

Leg = Literal["bm25", "knn"]
SearchMode = Literal["bm25", "knn", "hybrid"]

_METADATA_KEY = r"^[A-Za-z0-9_\-]{1,64}$"


def derive_id(title: str, text: str, source: str | None) -> str:
    """A stable id from the content: re-indexing the same document overwrites it instead of duplicating."""
    digest = hashlib.sha256("\x1f".join((source or "", title, text)).encode("utf-8")).hexdigest()
    return digest[:32]


def embedding_text(title: str, text: str) -> str:
    """What the embedder reads of a document: its title and its text, or whichever of them it has."""
    title, text = title.strip(), text.strip()
    return f"{title}\n{text}" if title and text else title or text


class Document(BaseModel):
    """One document to index: a ``title``, a ``text`` or both (catalogue records and headlines often have
    only a title). ``id`` is yours; if omitted it is derived from source, title and text."""

    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=False)

    id: str = Field(min_length=1, max_length=512)
    text: str = ""
    title: str = ""
    ticker: str | None = None
    doc_type: str | None = None
    source: str | None = None
    tenant_id: str | None = None
    published_at: datetime | date | None = None
    #: Free keyword metadata, searchable as filters ``metadata.<key>``.
    metadata: dict[str, str | list[str]] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _derive_id(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and data.get("id") in (None, ""):
            data = dict(data)
            data["id"] = derive_id(str(data.get("title") or ""), str(data.get("text") or ""), data.get("source"))
        return data

    @field_validator("id")
    @classmethod
    def _id_fits(cls, value: str) -> str:
        if len(value.encode("utf-8")) > 512:
            raise ValueError("id is longer than Elasticsearch's 512-byte limit")
        return value

    @model_validator(mode="after")
    def _has_content(self) -> Document:
        if not self.title.strip() and not self.text.strip():
            raise ValueError("a document needs a title or a text (both are blank)")
        return self

    @field_validator("metadata")
    @classmethod
    def _metadata_keys(cls, value: dict[str, str | list[str]]) -> dict[str, str | list[str]]:
        for key in value:
            if not re.match(_METADATA_KEY, key):
                raise ValueError(f"metadata key {key!r} must match {_METADATA_KEY}")
        return value

    def embedding_text(self) -> str:
        """What the embedder sees: the title and the text, or whichever of them the document has."""
        return embedding_text(self.title, self.text)

    def to_source(self) -> dict[str, Any]:
        """The ``_source`` stored in Elasticsearch (without the vector)."""
        return self.model_dump(mode="json", exclude={"id"}, exclude_none=True)


class FailedDocument(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    #: A machine tag: ``invalid_document``, ``embedding_failed``, ``mapping_error``, ``rejected`` (429 after
    #: retries), ``transport_error``...
    reason: str
    detail: str = ""
    status: int | None = None
    #: ``invalid_document`` only: the document's 0-based position in what was submitted (its ``id`` is
    #: ``#<position>`` when it had no usable one).
    position: int | None = None


class IndexReport(BaseModel):
    """Outcome of :meth:`SearchClient.index_documents`: every submitted id is in exactly one list."""

    model_config = ConfigDict(frozen=True)

    index: str
    indexed: list[str]
    failed: list[FailedDocument]
    #: Ids given more than once in one call: indexed once (the last occurrence wins).
    duplicates: list[str] = Field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failed

    @property
    def failed_ids(self) -> list[str]:
        return [f.id for f in self.failed]


class TuneRow(BaseModel):
    """One fusion setting's nDCG@10 over the judged queries, and its paired comparison with the current
    setting (the gain, its 95 % bootstrap interval, the randomization test's p-value)."""

    model_config = ConfigDict(frozen=True)

    setting: dict[str, Any]
    label: str
    ndcg: float
    gain: float = 0.0
    low: float = 0.0
    high: float = 0.0
    p_value: float = 1.0


class TuneReport(BaseModel):
    """Outcome of :func:`storage.tune`: what the judged queries say about the index's fusion setting."""

    model_config = ConfigDict(frozen=True)

    dataset: str
    index: str
    #: Judged queries used (those with a judged document in the index), and those left out.
    queries: int
    queries_left_out: int = 0
    judged_documents: int = 0
    #: Judged documents the index does not hold (or not for the tenant): counted, never silently ignored.
    judged_documents_missing: int = 0
    grid_size: int
    folds: int
    #: The legs retrieved once per query; then every setting fused in-process.
    retrieval_seconds: float
    fusion_seconds: float
    #: The setting searches use now (call arguments aside), and whether it is the one stored with the index.
    current: TuneRow
    current_stored: bool = False
    bm25_ndcg: float
    knn_ndcg: float
    #: The estimate of choosing by judgments: each fold's setting chosen on the other folds, scored on its own
    #: queries; its gain over the current setting, interval and p-value. What a new query can expect.
    cross_validated: TuneRow
    #: What the rule picks on all the judged queries: the grid's best setting if it beats the current one
    #: significantly, else the current one (what ``change`` recommends); and the grid's best rows by nDCG@10.
    best: TuneRow
    table: list[TuneRow]
    decision: Literal["change", "keep"]
    reason: str
    #: The setting to use (``decision == "change"``), as stored with the index.
    recommended: dict[str, Any] | None = None
    warnings: list[str] = Field(default_factory=list)
    #: Stored with the index (``apply=True`` and a significant change).
    applied: bool = False


class IndexProgress(BaseModel):
    model_config = ConfigDict(frozen=True)

    total: int
    embedded: int
    indexed: int
    failed: int


class ReembedReport(BaseModel):
    """Outcome of :meth:`SearchClient.reembed`: a new index version built with another model, and whether
    the alias was moved to it."""

    model_config = ConfigDict(frozen=True)

    alias: str
    #: The version read (what the alias pointed at), and the one written.
    source: str
    target: str | None
    previous_model: str | None
    model: str
    #: Documents in the source when the run ended.
    documents: int
    #: Written by this run; already in the target from an interrupted run (resumed, not embedded again).
    embedded: int = 0
    resumed: int = 0
    #: Documents gone from the source while the run read it, removed from the target too.
    removed: int = 0
    #: Documents that could not be embedded or written: reported, never dropped silently. Any of them keeps
    #: the alias where it was (run again to retry just these).
    failed: list[FailedDocument] = Field(default_factory=list)
    #: The alias now points at ``target`` (and ``deleted_old``: the versions it pointed at were deleted).
    promoted: bool = False
    deleted_old: bool = False
    #: Why the alias was not moved, when it was not.
    reason: str | None = None
    seconds: float = 0.0


class ShardReport(BaseModel):
    """Elasticsearch's ``_shards`` and ``timed_out`` for one request: how much of the index answered."""

    model_config = ConfigDict(frozen=True)

    total: int = 0
    successful: int = 0
    failed: int = 0
    skipped: int = 0
    #: The server-side ``timeout`` ran out: some shards returned what they had found so far.
    timed_out: bool = False
    #: The first shard failure's type and reason (e.g. ``no_shard_available_action_exception: ...``).
    failure: str | None = None

    @property
    def partial(self) -> bool:
        """Some shards did not answer (failed) or not fully (timed out): the hits may be incomplete."""
        return self.failed > 0 or self.timed_out

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> ShardReport | None:
        """From a search response body (None when it has no ``_shards``, e.g. a scripted peer). A report
        without failures is one of a few shapes (every shard answered, say 1 of 1) and the model is frozen:
        those are built once and shared (a search reads three reports; validating one costs ~3 µs)."""
        shards = body.get("_shards")
        if not isinstance(shards, Mapping):
            return None
        failures = shards.get("failures") or []
        key: tuple[object, ...] | None = None
        if not failures:
            key = (
                shards.get("total"),
                shards.get("successful"),
                shards.get("failed"),
                shards.get("skipped"),
                body.get("timed_out"),
            )
            known = _COMMON_REPORTS.get(key)  # (a list or an object here: TypeError, as int() below would)
            if known is not None:
                return known
        failure = None
        if failures and isinstance(failures[0], Mapping):
            reason = failures[0].get("reason")
            if isinstance(reason, Mapping):
                failure = f"{reason.get('type', 'error')}: {str(reason.get('reason', ''))[:200]}"
            else:
                failure = str(reason)[:200]
        report = cls(
            total=int(shards.get("total") or 0),
            successful=int(shards.get("successful") or 0),
            failed=int(shards.get("failed") or 0),
            skipped=int(shards.get("skipped") or 0),
            timed_out=bool(body.get("timed_out")),
            failure=failure,
        )
        if key is not None and len(_COMMON_REPORTS) < 64:
            _COMMON_REPORTS[key] = report
        return report


#: Shard reports without failures, by (total, successful, failed, skipped, timed_out) as Elasticsearch sent
#: them; bounded (a cluster has a few shard counts).
_COMMON_REPORTS: dict[tuple[object, ...], ShardReport] = {}


class LegReport(BaseModel):
    """What one leg did: hits returned, latency, and why it failed if it did."""

    model_config = ConfigDict(frozen=True)

    leg: Leg
    ok: bool
    hits: int = 0
    latency_ms: float = 0.0
    #: Elasticsearch's own ``took`` (server time) when the leg succeeded.
    took_ms: int | None = None
    #: kNN only: time spent embedding the query.
    embed_ms: float | None = None
    reason: str | None = None
    error: str | None = None
    #: How many shards answered (None when the leg failed before an answer).
    shards: ShardReport | None = None

    @property
    def partial(self) -> bool:
        return self.shards is not None and self.shards.partial


class RerankReport(BaseModel):
    """What the rerank stage did (``SearchResponse.rerank``; None when the stage was off)."""

    model_config = ConfigDict(frozen=True)

    ok: bool
    model: str
    #: Fused hits the reranker was asked to score.
    candidates: int
    latency_ms: float = 0.0
    #: Why it failed (``timeout``, ``connection_error``, ``circuit_open``, ``http_error``, ``bad_response``).
    reason: str | None = None
    error: str | None = None


class SearchHit(BaseModel):
    """One fused hit with its provenance."""

    model_config = ConfigDict(frozen=True)

    id: str
    #: What the list is ordered by: the rerank score when the rerank stage ran (``response.ordered_by ==
    #: "rerank"``), else the fused score. Only comparable within one response.
    score: float
    #: In [0, 1]: the fused score relative to the best score possible; comparable across queries.
    normalized_score: float
    #: The fusion's score (RRF: Σ w / (k + rank)), whatever ordered the list. None only in old payloads.
    fused_score: float | None = None
    #: The reranker's score for this hit; None when the hit was not reranked.
    rerank_score: float | None = None
    #: 1-based rank in each leg that found it (a leg that did not find it is absent).
    ranks: dict[str, int] = Field(default_factory=dict)
    #: Each leg's raw score (BM25 score, kNN similarity score).
    leg_scores: dict[str, float] = Field(default_factory=dict)
    source: dict[str, Any] = Field(default_factory=dict)
    #: field -> fragments with the matches in ``<em>``.
    highlights: dict[str, list[str]] = Field(default_factory=dict)
    #: What ``highlights`` are (every hit's come from the one fetch of the page): ``bm25`` (query terms; the
    #: BM25 leg found the hit), ``followup`` (query terms in a hit only the kNN leg found), ``snippet`` (no
    #: query term in it: the text's start), or None (highlights not requested).
    highlight_source: Literal["bm25", "followup", "snippet"] | None = None
    #: Deep paging only: the 1-based position of this hit in the whole walk.
    position: int | None = None

    @property
    def title(self) -> str:
        return str(self.source.get("title", ""))

    @property
    def text(self) -> str:
        return str(self.source.get("text", ""))


class SearchHitFields(TypedDict):
    """A :class:`SearchHit`'s fields as a plain dict: what the search and the deep walk build for each shown
    hit. They are validated inside the :class:`SearchResponse` / :class:`SearchPage` that holds them: one
    validation for the page, half the time of one :class:`SearchHit` per hit."""

    id: str
    score: float
    normalized_score: float
    fused_score: float
    rerank_score: float | None
    ranks: dict[str, int]
    leg_scores: dict[str, float]
    source: dict[str, Any]
    highlights: dict[str, list[str]]
    highlight_source: Literal["bm25", "followup", "snippet"] | None
    position: int | None


class SearchResponse(BaseModel):
    model_config = ConfigDict(frozen=True)

    query: str
    mode: SearchMode
    hits: list[SearchHit]
    #: Fused candidates available for paging (``offset + limit`` within it).
    total_fused: int
    offset: int
    limit: int
    legs: dict[str, LegReport]
    #: Documents found by both legs among the candidates.
    overlap: int
    fusion: dict[str, Any]
    #: Where each fusion parameter (method, k, weights, window) came from: ``call`` (an argument),
    #: ``settings`` (set explicitly: ``ES_FUSION``...), ``index`` (tuned and stored with the index by
    #: ``hybrid-search tune --apply``) or ``default``.
    fusion_sources: dict[str, str] = Field(default_factory=dict)
    #: A leg failed (``legs_failed``) or the rerank stage did (``rerank.ok`` is False): the hits are what
    #: the rest could give.
    degraded: bool = False
    legs_failed: list[str] = Field(default_factory=list)
    #: Why the result is degraded: the failed leg's reason tag (``timeout``, ``circuit_open``...), or
    #: ``rerank_<reason>`` when only the rerank stage failed; None when not degraded.
    degraded_reason: str | None = None
    #: What query hygiene changed: ``truncated``, ``control_chars_removed``, ``quotes_repaired``...
    query_adjustments: list[str] = Field(default_factory=list)
    #: Zero-result recovery that served this response: ``fuzzy`` (the BM25 leg found nothing and its fuzzy
    #: retry did), ``scope`` (a wider filter tier served; see ``scope_tier``).
    recovery: list[str] = Field(default_factory=list)
    #: Which filter tier served: 0 = the filters given, n = ``scopes[n - 1]``.
    scope_tier: int = 0
    #: ``parallel`` (two concurrent requests) or ``msearch`` (both legs in one ``_msearch``).
    round_trip: str = "parallel"
    #: False when highlights were requested but the fetch of the page answered from only some shards.
    highlights_complete: bool = True
    #: Some shards did not answer a leg (failed, or timed out server-side): its hits, and so the fused list,
    #: may be incomplete. Not ``degraded``: every leg answered. ``partial_legs`` says which, and
    #: ``legs[leg].shards`` how much (``fetch``: the request for the page's documents, whose missing hits
    #: are then left out).
    partial: bool = False
    partial_legs: list[str] = Field(default_factory=list)
    #: Which score ordered ``hits``: ``fusion`` or ``rerank``.
    ordered_by: Literal["fusion", "rerank"] = "fusion"
    #: The rerank stage's report; None when it did not run.
    rerank: RerankReport | None = None
    #: The second phase: the one request that fetched the shown hits' documents and highlights (ms; None
    #: when nothing was fetched). ``latency_ms`` minus the slower leg minus this is the client's own time.
    fetch_ms: float | None = None
    latency_ms: float = 0.0
    correlation_id: str | None = None

    @property
    def ids(self) -> list[str]:
        return [h.id for h in self.hits]


class SearchPage(BaseModel):
    """One page of a deep-paging walk (:meth:`SearchClient.search_page`)."""

    model_config = ConfigDict(frozen=True)

    query: str
    mode: SearchMode
    hits: list[SearchHit]
    #: 1-based page number within the walk.
    page: int
    #: Pass it back to get the next page; None when the walk is over (its point-in-time is then closed).
    next_cursor: str | None
    #: Hits returned by the walk so far, this page included.
    returned: int
    #: Whether this page reached into the BM25 tail (keyword matches ranked below ``depth``).
    in_tail: bool = False
    latency_ms: float = 0.0

    @property
    def ids(self) -> list[str]:
        return [h.id for h in self.hits]


class AnswerEntry(BaseModel):
    """One retrieved hit that went into the answer's context, as the model saw it."""

    model_config = ConfigDict(frozen=True)

    id: str
    title: str
    source: str | None = None
    #: The hit's score in the search (``SearchHit.score``) and its 1-based rank.
    score: float
    rank: int
    #: Cut to fit the context budget (only the last entry ever is).
    truncated: bool = False


class AnswerUsage(BaseModel):
    """Tokens as the chat server reported them (None where it did not)."""

    model_config = ConfigDict(frozen=True)

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None


class AnswerTimings(BaseModel):
    """Milliseconds per step of :meth:`SearchClient.answer`."""

    model_config = ConfigDict(frozen=True)

    search_ms: float
    #: Assembling the context and the prompt.
    context_ms: float = 0.0
    #: The chat call (None when no model was asked: nothing found).
    llm_ms: float | None = None
    #: Streaming only: until the first text delta.
    first_token_ms: float | None = None
    #: Extracting and checking the citations.
    citations_ms: float = 0.0
    total_ms: float


AnswerStatus = Literal["answered", "not_in_entries", "nothing_found", "llm_failed"]


class Answer(BaseModel):
    """An answer with citations (:meth:`SearchClient.answer`): what the model said, which entries it cited,
    what it was given, and how it got there."""

    model_config = ConfigDict(frozen=True)

    question: str
    #: The model's text; None when the model failed (``degraded``; the entries are still here).
    answer: str | None
    #: ``answered``; ``not_in_entries`` (the model said the entries do not hold the answer);
    #: ``nothing_found`` (the search found nothing, no model was asked); ``llm_failed``.
    status: AnswerStatus
    #: Ids of context entries the answer cites as ``[#id]``, in order of first appearance. When it cites
    #: none of them, every entry (``citations_fallback``): the answer drew on the whole context.
    citations: list[str] = Field(default_factory=list)
    citations_fallback: bool = False
    #: ``[#id]``s in the answer that were NOT in the context: invented by the model, never a source.
    invented_citations: list[str] = Field(default_factory=list)
    #: The entries in the context, in the order given to the model.
    entries: list[AnswerEntry] = Field(default_factory=list)
    #: An entry was cut or left out to fit the context budget.
    context_truncated: bool = False
    context_chars: int = 0
    #: The chat model failed, or the search was degraded (a leg failed): see ``degraded_reason``.
    degraded: bool = False
    #: ``llm_timeout``, ``llm_unavailable``, ``llm_circuit_open``, ``llm_rate_limited``, ``llm_error``,
    #: ``llm_bad_response``; else the search's own reason when only the search was degraded.
    degraded_reason: str | None = None
    #: The chat model's error (type and message, never a secret) when it failed.
    error: str | None = None
    #: The search that found the entries (legs, degraded, partial, latency).
    search: SearchResponse
    #: The chat model as configured (``openai-chat:<model>``) and as the server named itself.
    model: str | None = None
    served_model: str | None = None
    finish_reason: str | None = None
    usage: AnswerUsage | None = None
    timings: AnswerTimings
    #: How the answer was produced, in one paragraph (the search, the context, the model, the citations).
    reasoning: str
    correlation_id: str | None = None

    @property
    def sources(self) -> list[AnswerEntry]:
        """The cited entries, in citation order."""
        by_id = {e.id: e for e in self.entries}
        return [by_id[i] for i in self.citations if i in by_id]


class AnswerDelta(BaseModel):
    """Streaming: a piece of the answer's text, in order."""

    model_config = ConfigDict(frozen=True)

    type: Literal["delta"] = "delta"
    text: str


class AnswerDone(BaseModel):
    """Streaming: the last event; ``answer`` is the whole :class:`Answer` (citations, metadata). When
    ``answer.degraded`` is True and ``answer.answer`` is None, the deltas already shown are not an answer
    (the model failed mid-way): replace them."""

    model_config = ConfigDict(frozen=True)

    type: Literal["done"] = "done"
    answer: Answer


AnswerEvent = AnswerDelta | AnswerDone
