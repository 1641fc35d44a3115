"""A collection of real long documents with judgments: the Linux manual's system-call and library pages
(Debian's ``manpages`` and ``manpages-dev``, sections 2 and 3: their own pages only, whatever else the machine
has installed), BEIR layout, for the long-document benches.

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
import re
import subprocess
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from long_documents import describe, write_known_items

ROOT = Path(__file__).resolve().parents[1]
MAN = Path("/usr/share/man")
SECTIONS = ("man2", "man3")
PACKAGES = ("manpages", "manpages-dev")
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


def pages_of(packages: tuple[str, ...]) -> list[Path]:
    """The pages of sections 2 and 3 that ``packages`` install (``dpkg -L``): not every page the machine has,
    which other packages (libraries' ``-dev`` packages, Perl modules) add to and which differs by machine."""
    listed = subprocess.run(["dpkg", "-L", *packages], capture_output=True, text=True, check=True).stdout
    return sorted(
        path
        for line in listed.splitlines()
        if (path := Path(line)).parent.name in SECTIONS and path.parent.parent == MAN and path.suffix == ".gz"
    )


def build(out: Path = OUT, queries: int = 300, seed: int = SEED) -> Path:
    if (out / "corpus.jsonl").is_file():
        return out
    paths = pages_of(PACKAGES)
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
    return write_known_items(
        out,
        docs,
        by_description,
        queries=queries,
        seed=seed,
        sources="Built by bench/man_pages.py from Debian's manpages and manpages-dev (Linux man-pages 6.03, "
        "sections 2 and 3, their own pages; licences in /usr/share/doc/manpages*/copyright): each page rendered "
        "with groff, its NAME section taken out and used as the query",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queries", type=int, default=300)
    args = parser.parse_args()
    print(describe(build(queries=args.queries), "pages"))


if __name__ == "__main__":
    main()
