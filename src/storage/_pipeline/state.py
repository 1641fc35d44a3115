"""Per-request state: created by one search, passed from stage to stage, never stored on the client.

(Keeping it on the shared client was a race: two concurrent searches overwrote each other's leg outcomes,
and a failed search could log the legs of another.)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Literal

from .._errors import SearchError
from .._models import Leg
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


@dataclass
class SearchState:
    """One search's journey through the stages (the current scope tier's, when a cascade runs)."""

    plan: Plan
    started: float = field(default_factory=time.perf_counter)
    outcomes: dict[str, LegOutcome] = field(default_factory=dict)
    recovery: list[str] = field(default_factory=list)

    def elapsed_s(self) -> float:
        return time.perf_counter() - self.started
