"""Stage 4b, **arrange** (only when asked): the ranked list made diverse, or collapsed to groups, before the
page is cut. Pure: no I/O.

- **Diversity** (maximal marginal relevance): over the ranked window, each next hit is the one with the best
  ``(1 - diversity) * relevance - diversity * (its highest cosine similarity to a hit already chosen)``;
  relevance is the hit's score over the best one's (the fused score; the rerank score, min-max scaled,
  for a reranked list): what ``normalized_score`` shows. The vectors are the
  documents' own (``embedding``), brought by the legs in the same requests. ``diversity=0`` is the ranked
  order itself (this stage does not run).
- **Groups**: the list (diverse or not) walked best first, each value of ``group_by`` keeping its first
  ``per_group`` hits; ``offset`` and ``limit`` count groups. Each group says how many of the window's
  candidates share its value (``known_matches``: a lower bound of its matches, free to have). A hit
  without the field is a group of its own (value None).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._fusion.methods import Provenance
from .plan import Plan
from .rerank import Ranked

__all__ = ["Group", "arranged_page", "group_ids", "group_value", "mmr_order", "ranked_ids"]

#: The most candidates MMR reorders (its cost grows with the square of it).
MMR_WINDOW = 100


@dataclass(frozen=True, slots=True)
class Group:
    value: str | None
    ids: list[str]
    known_matches: int


def ranked_ids(ranked: Ranked, n: int) -> list[str]:
    """The first ``n`` ids of the ranked list (reranked head, then the fused order)."""
    head = [doc_id for doc_id, _ in ranked.head[:n]]
    if len(head) < n:
        seen = set(head)
        head += [doc_id for doc_id in ranked.fused.top_ids(n + len(ranked.head)) if doc_id not in seen][: n - len(head)]
    return head


def mmr_order(
    ids: Sequence[str],
    vectors: Mapping[str, Sequence[float]],
    diversity: float,
    relevance: Sequence[float] | None = None,
) -> list[str]:
    """``ids`` (best first) reordered by maximal marginal relevance; ``relevance`` in [0, 1], one per id
    (default: falling linearly with the position). A document without a vector is never similar to another
    (it keeps its place as relevance puts it)."""
    n = len(ids)
    if n <= 1 or diversity <= 0.0:
        return list(ids)
    dims = next((len(v) for v in vectors.values() if v), 0)
    matrix = np.zeros((n, max(dims, 1)), dtype=np.float32)
    for i, doc_id in enumerate(ids):
        v = vectors.get(doc_id)
        if v is not None and len(v) == dims:
            row = np.asarray(v, dtype=np.float32)
            norm = float(np.linalg.norm(row))
            if norm > 0:
                matrix[i] = row / norm
    similarity = matrix @ matrix.T
    rel = 1.0 - np.arange(n, dtype=np.float32) / n if relevance is None else np.asarray(relevance[:n], dtype=np.float32)
    chosen: list[int] = []
    closest = np.full(n, -np.inf, dtype=np.float32)  # each candidate's highest similarity to a chosen one
    left = np.ones(n, dtype=bool)
    for _ in range(n):
        penalty = np.where(np.isfinite(closest), closest, 0.0)
        score = (1.0 - diversity) * rel - diversity * penalty
        score[~left] = -np.inf
        best = int(np.argmax(score))  # (ties: the better ranked, argmax takes the first)
        chosen.append(best)
        left[best] = False
        closest = np.maximum(closest, similarity[best])
    return [ids[i] for i in chosen]


def _relevance(ranked: Ranked, ids: Sequence[str]) -> list[float]:
    """Each hit's score over the best one's: the rerank scores (min-max) for a reranked list, else fused."""
    if ranked.head:
        scores = dict(ranked.head)
        values = [scores.get(i) for i in ids]
        known = [v for v in values if v is not None]
        low, high = (min(known), max(known)) if known else (0.0, 1.0)
        span = (high - low) or 1.0
        return [(v - low) / span if v is not None else 0.0 for v in values]
    fused = [p[1] for p in ranked.fused.provenances_of(list(ids))]
    best = max(fused, default=0.0) or 1.0
    return [max(f / best, 0.0) for f in fused]


def group_value(hit: Mapping[str, Any] | None, field: str) -> str | None:
    """A leg hit's value of the grouping field (a doc value the leg brought), None without one."""
    values = ((hit or {}).get("fields") or {}).get(field)
    return str(values[0]) if values else None


def group_ids(order: Sequence[str], value_of: Callable[[str], str | None], per_group: int) -> list[Group]:
    """``order`` (best first) collapsed to groups, best first: each value keeps its first ``per_group`` ids
    and counts all of its ids (``known_matches``); an id without a value is a group of its own."""
    by_value: dict[str | None, list[str]] = {}
    counts: dict[str | None, int] = {}
    for doc_id in order:
        value = value_of(doc_id)
        if value is None:  # a group of its own, in its place in the order
            by_value.setdefault(f"\0{doc_id}", [doc_id])
            continue
        counts[value] = counts.get(value, 0) + 1
        kept = by_value.setdefault(value, [])
        if len(kept) < per_group:
            kept.append(doc_id)
    return [
        Group(None if key is not None and key.startswith("\0") else key, ids, counts.get(key, len(ids)))
        for key, ids in by_value.items()
    ]


def head_vector(hit: Mapping[str, Any]) -> Sequence[float] | None:
    """A leg hit's head vector: from ``_source`` or from its doc values (``fields``: one vector, as a list
    of floats or wrapped in a list, depending on the server version), None when it has none."""
    vector = hit.get("_source", {}).get("embedding")
    if vector is None:
        values = hit.get("fields", {}).get("embedding")
        vector = values[0] if values and isinstance(values[0], list) else values
    return vector or None


def arranged_page(
    plan: Plan, ranked: Ranked, hits: Mapping[str, Mapping[str, Any]]
) -> tuple[list[tuple[Provenance, float | None]], list[Group] | None]:
    """The page (provenance and rerank score of each hit shown) and, when grouping, its groups. ``hits``:
    each candidate's leg hit (its ``fields``: the grouping field's value; for diversity its head vector,
    :func:`head_vector`)."""
    wanted = len(ranked.fused) if plan.group_by is not None else max(MMR_WINDOW, plan.offset + plan.limit)
    order = ranked_ids(ranked, min(wanted, len(ranked.fused)))
    if plan.diversity > 0.0:
        head, rest = order[:MMR_WINDOW], order[MMR_WINDOW:]
        vectors = {i: head_vector(hits.get(i) or {}) for i in head}
        relevance = _relevance(ranked, head)
        order = mmr_order(head, {k: v for k, v in vectors.items() if v}, plan.diversity, relevance) + rest
    groups: list[Group] | None = None
    if plan.group_by is not None:
        field = plan.group_by
        all_groups = group_ids(order, lambda doc_id: group_value(hits.get(doc_id), field), plan.per_group)
        groups = all_groups[plan.offset : plan.offset + plan.limit]
        page_ids = [doc_id for g in groups for doc_id in g.ids]
    else:
        page_ids = order[plan.offset : plan.offset + plan.limit]
    scores = dict(ranked.head)
    provenances = ranked.fused.provenances_of(page_ids)
    return [(p, scores.get(p[0])) for p in provenances], groups
