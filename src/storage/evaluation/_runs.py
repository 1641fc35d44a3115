"""The I/O shell of evaluation and tuning: judged queries in, scores (and a fusion setting) out. It uses the
client's public API only: ``leg_rankings()`` (each query's legs, through the search's plan, filters and
tenancy), ``indices.fusion_in_force()``, ``documents.exist()``, ``documents.count()``, ``indices.store_fusion()``.

**One evaluation path.** :func:`evaluate` and :func:`tune` retrieve each judged query's two legs **once**
and fuse them in-process with the client's own fusion (``storage._fusion.methods``) — the legs cut to a setting's
window are the legs a search with that window gets, so a setting's figure here is the figure of a search
with it, and ``evaluate`` and ``tune`` report the same number for the same index and setting. Searches that
cannot be replayed from recorded legs (the rerank stage, which calls a model per search) are measured
end to end by :func:`evaluate_searches`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .._dsl.filters import FilterInput
from .._errors import ConfigurationError, IndexNotFound
from .._fusion.methods import LegColumns
from .._fusion.setting import FusionSetting
from .._observability.log import event
from .._types.models import Document, TuneReport, TuneRow
from ._datasets import BeirDataset, Judgments, beir_document, load_judgments, read_jsonl_documents
from ._statistics import (
    MIN_QUERIES,
    Paired,
    cross_validate,
    default_grid,
    fold_of,
    fuse_top,
    leg_only,
    measure,
    ndcg_at_10,
    paired_test,
    score_matrix,
    switch_if_significant,
    unique,
)

if TYPE_CHECKING:
    from .._client import SearchClient

__all__ = ["ModeScore", "evaluate", "evaluate_searches", "retrieve_legs", "tune"]

#: Rows of the tuning report's table (the best settings by nDCG@10, each with its paired test).
TABLE_ROWS = 10
#: Each leg's depth when evaluating a leg alone (Recall@100 needs 100).
DEPTH = 100
#: Called with (queries done, queries in all) as the legs are retrieved.
OnQuery = Callable[[int, int], None]


@dataclass(frozen=True)
class ModeScore:
    """One row of an evaluation: a leg alone or a fusion setting, its nDCG@10 and Recall@100."""

    mode: str
    fusion: str | None
    ndcg_at_10: float
    recall_at_100: float
    ms_per_query: float
    parameters: dict[str, Any] = field(default_factory=dict)


async def retrieve_legs(
    client: SearchClient,
    queries: Mapping[str, str],
    window: int,
    *,
    filters: FilterInput = None,
    tenant_id: str | None = None,
    on_query: OnQuery | None = None,
) -> dict[str, dict[str, LegColumns]]:
    """Each query's BM25 and kNN lists (ids and scores, ``window`` deep), through ``client.leg_rankings()``: the
    same validation, filters and tenancy as a search. A failed leg raises (an evaluation on one leg would
    not say what it claims)."""
    legs: dict[str, dict[str, LegColumns]] = {}
    for n, (qid, text) in enumerate(queries.items(), start=1):
        found = await client.leg_rankings(text, window=window, filters=filters, tenant_id=tenant_id)
        legs[qid] = {leg: ([h.id for h in hits], [h.score for h in hits]) for leg, hits in found.items()}
        if on_query is not None:
            on_query(n, len(queries))
    return legs


async def evaluate(
    client: SearchClient,
    data: BeirDataset | Judgments,
    *,
    fusions: Sequence[FusionSetting] | None = None,
    depth: int = DEPTH,
    filters: FilterInput = None,
    tenant_id: str | None = None,
    on_query: OnQuery | None = None,
) -> list[ModeScore]:
    """nDCG@10 and Recall@100 of BM25 alone, kNN alone (each ``depth`` deep) and hybrid with each fusion
    setting (default: the one in force for the client's index) over the judged queries, on the index as it
    is. Each query's legs are retrieved once; see the module docstring."""
    in_force, _ = await client.indices.fusion_in_force()
    settings = list(fusions) if fusions else [in_force]
    window = max([depth, *(s.window for s in settings)])
    started = time.perf_counter()
    queries = {qid: data.queries[qid] for qid in sorted(data.qrels) if qid in data.queries}
    legs = await retrieve_legs(client, queries, window, filters=filters, tenant_id=tenant_id, on_query=on_query)
    ms = round((time.perf_counter() - started) / max(len(queries), 1) * 1000, 1)
    qrels = {q: data.qrels[q] for q in queries}
    out: list[ModeScore] = []
    for leg in ("bm25", "knn"):
        ranked = {qid: list(by_leg[leg][0][:depth]) for qid, by_leg in legs.items()}
        ndcg, recall = measure(qrels, ranked)
        out.append(ModeScore(leg, None, ndcg, recall, ms, {"window": depth}))
    for setting in settings:
        ranked = {qid: fuse_top(by_leg, setting, 2 * setting.window) for qid, by_leg in legs.items()}
        ndcg, recall = measure(qrels, ranked)
        out.append(ModeScore("hybrid", setting.method, ndcg, recall, ms, setting.to_meta()))
    return out


async def evaluate_searches(
    client: SearchClient,
    data: BeirDataset | Judgments,
    *,
    limit: int = 10,
    on_query: OnQuery | None = None,
    **options: Any,
) -> ModeScore:
    """nDCG@10 (and Recall@``limit``) of real searches (``client.search(query, limit=limit, **options)``),
    one per judged query: for what recorded legs cannot replay, such as the rerank stage."""
    run: dict[str, list[str]] = {}
    queries = {qid: data.queries[qid] for qid in sorted(data.qrels) if qid in data.queries}
    started = time.perf_counter()
    for n, (qid, text) in enumerate(queries.items(), start=1):
        res = await client.search(text, limit=limit, highlight=False, **options)
        run[qid] = res.ids
        if on_query is not None:
            on_query(n, len(queries))
    ms = round((time.perf_counter() - started) / max(len(queries), 1) * 1000, 1)
    ndcg, recall = measure({q: data.qrels[q] for q in queries}, run)
    mode = str(options.get("mode", "hybrid"))
    return ModeScore(mode, None, ndcg, recall, ms, {"limit": limit, **options})


async def tune(
    client: SearchClient,
    data: Judgments | Path | str,
    *,
    grid: Sequence[FusionSetting] | None = None,
    folds: int = 5,
    seed: int = 0,
    filters: FilterInput = None,
    tenant_id: str | None = None,
    apply: bool = False,
    alpha: float = 0.05,
    min_queries: int = MIN_QUERIES,
    on_query: Callable[[int, int], None] | None = None,
) -> TuneReport:
    """Choose the fusion setting for the client's index from judged queries (see the module docstring).

    The report gives the current setting's nDCG@10, each leg's alone, the best settings of the grid (each
    with its gain over the current one and a 95 % interval), and the **cross-validated** estimate of
    choosing by judgments (``folds``-fold over queries) with its paired test; ``decision`` is ``change`` only
    when that gain is significant (``alpha``) with at least ``min_queries`` judged queries. ``apply=True``
    then stores the setting with the index. ``filters`` and ``tenant_id`` apply to the retrieval as to a
    search. ``on_query(done, total)`` follows the retrieval.
    """
    judged = load_judgments(Path(data)) if isinstance(data, str | Path) else data
    grid = unique(grid if grid is not None else default_grid())
    if not grid:
        raise ConfigurationError("the grid is empty")
    if folds < 2:
        raise ConfigurationError("cross-validation needs at least 2 folds")
    count = await _documents(client, tenant_id)
    if count == 0:
        if judged.corpus is None:
            raise IndexNotFound(
                f"index {client.index!r} holds no documents and {judged.name} has no corpus.jsonl to index"
            )
        await _ingest(client, judged.corpus, tenant_id)
    current, sources = await client.indices.fusion_in_force()  # read now: what searches of the alias use
    grid = unique([current, *grid])  # row 0: the current setting
    coverage = await client.documents.exist(
        sorted({d for rels in judged.qrels.values() for d in rels}), tenant_id=tenant_id
    )
    usable = {q: rels for q, rels in judged.qrels.items() if any(d in coverage for d in rels)}
    warnings: list[str] = []
    if coverage_missing := sum(1 for rels in judged.qrels.values() for d in rels if d not in coverage):
        warnings.append(
            f"{coverage_missing} judged documents are not in the index (or not the tenant's); "
            f"{len(judged.qrels) - len(usable)} queries have no judged document in it and are left out"
        )
    started = time.perf_counter()
    window = max(s.window for s in grid)
    queries_text = {qid: judged.queries[qid] for qid in sorted(usable)}
    legs = await retrieve_legs(client, queries_text, window, filters=filters, tenant_id=tenant_id, on_query=on_query)
    retrieval_s = time.perf_counter() - started
    started = time.perf_counter()
    queries, matrix = score_matrix(grid, legs, usable)
    folds = min(folds, len(queries)) if queries else folds
    chooser = switch_if_significant(alpha, seed=seed)
    # (cross-validation needs two queries at least: one to choose on, one to score on)
    cv = cross_validate(matrix, fold_of(queries, folds, seed), prefer=0, choose=chooser) if len(queries) > 1 else None
    fusion_s = time.perf_counter() - started
    baseline = matrix[0] if queries else []
    means = matrix.mean(axis=1) if queries else [0.0] * len(grid)
    best = chooser(matrix, list(range(len(queries))), 0) if queries else 0  # the rule, on every query
    order = sorted(range(len(grid)), key=lambda row: -float(means[row]))[:TABLE_ROWS]
    rows = [_row(grid[r], matrix[r] if queries else [], baseline, seed) for r in order]
    cv_test = paired_test(cv.held_out, baseline, seed=seed) if cv is not None else Paired(0.0, 0.0, 0.0, 1.0, 0)
    per_leg = {leg: ndcg_at_10(usable, leg_only(legs, leg)) for leg in ("bm25", "knn")}
    leg_means = {leg: _mean([scores[q] for q in queries]) for leg, scores in per_leg.items()}
    decision, reason = _decide(len(queries), min_queries, cv_test, alpha, grid[best], current)
    if len(queries) < min_queries:
        warnings.append(
            f"only {len(queries)} judged queries: at least {min_queries} are needed for a choice to be trusted "
            "(nothing is applied)"
        )
    report = TuneReport(
        dataset=judged.name,
        index=client.index,
        queries=len(queries),
        queries_left_out=len(judged.qrels) - len(usable),
        judged_documents=sum(len(r) for r in judged.qrels.values()),
        judged_documents_missing=coverage_missing,
        grid_size=len(grid),
        folds=folds,
        retrieval_seconds=round(retrieval_s, 3),
        fusion_seconds=round(fusion_s, 3),
        current=_row(current, baseline, baseline, seed),
        current_stored=all(source == "index" for source in sources.values()),
        bm25_ndcg=leg_means["bm25"],
        knn_ndcg=leg_means["knn"],
        cross_validated=TuneRow(
            setting={"chosen_per_fold": [grid[row].to_meta() for row in (cv.chosen if cv else [])]},
            label="tuned (chosen on the other folds)",
            ndcg=round(cv.mean, 4) if cv else 0.0,
            gain=round(cv_test.gain, 4),
            low=round(cv_test.low, 4),
            high=round(cv_test.high, 4),
            p_value=round(cv_test.p_value, 4),
        ),
        best=_row(grid[best], matrix[best] if queries else [], baseline, seed),
        table=rows,
        decision=decision,
        reason=reason,
        recommended=grid[best].to_meta() if decision == "change" else None,
        warnings=warnings,
    )
    if apply:
        report = await _apply(client, report, grid[best], judged.name)
    event(
        20,
        "fusion tuned",
        "index.tune",
        {
            "index.alias": client.index,
            "tune.queries": report.queries,
            "tune.decision": report.decision,
            "tune.applied": report.applied,
            "tune.cv_gain": report.cross_validated.gain,
        },
    )
    return report


def _mean(values: Sequence[float]) -> float:
    return round(sum(values) / len(values), 4) if values else 0.0


def _row(setting: FusionSetting, scores: Sequence[float], baseline: Sequence[float], seed: int) -> TuneRow:
    test = paired_test(scores, baseline, seed=seed, resamples=2000)
    return TuneRow(
        setting=setting.to_meta(),
        label=setting.label(),
        ndcg=_mean(list(scores)),
        gain=round(test.gain, 4),
        low=round(test.low, 4),
        high=round(test.high, 4),
        p_value=round(test.p_value, 4),
    )


def _decide(
    queries: int, min_queries: int, cv: Paired, alpha: float, best: FusionSetting, current: FusionSetting
) -> tuple[Literal["change", "keep"], str]:
    """``change`` only with enough queries, a setting that beats the current one significantly on them all,
    and a cross-validated gain that is significant too (the rule helps queries that did not choose)."""
    if queries < min_queries:
        return "keep", f"keep the current setting: {queries} judged queries are too few to choose on (< {min_queries})"
    held_out = (
        f"on held-out queries the rule gains {cv.gain:+.4f} nDCG@10 (95 % interval {cv.low:+.4f} to "
        f"{cv.high:+.4f}, p = {cv.p_value:.3f})"
    )
    if best == current:
        return "keep", f"keep the current setting: no setting of the grid beats it significantly ({held_out})"
    if not cv.significant(alpha) or cv.gain <= 0:
        return (
            "keep",
            f"keep the current setting: {best.label()} wins on these queries, but {held_out}: not significant",
        )
    return "change", f"use {best.label()}: {held_out}"


async def _apply(client: SearchClient, report: TuneReport, setting: FusionSetting, dataset: str) -> TuneReport:
    if report.decision != "change":
        return report.model_copy(
            update={"applied": False, "warnings": [*report.warnings, "not applied: " + report.reason]}
        )
    tuned = {
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "dataset": dataset,
        "queries": report.queries,
        "cv_ndcg_at_10": report.cross_validated.ndcg,
        "current_ndcg_at_10": report.current.ndcg,
    }
    await client.indices.store_fusion(setting, **tuned)
    return report.model_copy(update={"applied": True})


async def _documents(client: SearchClient, tenant_id: str | None) -> int:
    try:
        return await client.documents.count(tenant_id=tenant_id)
    except IndexNotFound:
        return 0


async def _ingest(client: SearchClient, corpus: Path, tenant_id: str | None) -> None:
    await client.ensure_index()
    docs = [
        Document.model_validate(beir_document(rec)) for _, rec, _ in read_jsonl_documents(corpus) if rec is not None
    ]
    report = await client.index_documents(docs, refresh=True, tenant_id=tenant_id)
    if report.failed:
        raise ConfigurationError(f"{len(report.failed)} documents of {corpus} could not be indexed; see ingest")
