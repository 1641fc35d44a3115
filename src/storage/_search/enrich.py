"""Stage 5, **enrich**: the page (ranked fused hits) in, :class:`SearchHit` objects out.

The legs fetch ids and scores only. Loading every window hit's stored document and highlighting all of them
for a page of ten was most of a leg's time (2,000 SciFact documents, window 50: the BM25 leg's body took
27 ms with highlights and 8 ms without). So after fusion, **one** request (:meth:`Enricher.fetch`) fetches
the documents and highlights of the hits that are shown: the page or, with rerank, the candidates the
reranker reads (the page is among them). It asks by id, with the search's filters (tenant included), so it
can never return more than the legs could.

Every hit on the page gets highlights the same way, whichever leg found it; ``highlight_source`` says what
they are: ``bm25`` (query terms, the BM25 leg found the hit), ``followup`` (query terms, only the kNN leg
found it) or ``snippet`` (no query term in it: the text's start).

The fetch has the leg budget (``leg_timeout_s``) and the Elasticsearch resilience stack; if it fails, the
search fails with the typed error (the documents are the result). A hit whose document it does not return
is dropped: deleted since the legs ran, or on a shard that did not answer (then the response is
``partial``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._dsl.queries import fetch_request
from .._fusion.methods import Provenance
from .._observability.tracing import span
from .._transport.backend import Backend
from .._transport.translate import timeout_error
from .._types.results import HighlightSource, PassageFields, SearchHitFields, ShardReport
from ..passages import best_passages
from .plan import Plan

__all__ = ["Enricher", "Fetched", "KnnPassages", "highlight_origin", "hit_fields", "knn_passages", "page_hits"]


def highlight_origin(highlight: Mapping[str, list[str]], *, bm25_hit: bool = False) -> HighlightSource:
    """``snippet`` when no query term is highlighted, else who found the hit (``bm25``) or ``followup``."""
    if not any("<em>" in f for frags in highlight.values() for f in frags):
        return "snippet"
    return "bm25" if bm25_hit else "followup"


@dataclass(frozen=True, slots=True)
class Fetched:
    """What the fetch found (id -> hit with ``_source`` and ``highlight``), how many shards answered it,
    and how long it took."""

    hits: dict[str, dict[str, Any]] = field(default_factory=dict)
    shards: ShardReport | None = None
    latency_ms: float = 0.0

    @property
    def partial(self) -> bool:
        return self.shards is not None and self.shards.partial

    @property
    def sources(self) -> dict[str, dict[str, Any]]:
        return {doc_id: h.get("_source") or {} for doc_id, h in self.hits.items()}


class Enricher:
    def __init__(self, backend: Backend) -> None:
        self._b = backend

    async def fetch(self, plan: Plan, ids: Sequence[str], vector: Sequence[float] | None = None) -> Fetched:
        """One request for the documents of ``ids`` (and their highlights for the plan's query; with
        ``vector``, where the plan's passages come with the fetch, each one's best passages for it), within
        the plan's scope, on its target or its point-in-time. Errors propagate, typed; the caller decides what
        a partial answer (some shards missing) means."""
        if not ids:
            return Fetched()
        passages_for = (vector, plan.passages) if vector is not None and plan.passages_at_fetch else None
        body = fetch_request(
            plan.embed_text,
            ids,
            highlight=plan.highlight,
            scope=plan.scope,
            clause=plan.bm25_clause,
            passages_for=passages_for,
            highlight_limit=plan.highlight_limit,
        )
        if plan.pit is not None:
            body["pit"] = {"id": plan.pit[0], "keep_alive": plan.pit[1]}
        else:
            body["index"] = plan.target
        budget = self._b.settings.leg_timeout_s
        es = self._b.leg_es
        started = time.perf_counter()
        with span("hybrid_search.fetch", {"search.fetch.ids": len(ids)}):
            try:
                async with asyncio.timeout(budget) as scope:
                    resp = await self._b.es_call(lambda: es.search(**body), deadline_s=budget, within=scope)
            except TimeoutError:
                raise timeout_error("fetch", "elasticsearch", budget) from None
        return Fetched(
            {str(h["_id"]): h for h in resp.body["hits"]["hits"]},
            ShardReport.from_body(resp.body),
            (time.perf_counter() - started) * 1000,
        )


#: Characters of a best passage shown as a kNN-only hit's highlight (the BM25 highlighter's fragment size).
_PASSAGE_HIGHLIGHT = 160

#: id -> the best passages the kNN leg returned for it: (start, end, score), best first.
KnnPassages = Mapping[str, Sequence[tuple[int, int, float]]]


def knn_passages(hits: Sequence[Mapping[str, Any]]) -> dict[str, list[tuple[int, int, float]]]:
    """The kNN leg's inner hits (a document read in passages: its best ones), by document id. Pure."""
    out: dict[str, list[tuple[int, int, float]]] = {}
    for h in hits:
        inner = ((h.get("inner_hits") or {}).get("passages") or {}).get("hits", {}).get("hits") or ()
        found = []
        for p in inner:
            fields = p.get("fields") or {}
            start, end = (fields.get("passages.start") or [None])[0], (fields.get("passages.end") or [None])[0]
            if isinstance(start, int) and isinstance(end, int):
                found.append((start, end, float(p.get("_score") or 0.0)))
        if found:
            out[str(h["_id"])] = found
    return out


def hit_fields(
    hit: Provenance,
    doc: Mapping[str, Any],
    *,
    highlight: bool,
    rerank_score: float | None = None,
    position: int | None = None,
    knn: KnnPassages | None = None,
    shown: int = 0,
    similarity: float | None = None,
) -> SearchHitFields:
    """One shown hit's fields: its fusion provenance, its document and highlights as the fetch returned them
    (``doc``), its rerank score when it was reranked, and (``shown`` > 0: the index holds passages) its best
    passages — the kNN leg's (``knn``) and those holding the BM25 leg's fragments; a hit only the kNN leg
    found is highlighted with its best passage's start. Its similarity: the kNN leg's score, else
    ``similarity`` (measured for a hit the leg did not reach). Pure."""
    doc_id, fused_score, normalized, ranks, leg_scores = hit
    highlights: dict[str, list[str]] = doc.get("highlight") or {} if highlight else {}
    source: dict[str, Any] = doc.get("_source") or {}
    origin: HighlightSource | None = highlight_origin(highlights, bm25_hit="bm25" in ranks) if highlight else None
    passages: list[PassageFields] = []
    similarity = leg_scores.get("knn", similarity)
    if shown and "passages" in source:
        source = dict(source)
        stored = [(int(p["start"]), int(p["end"])) for p in source.pop("passages") or () if isinstance(p, Mapping)]
        text = str(source.get("text") or "")
        found = best_passages(text, stored, (knn or {}).get(doc_id, ()), highlights.get("text") or (), shown)
        passages = [{"start": a, "end": b, "text": text[a:b], "leg": leg, "score": sc} for a, b, sc, leg in found]
        best_knn = next((p for p in passages if p["leg"] == "knn"), None)
        if best_knn is not None and best_knn["score"] is not None and similarity is not None:
            # (read head first, the leg weighs a passage down against the head: the similarity is its own)
            similarity = max(similarity, best_knn["score"])
        if highlight and best_knn is not None and "bm25" not in ranks:
            highlights = {**highlights, "text": [_clip(best_knn["text"], _PASSAGE_HIGHLIGHT)]}
            origin = "passage"
    return {
        "id": doc_id,
        "score": fused_score if rerank_score is None else rerank_score,
        "normalized_score": normalized,
        "fused_score": fused_score,
        "rerank_score": rerank_score,
        "ranks": ranks,
        "leg_scores": leg_scores,
        "similarity": similarity,
        "source": source,
        "highlights": highlights,
        "highlight_source": origin,
        "position": position,
        "passages": passages,
    }


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit]
    return (cut[: cut.rfind(" ")] if " " in cut[limit // 2 :] else cut) + "…"


def page_hits(
    page: Sequence[tuple[Provenance, float | None]],
    fetched: Fetched,
    *,
    highlight: bool,
    knn: KnnPassages | None = None,
    shown: int = 0,
    similarities: Mapping[str, float] | None = None,
) -> list[SearchHitFields]:
    """The page's hits from the fused (and maybe reranked) provenance and what the fetch found; a hit the
    fetch did not return is dropped; ``similarities``: measured for hits the kNN leg did not reach. Pure."""
    docs = fetched.hits
    measured = similarities or {}
    return [
        hit_fields(
            hit,
            doc,
            highlight=highlight,
            rerank_score=rerank_score,
            knn=knn,
            shown=shown,
            similarity=measured.get(hit[0]),
        )
        for hit, rerank_score in page
        if (doc := docs.get(hit[0])) is not None
    ]
