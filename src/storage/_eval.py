"""Retrieval quality on a BEIR-format folder (corpus.jsonl, queries.jsonl, qrels/test.tsv).

Metrics come from ``ir-measures`` (the ``eval`` extra), not hand-written code. Used by
``hybrid-search eval`` and ``bench/quality.py``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._errors import ConfigurationError
from ._fusion import FusionMethod
from ._models import Document, SearchMode

if TYPE_CHECKING:
    from ._client import SearchClient

__all__ = ["BeirDataset", "ModeScore", "evaluate", "load_beir", "read_jsonl_documents", "read_qrels", "read_queries"]


@dataclass(frozen=True)
class BeirDataset:
    name: str
    documents: list[Document]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]


@dataclass(frozen=True)
class ModeScore:
    mode: str
    fusion: str | None
    ndcg_at_10: float
    recall_at_100: float
    ms_per_query: float
    parameters: dict[str, Any] = field(default_factory=dict)


def read_jsonl_documents(path: Path) -> Iterator[tuple[int, dict[str, Any] | None, str | None]]:
    """(line number, BEIR-style record or None, error or None) for each non-empty line."""
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                yield number, None, f"line {number}: not JSON ({exc.msg})"
                continue
            if not isinstance(record, dict):
                yield number, None, f"line {number}: not a JSON object"
                continue
            yield number, record, None


def beir_document(record: dict[str, Any]) -> dict[str, Any]:
    """A BEIR corpus record (``_id``, ``title``, ``text``, optional fields) as Document fields."""
    out = {k: v for k, v in record.items() if k in Document.model_fields and k != "id"}
    out["id"] = str(record.get("_id") or record.get("id") or "")
    out["title"] = record.get("title") or ""
    out["text"] = record.get("text") or ""
    return out


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """A BEIR qrels TSV (a header line, then ``query-id corpus-id score``): query -> document -> grade."""
    qrels: dict[str, dict[str, int]] = {}
    for line in path.read_text(encoding="utf-8").splitlines()[1:]:
        if line.strip():
            qid, did, score = line.split("\t")[:3]
            qrels.setdefault(qid, {})[did] = int(score)
    return qrels


def read_queries(path: Path, wanted: Collection[str]) -> dict[str, str]:
    """The texts of the ``wanted`` queries of a BEIR ``queries.jsonl``."""
    return {
        str(rec["_id"]): str(rec["text"])
        for _, rec, _ in read_jsonl_documents(path)
        if rec is not None and str(rec.get("_id")) in wanted
    }


def load_beir(folder: Path, split: str = "test") -> BeirDataset:
    for needed in ("corpus.jsonl", "queries.jsonl", f"qrels/{split}.tsv"):
        if not (folder / needed).is_file():
            raise ConfigurationError(f"{folder} is not a BEIR folder: {needed} is missing")
    qrels = read_qrels(folder / "qrels" / f"{split}.tsv")
    docs = [
        Document.model_validate(beir_document(rec))
        for _, rec, _ in read_jsonl_documents(folder / "corpus.jsonl")
        if rec is not None
    ]
    return BeirDataset(folder.name, docs, read_queries(folder / "queries.jsonl", qrels), qrels)


async def evaluate(
    client: SearchClient,
    data: BeirDataset,
    *,
    modes: Sequence[tuple[SearchMode, FusionMethod | None]] = (("bm25", None), ("knn", None), ("hybrid", "rrf")),
    depth: int = 100,
    on_query: Callable[[], None] | None = None,
    options: Mapping[str, Any] | None = None,
) -> list[ModeScore]:
    """nDCG@10 and Recall@100 of each (mode, fusion) over the dataset's judged queries (index already loaded).

    ``options`` are passed to every search (e.g. ``{"rerank": True}``; then ``depth`` must fit within the
    rerank candidates)."""
    try:
        import ir_measures
        from ir_measures import R, nDCG
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ConfigurationError("evaluation needs the 'eval' extra: pip install 'hybrid-search-es[eval]'") from exc
    out: list[ModeScore] = []
    for mode, fusion in modes:
        run: dict[str, dict[str, float]] = {}
        t0 = time.perf_counter()
        for qid, text in data.queries.items():
            res = await client.search(
                text, mode=mode, fusion=fusion, limit=depth, window=depth, highlight=False, **(options or {})
            )
            # ir-measures ranks by score; the fused order is the truth, so scores follow the list position.
            run[qid] = {h.id: float(depth - i) for i, h in enumerate(res.hits)}
            if on_query is not None:
                on_query()
        scores = ir_measures.calc_aggregate([nDCG @ 10, R @ 100], data.qrels, run)
        out.append(
            ModeScore(
                mode=mode,
                fusion=fusion if mode == "hybrid" else None,
                ndcg_at_10=round(float(scores[nDCG @ 10]), 4),
                recall_at_100=round(float(scores[R @ 100]), 4),
                ms_per_query=round((time.perf_counter() - t0) / max(len(data.queries), 1) * 1000, 1),
                parameters=({"window": depth, "k": client.settings.rrf_k} if mode == "hybrid" else {"window": depth})
                | dict(options or {}),
            )
        )
    return out
