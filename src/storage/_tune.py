"""``tune()``: choose the fusion for an index from judged queries, and (on request) store it with the index.

The shell around ``_tuning`` (pure): load the judgments (BEIR layout: ``queries.jsonl`` and
``qrels/<split>.tsv``; ``corpus.jsonl`` only when the index is empty), check which judged documents the
index holds, retrieve each query's two legs **once** through the search pipeline (same validation,
filters and tenancy as a search), fuse every setting of the grid in-process, cross-validate, test, and
decide. ``apply=True`` stores a significant winner in the index's ``_meta.fusion``, which every client of
the alias then uses when neither the call nor its settings say otherwise.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ._errors import ConfigurationError, IndexNotFound
from ._eval import beir_document, read_jsonl_documents, read_qrels, read_queries
from ._filters import FilterInput
from ._fusion import LegColumns
from ._logging import event
from ._models import Document, TuneReport, TuneRow
from ._pipeline import SearchRequest
from ._pipeline.fuse import hit_columns, raise_if_failed
from ._pipeline.plan import fusion_in_force
from ._tuning import (
    MIN_QUERIES,
    FusionSetting,
    Paired,
    cross_validate,
    default_grid,
    fold_of,
    leg_only,
    ndcg_at_10,
    paired_test,
    score_matrix,
    switch_if_significant,
    unique,
)

if TYPE_CHECKING:
    from ._client import SearchClient

__all__ = ["Judgments", "load_judgments", "tune"]

#: Rows of the report's table (the best settings by nDCG@10, each with its paired test).
TABLE_ROWS = 10


@dataclass(frozen=True)
class Judgments:
    """Judged queries: their text and relevance judgments, and the corpus file if the folder has one."""

    name: str
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    corpus: Path | None = None


def load_judgments(folder: Path, split: str = "test") -> Judgments:
    """``queries.jsonl`` and ``qrels/<split>.tsv`` from a BEIR-layout folder (``corpus.jsonl`` optional)."""
    for needed in ("queries.jsonl", f"qrels/{split}.tsv"):
        if not (folder / needed).is_file():
            raise ConfigurationError(f"{folder} has no {needed}: tuning needs judged queries (BEIR layout)")
    # Only the relevant judgments count for nDCG; a query with none is not a judged query.
    judged = read_qrels(folder / "qrels" / f"{split}.tsv")
    qrels = {q: {d: g for d, g in docs.items() if g > 0} for q, docs in judged.items()}
    qrels = {q: docs for q, docs in qrels.items() if docs}
    queries = read_queries(folder / "queries.jsonl", qrels)
    corpus = folder / "corpus.jsonl"
    return Judgments(folder.name, queries, {q: qrels[q] for q in queries}, corpus if corpus.is_file() else None)


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
    b = client._backend
    b.check_open()
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
    stored = await b.stored_fusion(client.index)  # read now: what searches of the alias use
    current, _ = fusion_in_force(b.settings, stored)
    grid = unique([current, *grid])  # row 0: the current setting
    coverage = await _coverage(client, judged.qrels, tenant_id)
    usable = {q: rels for q, rels in judged.qrels.items() if any(d in coverage for d in rels)}
    warnings: list[str] = []
    if coverage_missing := sum(1 for rels in judged.qrels.values() for d in rels if d not in coverage):
        warnings.append(
            f"{coverage_missing} judged documents are not in the index (or not the tenant's); "
            f"{len(judged.qrels) - len(usable)} queries have no judged document in it and are left out"
        )
    started = time.perf_counter()
    window = max(s.window for s in grid)
    legs: dict[str, dict[str, LegColumns]] = {}
    for n, qid in enumerate(sorted(usable), start=1):
        legs[qid] = await _legs(client, judged.queries[qid], window, filters, tenant_id)
        if on_query is not None:
            on_query(n, len(usable))
    retrieval_s = time.perf_counter() - started
    started = time.perf_counter()
    queries, matrix = score_matrix(grid, legs, usable)
    folds = min(folds, len(queries)) if queries else folds
    chooser = switch_if_significant(alpha, seed=seed)
    cv = cross_validate(matrix, fold_of(queries, folds, seed), prefer=0, choose=chooser) if queries else None
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
        current_stored=stored is not None and stored == current,
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
    await client._indices.store_fusion({**setting.to_meta(), "tuned": tuned})
    return report.model_copy(update={"applied": True})


async def _documents(client: SearchClient, tenant_id: str | None) -> int:
    try:
        return await client.count(tenant_id=tenant_id)
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


async def _coverage(client: SearchClient, qrels: Mapping[str, Mapping[str, int]], tenant_id: str | None) -> set[str]:
    """The judged documents the index holds (the tenant's, if one is given)."""
    ids = sorted({d for rels in qrels.values() for d in rels})
    found: set[str] = set()
    b = client._backend

    async def present(chunk: list[str]) -> set[str]:
        clauses: list[dict[str, Any]] = [{"ids": {"values": chunk}}]
        if tenant_id is not None:
            clauses.append({"term": {"tenant_id": tenant_id}})
        query = {"bool": {"filter": clauses}}
        resp = await b.es_call(lambda: b.es.search(index=client.index, query=query, size=len(chunk), source=False))
        return {str(h["_id"]) for h in resp.body["hits"]["hits"]}

    for start in range(0, len(ids), 1000):
        found |= await present(ids[start : start + 1000])
    return found


async def _legs(
    client: SearchClient, text: str, window: int, filters: FilterInput, tenant_id: str | None
) -> dict[str, LegColumns]:
    """One query's BM25 and kNN lists (ids and scores, ``window`` deep), through the search pipeline: the
    same validation, filters and tenancy as a search. A failed leg fails the tuning (it would tune on one
    leg)."""
    pipeline = client._pipeline
    request = SearchRequest(query=text, window=window, limit=1, filters=filters, tenant_id=tenant_id, strict=True)
    plan = pipeline.plan(request)
    outcomes, _ = await pipeline.retriever.retrieve(plan)
    raise_if_failed(plan, outcomes)
    columns = {leg: hit_columns(o.hits) for leg, o in outcomes.items()}
    return {leg: (ids, list(scores)) for leg, (ids, scores) in columns.items()}


def report_json(report: TuneReport) -> str:
    return json.dumps(report.model_dump(mode="json"), indent=2)
