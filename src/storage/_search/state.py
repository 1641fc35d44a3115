"""Per-request state: created by one search, passed from stage to stage, never stored on the client.

(Keeping it on the shared client was a race: two concurrent searches overwrote each other's leg outcomes,
and a failed search could log the legs of another.)
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .._errors import SearchError
from .._types.models import Leg
from .._types.results import ShardReport
from .enrich import Fetched
from .plan import Plan

__all__ = ["LegOutcome", "SearchState"]


@dataclass
class LegOutcome:
    """What one leg did. A failure is data (``error``), never an exception, so the other leg's result
    survives it."""

    leg: Leg
    hits: list[dict[str, Any]] = field(default_factory=list)
    error: SearchError | None = None
    latency_ms: float = 0.0
    took_ms: int | None = None
    embed_ms: float | None = None
    #: Deep paging: the point-in-time id Elasticsearch returned (it may change between requests).
    pit_id: str | None = None
    #: What the leg was waiting on (for a timeout's error): "elasticsearch" or "embeddings".
    waiting_on: Literal["elasticsearch", "embeddings"] = "elasticsearch"
    #: How many shards answered (``_shards`` and ``timed_out`` of the response).
    shards: ShardReport | None = None
    #: The kNN leg: the query's vector it searched with (the fetch finds the shown hits' best passages by it).
    vector: Sequence[float] | None = None

    def answered(self, body: Any) -> None:
        """Take a search response body: its hits, its server time and its shard report."""
        self.hits = list(body["hits"]["hits"])
        self.took_ms = body.get("took")
        self.shards = ShardReport.from_body(body)

    @property
    def partial(self) -> bool:
        return self.error is None and self.shards is not None and self.shards.partial


@dataclass
class SearchState:
    """One search's journey through the stages (the current scope tier's, when a cascade runs)."""

    plan: Plan
    started: float = field(default_factory=time.perf_counter)
    outcomes: dict[str, LegOutcome] = field(default_factory=dict)
    recovery: list[str] = field(default_factory=list)
    #: What the enrich stage's fetch returned (documents, highlights, its shard report and time).
    fetched: Fetched = field(default_factory=Fetched)

    def elapsed_s(self) -> float:
        return time.perf_counter() - self.started
