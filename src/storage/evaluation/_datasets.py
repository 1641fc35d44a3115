"""Judged collections in BEIR layout: ``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``. Reads files.

:func:`load_beir` reads a whole collection (the documents too: ``hybrid-search eval`` can index them);
:func:`load_judgments` only the judged queries (and where the corpus is, if there is one). Also the JSONL
readers ``hybrid-search ingest`` uses (a line that is not a JSON object is reported with its number).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._errors import ConfigurationError
from .._types.models import METADATA_KEY, Document

__all__ = [
    "BeirDataset",
    "Judgments",
    "beir_document",
    "load_beir",
    "load_judgments",
    "read_jsonl_documents",
    "read_qrels",
    "read_queries",
]


@dataclass(frozen=True)
class BeirDataset:
    name: str
    documents: list[Document]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]


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


def beir_document(record: dict[str, Any], kept: list[str] | None = None) -> dict[str, Any]:
    """A BEIR corpus record (``_id``, ``title``, ``text``, optional fields) as Document fields. A field the
    document model does not have is kept in ``metadata`` (as text) when it is a string, number, boolean or a
    list of them, and its name appended to ``kept``; anything else is left for the validation to report."""
    out = {k: v for k, v in record.items() if k in Document.model_fields and k != "id"}
    out["id"] = str(record.get("_id") or record.get("id") or "")
    out["title"] = record.get("title") or ""
    out["text"] = record.get("text") or ""
    extra = {k: v for k, v in record.items() if k not in Document.model_fields and k not in ("_id", "id")}
    if extra:
        metadata = dict(out.get("metadata") or {})
        for key, value in extra.items():
            if METADATA_KEY.fullmatch(key) and key not in metadata and (text := _as_metadata(value)) is not None:
                metadata[key] = text
                if kept is not None and key not in kept:
                    kept.append(key)
            else:
                out[key] = value  # (validation reports it, with the record's line)
        out["metadata"] = metadata
    return out


def _as_metadata(value: Any) -> str | list[str] | None:
    if isinstance(value, str | int | float | bool) and value is not None:
        return str(value).lower() if isinstance(value, bool) else str(value)
    if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
        return [str(v) for v in value]
    return None


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
