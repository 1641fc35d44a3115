"""Stage 5, **enrich**: the page (ranked fused hits) in, :class:`SearchHit` objects out.

BM25 hits already carry the leg's highlights; hits the BM25 leg did not return (kNN-only) get theirs from
one follow-up request for their ids, within what is left of the leg budget (``followup`` when a query term
is in them, else ``snippet``: the text's start). The follow-up carries the search's filters, tenant
included, so it can never return more than the legs could. If it fails or the budget is spent, those hits
keep no highlight and the response says ``highlights_complete=False``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .._backend import Backend
from .._errors import SearchError
from .._errors_map import timeout_error
from .._fusion import FusedHit
from .._logging import event
from .._models import SearchHit, ShardReport
from .._queries import fetch_request
from .._tracing import span
from .fuse import Fused

__all__ = ["Enricher", "Fetched", "HighlightSource", "highlight_origin"]

HighlightSource = Literal["bm25", "followup", "snippet"]


def highlight_origin(highlight: Mapping[str, list[str]]) -> HighlightSource:
    return "followup" if any("<em>" in f for frags in highlight.values() for f in frags) else "snippet"


@dataclass(frozen=True, slots=True)
class Fetched:
    """What a follow-up request found, by id, and how many shards answered it."""

    hits: dict[str, dict[str, Any]]
    shards: ShardReport | None

    @property
    def partial(self) -> bool:
        return self.shards is not None and self.shards.partial


class Enricher:
    def __init__(self, backend: Backend) -> None:
        self._b = backend

    async def enrich(
        self,
        page: Sequence[tuple[FusedHit, float | None]],
        fused: Fused,
        *,
        text: str,
        target: str,
        filters: Sequence[dict[str, Any]],
        highlight: bool,
        budget_s: float,
    ) -> tuple[list[SearchHit], bool]:
        """The page's hits with their documents and highlights, and whether every highlight was had."""
        highlights = fused.highlights
        origin: dict[str, HighlightSource] = dict.fromkeys(highlights, "bm25")
        complete = True
        if highlight:
            missing = [f.id for f, _ in page if f.id not in highlights]
            if missing:
                found = await self.follow_up(text, missing, budget_s, index=target, filters=filters)
                complete = found is not None and not found.partial
                highlights = dict(highlights)
                for doc_id, h in (found.hits if found else {}).items():
                    highlights[doc_id] = h.get("highlight") or {}
                    origin[doc_id] = highlight_origin(highlights[doc_id])
        hits = [
            SearchHit(
                id=f.id,
                score=f.score if rerank_score is None else rerank_score,
                normalized_score=f.normalized_score,
                fused_score=f.score,
                rerank_score=rerank_score,
                ranks=dict(f.ranks),
                leg_scores=dict(f.leg_scores),
                source=fused.sources.get(f.id, {}),
                highlights=highlights.get(f.id, {}),
                highlight_source=origin.get(f.id),
            )
            for f, rerank_score in page
        ]
        return hits, complete

    async def follow_up(
        self,
        text: str,
        ids: Sequence[str],
        budget_s: float,
        *,
        index: str | None = None,
        pit: tuple[str, str] | None = None,
        source: bool = False,
        filters: Sequence[dict[str, Any]] = (),
    ) -> Fetched | None:
        """One request for ``ids``: highlights for ``text`` (and documents if ``source``), by id.

        Highlights only (``source=False``) are best effort: None when the budget is spent or the request
        fails. With ``source=True`` (deep paging, which needs the documents) errors propagate. The caller
        decides what a partial answer (some shards missing) means.
        """
        if budget_s < 0.05 and not source:
            return None
        body = fetch_request(text, ids, source=source, filters=filters)
        if pit is not None:
            body["pit"] = {"id": pit[0], "keep_alive": pit[1]}
        timeout = max(budget_s, 0.05)
        es = self._b.es.options(request_timeout=timeout)
        with span("hybrid_search.fetch", {"search.fetch.ids": len(ids), "search.fetch.source": source}):
            try:
                async with asyncio.timeout(timeout):
                    if pit is not None:
                        resp = await self._b.es_call(lambda: es.search(**body), deadline_s=timeout)
                    else:
                        resp = await self._b.es_call(lambda: es.search(index=index, **body), deadline_s=timeout)
            except (TimeoutError, SearchError) as exc:
                if source:
                    if isinstance(exc, TimeoutError):
                        raise timeout_error("fetch", "elasticsearch", timeout) from None
                    raise
                event(
                    20,
                    "highlight follow-up skipped",
                    "search.highlight_followup",
                    {"error.type": type(exc).__name__, "search.fetch.ids": len(ids)},
                )
                return None
        return Fetched({str(h["_id"]): h for h in resp.body["hits"]["hits"]}, ShardReport.from_body(resp.body))
