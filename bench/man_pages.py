"""A collection of real long documents with judgments: the Linux manual's system-call and library pages
(Debian's ``manpages`` and ``manpages-dev``, sections 2 and 3), BEIR layout, for the long-document benches.

Each page is rendered to text (``groff -mandoc -Tutf8``); its NAME section is taken out of the text and
gives the query: the description after the dash ("open, openat, creat - open and possibly create a file"
asks "open and possibly create a file"). The page is the relevant document (grade 1), and so is every other
page with the same description (a known-item search: one topic per document, as in real long texts, where
joined abstracts hold many). The title is the page's names ("open, openat, creat"). Pages that only include
another (``.so``) and pages whose text repeats another's are left out. ``--queries`` of them are sampled
(seeded) from every page with a description; every page is a document.

    .venv/bin/python bench/man_pages.py            # writes .cache/long/manpages (needs groff, the pages)
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import random
import re
import subprocess
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from storage.evaluation import load_beir

ROOT = Path(__file__).resolve().parents[1]
MAN = Path("/usr/share/man")
SECTIONS = ("man2", "man3")
OUT = ROOT / ".cache" / "long" / "manpages"
SEED = 11


def render(path: Path) -> tuple[str, str, str] | None:
    """(names, description, text without its NAME section) of one page, None for an include or no NAME."""
    source = gzip.decompress(path.read_bytes()).decode("utf-8", "replace")
    if re.match(r"^\s*\.so\s", "\n".join(line for line in source.splitlines() if not line.startswith('.\\"'))):
        return None
    run = subprocess.run(
        ["groff", "-mandoc", "-Tutf8", "-P-cbou", "-rLL=400n", "-rHY=0"],
        input=source.encode(),
        capture_output=True,
        check=False,
    )
    lines = [line.rstrip() for line in run.stdout.decode("utf-8", "replace").splitlines()]
    sections: dict[str, list[str]] = {}
    current = ""
    for line in lines[1:-1]:  # (the header and footer lines)
        if line and not line[0].isspace():
            current = line.strip()
            sections.setdefault(current, [])
        elif current:
            sections[current].append(line.strip())
    name = " ".join(x for x in sections.pop("NAME", []) if x)
    names, dash, description = name.partition(" - ")
    if not dash or not description.strip():
        return None
    body = "\n\n".join(
        f"{title}\n" + re.sub(r"\n{3,}", "\n\n", "\n".join(text)).strip() for title, text in sections.items()
    )
    return names.strip(), description.strip(), body.strip()


def build(out: Path = OUT, queries: int = 300, seed: int = SEED) -> Path:
    if (out / "corpus.jsonl").is_file():
        return out
    paths = sorted(p for s in SECTIONS for p in (MAN / s).glob("*.gz"))
    with ProcessPoolExecutor(max_workers=2) as pool:
        pages = list(pool.map(render, paths, chunksize=32))
    seen: set[str] = set()
    docs: list[dict[str, str]] = []
    by_description: dict[str, list[str]] = {}
    for path, page in zip(paths, pages, strict=True):
        if page is None:
            continue
        names, description, text = page
        digest = hashlib.sha256(text.encode()).hexdigest()
        if digest in seen or len(text.split()) < 20:
            continue
        seen.add(digest)
        doc_id = path.name.removesuffix(".gz")
        docs.append({"_id": doc_id, "title": names, "text": text})
        by_description.setdefault(description.lower().rstrip("."), []).append(doc_id)
    asked = sorted(by_description)
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
        for n, description in enumerate(asked[:queries]):
            qid = f"q{n:04d}"
            qfh.write(json.dumps({"_id": qid, "text": description}) + "\n")
            for doc_id in by_description[description]:
                rfh.write(f"{qid}\t{doc_id}\t1\n")
    (out / "SOURCES.md").write_text(
        "Built by bench/man_pages.py from Debian's manpages and manpages-dev (Linux man-pages 6.03, sections 2 "
        "and 3; licences in /usr/share/doc/manpages*/copyright): each page rendered with groff, its NAME "
        f"section taken out and used as the query; {queries} queries sampled with seed {seed}.\n"
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queries", type=int, default=300)
    args = parser.parse_args()
    path = build(queries=args.queries)
    data = load_beir(path)
    words = sorted(len(d.text.split()) for d in data.documents)
    over = sum(w > 350 for w in words)
    print(
        f"{path}: {len(data.documents)} pages, median {words[len(words) // 2]} words, {over} over 350 words "
        f"({over / len(words):.0%}), {len(data.qrels)} judged queries"
    )


if __name__ == "__main__":
    main()
