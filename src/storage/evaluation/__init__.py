"""Evaluation and tuning from judged queries, above the client (it uses the client's public API only).

::

    from storage.evaluation import evaluate, load_beir, tune

    scores = await evaluate(client, load_beir(folder))          # nDCG@10 / Recall@100 per leg and setting
    report = await tune(client, folder, apply=True)             # fit the fusion; stored if significant

- ``_datasets.py`` reads judged collections (BEIR layout) — files;
- ``_statistics.py`` scores rankings, fuses recorded legs, cross-validates and tests — pure;
- ``_runs.py`` retrieves each query's legs once through the client and runs the above — the I/O shell.
"""

from ._datasets import BeirDataset, Judgments, beir_document, load_beir, load_judgments, read_jsonl_documents
from ._runs import ModeScore, evaluate, evaluate_searches, retrieve_legs, tune
from ._statistics import MIN_QUERIES, default_grid, fuse_top, measure, ndcg_at_10

__all__ = [
    "MIN_QUERIES",
    "BeirDataset",
    "Judgments",
    "ModeScore",
    "beir_document",
    "default_grid",
    "evaluate",
    "evaluate_searches",
    "fuse_top",
    "load_beir",
    "load_judgments",
    "measure",
    "ndcg_at_10",
    "read_jsonl_documents",
    "retrieve_legs",
    "tune",
]
