"""Commands that measure and fit: ``eval``, ``tune``."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from .._errors import ConfigurationError, IndexNotFound
from .._fusion.setting import FusionSetting
from .._types.models import TuneReport
from ..evaluation import load_beir
from ._app import app, err, open_client, out, parse_filters, progress_bar, run, settings, state

# -- eval ----------------------------------------------------------------------------------------------


@app.command("eval")
def eval_(
    folder: Annotated[Path, typer.Argument(help="A BEIR folder: corpus.jsonl, queries.jsonl, qrels/test.tsv.")],
    reindex: Annotated[
        bool, typer.Option(help="Index the corpus again even when the evaluation index already holds it.")
    ] = False,
    delete: Annotated[bool, typer.Option(help="Delete the evaluation index afterwards.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """nDCG@10 and Recall@100 of bm25, knn and hybrid (the fusion in force, and the other methods with its
    window and weights) on a BEIR-format folder. The corpus goes into its own index (``eval-<folder>``, or
    --index), indexed once and kept: the next run evaluates it as it is."""
    from ..evaluation import evaluate

    def go_check() -> None:
        try:
            import ir_measures  # noqa: F401 - checked before anything is indexed
        except ImportError:
            raise ConfigurationError(
                "evaluation needs the 'eval' extra: pip install 'hybrid-search-es[eval]'"
            ) from None

    async def go() -> int:
        from .._client import SearchClient

        go_check()
        data = load_beir(folder)
        index = state["index"] or f"eval-{folder.name.lower()}"
        async with SearchClient.from_settings(settings(index=index, leg_timeout_s=60)) as client:
            try:
                present = 0 if reindex else await client.documents.count()
            except IndexNotFound:
                present = 0
            indexed_s: float | None = None
            if present != len(data.documents):
                await client.indices.delete()
                await client.ensure_index()
                err.print(f"indexing {len(data.documents)} documents into {index}...", markup=False)
                report = await client.index_documents(data.documents, refresh=True)
                indexed_s = report.seconds
                if report.failed:
                    err.print(f"{len(report.failed)} documents failed to index", markup=False)
            else:
                err.print(f"evaluating {index} as it is ({present} documents; --reindex to rebuild)", markup=False)
            in_force, _ = await client.indices.fusion_in_force()
            others = [dataclasses.replace(in_force, method=m) for m in ("rrf", "linear_minmax", "dbsf")]
            fusions = [in_force, *(f for f in others if f != in_force)]
            try:
                scores = await evaluate(client, data, fusions=fusions)
            finally:
                if delete:
                    await client.indices.delete()
        if as_json:
            rows = [dataclasses.asdict(s) for s in scores]
            out.print(
                json.dumps({"dataset": data.name, "index": index, "queries": len(data.qrels), "results": rows}),
                markup=False,
            )
            return 0
        table = Table(title=f"{data.name}: {len(data.documents)} documents, {len(data.qrels)} judged queries")
        for col in ("mode", "fusion", "nDCG@10", "Recall@100"):
            table.add_column(col)
        for row in scores:
            label = "-" if row.mode != "hybrid" else FusionSetting.from_meta(row.parameters).label()
            table.add_row(row.mode, label, f"{row.ndcg_at_10:.4f}", f"{row.recall_at_100:.4f}")
        out.print(table)
        if indexed_s is not None:
            out.print(f"indexed in {indexed_s:.1f} s into {index} (kept: the next run reuses it)", markup=False)
        return 0

    run(go())


# -- tune ----------------------------------------------------------------------------------------------


@app.command()
def tune(
    folder: Annotated[Path, typer.Argument(help="BEIR layout: queries.jsonl, qrels/test.tsv (corpus.jsonl optional).")],
    apply: Annotated[
        bool, typer.Option(help="Store a significant winner with the index (every client uses it).")
    ] = False,
    folds: Annotated[int, typer.Option(help="Cross-validation folds over the queries.")] = 5,
    filter_: Annotated[
        list[str] | None, typer.Option("--filter", "-f", help="key=value applied to every retrieval (repeatable).")
    ] = None,
    tenant: Annotated[str | None, typer.Option(help="Tune on this tenant's documents.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the whole report as JSON.")] = False,
) -> None:
    """Fit the fusion (method, RRF k, per-leg weights, window) to judged queries: each query's legs retrieved
    once, every setting fused in-process, cross-validated, tested against the current setting. Exit 0."""
    from ..evaluation import load_judgments
    from ..evaluation import tune as run_tune

    async def go() -> int:
        judged = load_judgments(folder)
        async with open_client() as client:
            with progress_bar() as bar:
                task = bar.add_task("retrieving the legs", total=len(judged.queries))

                def progress(done: int, total: int) -> None:
                    bar.update(task, completed=done, total=total)

                report = await run_tune(
                    client,
                    judged,
                    folds=folds,
                    filters=parse_filters(filter_ or []) or None,
                    tenant_id=tenant,
                    apply=apply,
                    on_query=progress,
                )
        if as_json:
            out.print(report.model_dump_json(indent=2), markup=False)
            return 0
        print_tune_report(report)
        return 0

    run(go())


def print_tune_report(report: TuneReport) -> None:
    title = (
        f"{report.dataset} on {report.index}: {report.queries} judged queries, {report.grid_size} settings, "
        f"{report.folds}-fold cross-validation (legs retrieved in {report.retrieval_seconds:.1f} s, "
        f"fused in {report.fusion_seconds:.1f} s)"
    )
    table = Table(title=title, title_justify="left")
    for col in ("setting", "nDCG@10", "gain", "95 % interval", "p"):
        table.add_column(col, justify="left" if col == "setting" else "right")
    current = report.current
    table.add_row(f"current: {current.label}", f"{current.ndcg:.4f}", "-", "-", "-")
    table.add_row("BM25 alone", f"{report.bm25_ndcg:.4f}", f"{report.bm25_ndcg - current.ndcg:+.4f}", "", "")
    table.add_row("kNN alone", f"{report.knn_ndcg:.4f}", f"{report.knn_ndcg - current.ndcg:+.4f}", "", "")
    cv = report.cross_validated
    table.add_row(
        f"{cv.label}", f"{cv.ndcg:.4f}", f"{cv.gain:+.4f}", f"{cv.low:+.4f} .. {cv.high:+.4f}", f"{cv.p_value:.3f}"
    )
    for row in report.table:
        table.add_row(
            row.label, f"{row.ndcg:.4f}", f"{row.gain:+.4f}", f"{row.low:+.4f} .. {row.high:+.4f}", f"{row.p_value:.3f}"
        )
    out.print(table)
    for warning in report.warnings:
        out.print(f"warning: {warning}", markup=False)
    out.print(report.reason, markup=False)
    if report.recommended is not None:
        settings = report.recommended
        weights = settings["weights"]
        out.print(
            f"settings: ES_FUSION={settings['method']} ES_RRF_K={settings['k']} ES_WINDOW={settings['window']} "
            f"ES_BM25_WEIGHT={weights['bm25']:g} ES_KNN_WEIGHT={weights['knn']:g}"
            + ("   (stored with the index: every client of the alias uses it)" if report.applied else ""),
            markup=False,
        )
