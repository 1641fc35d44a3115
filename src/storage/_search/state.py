"""Per-request state: created by one search, passed from stage to stage, never stored on the client.

(Keeping it on the shared client was a race: two concurrent searches overwrote each other's leg outcomes,
and a failed search could log the legs of another.)
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, Literal

from .._errors import SearchError
from .._types.models import Leg
from .._types.results import ShardReport
from .enrich import Fetched
from .plan import Plan

__all__ = ["LegOutcome", "SearchState"]

_ID = itemgetter("_id")


@dataclass
class LegOutcome:
    """What one leg did. A failure is data (``error``), never an exception, so the other leg's result
    survives it."""

    leg: Leg
    #: The hits as Elasticsearch sent them, only where a later stage reads more than the leg's ranking
    #: (:meth:`Plan.keeps_hits`; read them with :meth:`kept`): None otherwise; a failed leg's are empty (it
    #: found nothing, which a later stage may read). (Every leg's parsed response
    #: was held until the search returned, ~200 dicts per search in flight: at 32 callers the garbage
    #: collector ran 2.5 times as often as for raw elasticsearch-py doing the same requests.)
    hits: list[dict[str, Any]] | None = None
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
    #: The leg's ranking, best first: its hits' ids and scores (0.0 where Elasticsearch sent none), read in
    #: the leg's own task while the response is fresh in memory. What fusion and the reports read.
    ids: list[str] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    #: The index of the first hit (the kNN leg's model check).
    index: str | None = None

    def __post_init__(self) -> None:
        if self.hits is not None and not self.ids:  # (built from hits: its ranking read from them)
            self._rank(self.hits)
        elif self.error is not None:
            self.hits = []

    def answered(self, body: Any, *, keep_hits: bool = True) -> None:
        """Take a search response body: its ranking (and its hits when ``keep_hits``), its server time and its
        shard report."""
        hits = body["hits"]["hits"]
        self._rank(hits)
        self.hits = list(hits) if keep_hits else None
        self.took_ms = body.get("took")
        self.shards = ShardReport.from_body(body)

    def _rank(self, hits: Sequence[Mapping[str, Any]]) -> None:
        self.ids = list(map(_ID, hits))
        self.scores = [h.get("_score") or 0.0 for h in hits]
        self.index = hits[0].get("_index") if hits else None

    def failed(self, error: SearchError) -> None:
        """The leg failed: no ranking, no hits."""
        self.ids, self.scores, self.hits, self.index, self.error = [], [], [], None, error

    def kept(self) -> list[dict[str, Any]]:
        """The hits as Elasticsearch sent them (the plan said to keep them: :meth:`Plan.keeps_hits`)."""
        if self.hits is None:
            raise RuntimeError(f"the {self.leg} leg's hits were not kept (Plan.keeps_hits decides which are)")
        return self.hits

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
