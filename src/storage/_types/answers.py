"""What an answer with citations returns (:meth:`SearchClient.answer`, ``answer_stream``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field

from .results import Degradation, SearchResponse

__all__ = [
    "Answer",
    "AnswerDelta",
    "AnswerDone",
    "AnswerEntry",
    "AnswerEvent",
    "AnswerStatus",
    "AnswerTimings",
    "AnswerUsage",
]


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
    #: The parts of the document's text the entry gave the model (character offsets, text order): its best
    #: passages when it is read in passages, else the whole text — what a citation of it rests on.
    passages: list[tuple[int, int]] = Field(default_factory=list)


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


AnswerStatus = Literal["answered", "not_in_entries", "nothing_found", "no_context", "llm_failed"]


class Answer(BaseModel):
    """An answer with citations (:meth:`SearchClient.answer`): what the model said, which entries it cited,
    what it was given, and how it got there."""

    model_config = ConfigDict(frozen=True)

    question: str
    #: The model's text; None when the model failed (``degraded``; the entries are still here).
    answer: str | None
    #: ``answered``; ``not_in_entries`` (the model said the entries do not hold the answer);
    #: ``nothing_found`` (the search found nothing, no model was asked); ``no_context`` (what it found did
    #: not fit the context budget: no model was asked); ``llm_failed``.
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
    #: None unless the chat model failed or the search was degraded. ``reason``: ``llm_timeout``,
    #: ``llm_unavailable``, ``llm_disconnected`` (the server crashed mid-request), ``llm_circuit_open``,
    #: ``llm_rate_limited``, ``llm_error``, ``llm_bad_response``; else the search's own (``legs_failed``: the
    #: search's).
    degradation: Degradation | None = None
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
    def uncited(self) -> bool:
        """The model answered without citing an entry: nothing supports the answer (never show it as
        sourced; ``citations`` then lists every entry it was given, ``citations_fallback``)."""
        return self.answer is not None and self.citations_fallback

    @property
    def sources(self) -> list[AnswerEntry]:
        """The entries the answer cites, in citation order; none when it cites none (:attr:`uncited`)."""
        if self.citations_fallback:
            return []
        by_id = {e.id: e for e in self.entries}
        return [by_id[i] for i in self.citations if i in by_id]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def degraded(self) -> bool:
        """The chat model failed or the search was degraded (``degradation`` says which and why)."""
        return self.degradation is not None


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
