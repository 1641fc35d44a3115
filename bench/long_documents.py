"""Long-document collections built reproducibly from the given short ones (BEIR layout, written to disk).

A given collection's documents are shuffled (a fixed seed) and joined ``per_report`` at a time into a
report: the first document's title is the report's title, and each section is ``title. text`` of one
document, sections separated by a blank line. A report is relevant to a query with the best grade of the
documents it contains, so a query's answer sits in one section of a long report — the case a document's
head vector cannot see.

    .venv/bin/python bench/long_documents.py            # writes .cache/long/scifact-x10, lisa-x10

The folders are what ``hybrid-search eval`` / ``storage.evaluation`` and ``bench/passages.py`` read.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from storage.evaluation import load_beir

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
SOURCES = {"scifact": SHARED / "beir" / "scifact", "lisa": SHARED / "ir" / "lisa"}
SEED = 7


def write_known_items(
    out: Path, docs: list[dict[str, str]], relevant: dict[str, list[str]], *, queries: int, seed: int, sources: str
) -> Path:
    """Write a known-item collection into ``out`` (BEIR layout): ``docs`` (``_id``, ``title``, ``text``), and
    ``queries`` of ``relevant``'s keys (each query's text -> the ids relevant to it, grade 1), sampled with
    ``seed``; ``sources`` is what SOURCES.md says of where it came from."""
    asked = sorted(relevant)
    random.Random(seed).shuffle(asked)
    out.mkdir(parents=True, exist_ok=True)
    (out / "qrels").mkdir(exist_ok=True)
    with (out / "corpus.jsonl").open("w", encoding="utf-8") as fh:
        for doc in docs:
            fh.write(json.dumps(doc) + "\n")
    with (
        (out / "queries.jsonl").open("w", encoding="utf-8") as qfh,
        (out / "qrels" / "test.tsv").open("w", encoding="utf-8") as rfh,
    ):
        rfh.write("query-id\tcorpus-id\tscore\n")
        for n, text in enumerate(asked[:queries]):
            qid = f"q{n:04d}"
            qfh.write(json.dumps({"_id": qid, "text": text}) + "\n")
            for doc_id in relevant[text]:
                rfh.write(f"{qid}\t{doc_id}\t1\n")
    (out / "SOURCES.md").write_text(f"{sources}; {queries} queries sampled with seed {seed}.\n")
    return out


def describe(path: Path, unit: str) -> str:
    """A line on a collection: its documents (``unit``), their median length, how many are long, its queries."""
    data = load_beir(path)
    words = sorted(len(d.text.split()) for d in data.documents)
    over = sum(w > 350 for w in words)
    return (
        f"{path}: {len(data.documents)} {unit}, median {words[len(words) // 2]} words, {over} over 350 words "
        f"({over / len(words):.0%}), {len(data.qrels)} judged queries"
    )


def build(source: Path, out: Path, *, per_report: int = 10, seed: int = SEED) -> Path:
    """Write the long version of ``source`` into ``out`` (if it is not there already) and return ``out``."""
    if (out / "corpus.jsonl").is_file():
        return out
    data = load_beir(source)
    docs = list(data.documents)
    random.Random(seed).shuffle(docs)
    report_of: dict[str, str] = {}
    out.mkdir(parents=True, exist_ok=True)
    (out / "qrels").mkdir(exist_ok=True)
    with (out / "corpus.jsonl").open("w", encoding="utf-8") as fh:
        for n, start in enumerate(range(0, len(docs), per_report)):
            part = docs[start : start + per_report]
            report_id = f"r{n:05d}"
            sections = [f"{d.title}. {d.text}".strip() if d.title else d.text for d in part]
            for d in part:
                report_of[d.id] = report_id
            record = {"_id": report_id, "title": part[0].title, "text": "\n\n".join(sections)}
            fh.write(json.dumps(record) + "\n")
    qrels: dict[str, dict[str, int]] = {}
    for qid, rels in data.qrels.items():
        for doc, grade in rels.items():
            if doc in report_of:
                report = report_of[doc]
                qrels.setdefault(qid, {})[report] = max(grade, qrels.get(qid, {}).get(report, 0))
    with (out / "qrels" / "test.tsv").open("w", encoding="utf-8") as fh:
        fh.write("query-id\tcorpus-id\tscore\n")
        for qid, rels in qrels.items():
            for report, grade in rels.items():
                fh.write(f"{qid}\t{report}\t{grade}\n")
    with (out / "queries.jsonl").open("w", encoding="utf-8") as fh:
        for qid, text in data.queries.items():
            fh.write(json.dumps({"_id": qid, "text": text}) + "\n")
    (out / "SOURCES.md").write_text(
        f"Built by bench/long_documents.py from {source.name}: documents shuffled (seed {seed}) and joined "
        f"{per_report} at a time; a report's grade for a query is the best of its documents'.\n"
    )
    return out


def long_collection(name: str, *, per_report: int = 10) -> Path:
    """The long version of a given collection (``scifact``, ``lisa``), built on first use."""
    return build(SOURCES[name], ROOT / ".cache" / "long" / f"{name}-x{per_report}", per_report=per_report)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--per-report", type=int, default=10)
    args = parser.parse_args()
    for name in SOURCES:
        path = long_collection(name, per_report=args.per_report)
        data = load_beir(path)
        words = sorted(len(d.text.split()) for d in data.documents)
        print(f"{path}: {len(data.documents)} reports, median {words[len(words) // 2]} words, {len(data.qrels)} judged")


if __name__ == "__main__":
    main()
