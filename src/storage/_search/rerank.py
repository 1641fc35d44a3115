"""Stage 4, **rerank** (optional): the fused list in, the list to page through out.

The first ``rerank_candidates`` fused hits (title + text) go to the reranker in one call; they come back
ordered by its score (ties keep the fused order), followed by the rest of the fused list. Every hit keeps
its fused score and leg provenance. The reranker has its own resilience stack and budget
(``rerank_timeout_s``): down, slow or answering garbage, the fused order is returned, the response is
``degraded`` with a ``rerank_<reason>``, and one WARN event says so — unless ``strict=True``, which raises
the typed error. A reranker never makes a search fail or run past its budget.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._errors import SearchError
from .._fusion.methods import FusedList, Provenance
from .._observability.log import query_hash
from .._transport.backend import Backend
from .._transport.translate import timeout_error
from .._types.results import RerankReport
from .plan import Plan

__all__ = ["Ranked", "RerankStage", "order_by_scores", "rerank_text"]


@dataclass(frozen=True, slots=True)
class Ranked:
    """The list to page through: the reranked candidates (``head``: ids with their rerank scores, best
    first), then the rest of the fused list in fused order (all of it when nothing was reranked)."""

    fused: FusedList
    head: list[tuple[str, float]] = field(default_factory=list)
    report: RerankReport | None = None
    error: SearchError | None = None

    @property
    def reranked(self) -> bool:
        return self.report is not None and self.report.ok

    def page(self, offset: int, limit: int) -> list[tuple[Provenance, float | None]]:
        """Hits ``offset`` to ``offset + limit`` with their rerank scores (None for hits not reranked); only
        these hits' provenance is read."""
        head = self.head[offset : offset + limit]
        provenances = self.fused.provenances_of([doc_id for doc_id, _ in head])
        out: list[tuple[Provenance, float | None]] = [
            (p, score) for p, (_, score) in zip(provenances, head, strict=True)
        ]
        wanted = limit - len(out)
        if wanted > 0:
            start = max(offset - len(self.head), 0) + len(self.head)
            out += [(p, None) for p in self.fused.provenances(start, start + wanted)]
        return out


def rerank_text(source: Mapping[str, Any]) -> str:
    """What the reranker reads: the title and the text (like the embedder)."""
    title, text = str(source.get("title") or ""), str(source.get("text") or "")
    return f"{title}\n{text}" if title and text else title or text


def order_by_scores(candidates: Sequence[str], scores: Sequence[float]) -> list[tuple[str, float]]:
    """Candidate ids by descending rerank score; equal scores keep their fused order. Pure."""
    order = sorted(range(len(candidates)), key=lambda i: (-scores[i], i))
    return [(candidates[i], scores[i]) for i in order]


def unranked(hits: FusedList) -> Ranked:
    return Ranked(fused=hits)


class RerankStage:
    def __init__(self, backend: Backend) -> None:
        self._b = backend

    async def run(self, plan: Plan, fused: FusedList, sources: Mapping[str, Mapping[str, Any]]) -> Ranked:
        if not plan.rerank or not fused:
            return unranked(fused)
        reranker = self._b.reranker
        assert reranker is not None  # the plan stage refuses rerank without one
        candidates = fused.top_ids(plan.rerank_candidates)
        budget = self._b.settings.rerank_timeout_s
        started = time.perf_counter()
        try:
            async with asyncio.timeout(budget) as scope:
                scores = await self._b.rerank(
                    plan.text,
                    [rerank_text(sources.get(doc_id, {})) for doc_id in candidates],
                    budget_s=budget,
                    within=scope,
                )
        except (TimeoutError, SearchError) as exc:
            error = timeout_error("rerank", "reranker", budget) if isinstance(exc, TimeoutError) else exc
            report = RerankReport(
                ok=False,
                model=reranker.model_id,
                candidates=len(candidates),
                latency_ms=round((time.perf_counter() - started) * 1000, 3),
                reason=error.reason,
                error=f"{type(error).__name__}: {error}",
            )
            if plan.strict:
                if isinstance(exc, TimeoutError):
                    raise error from None
                raise
            self._b.events.emit(
                logging.WARNING,
                "rerank failed; the fused order is returned",
                "search.rerank_failed",
                {
                    "search.query_hash": query_hash(plan.text),
                    "rerank.model": reranker.model_id,
                    "rerank.candidates": len(candidates),
                    "error.type": type(error).__name__,
                    "error.reason": error.reason,
                },
            )
            return Ranked(fused=fused, report=report, error=error)
        report = RerankReport(
            ok=True,
            model=reranker.model_id,
            candidates=len(candidates),
            latency_ms=round((time.perf_counter() - started) * 1000, 3),
        )
        return Ranked(fused=fused, head=order_by_scores(candidates, scores), report=report)
