"""A second collection of real long documents with judgments: Python packages' READMEs (the long description
in each package's metadata on PyPI), BEIR layout, for the long-document benches.

Each package's one-line **summary** is the query and its README the document ("Python HTTP for Humans."
asks for requests' README), as the Linux manual's NAME lines are in ``bench/man_pages.py``; every package
with the same summary is relevant too (a known-item search). The title is the package's name. The summary is
taken out of the text where the README repeats it, and markup that is not prose is dropped (images and
badges, HTML tags, link targets, reStructuredText directives); code and tables stay: a README is what it is.
A README is cut at ``MAX_WORDS`` words.

The packages are pinned: ``bench/readmes-packages.tsv`` lists each one's name, version and the sha256 of its
metadata file (PEP 658: the wheel's ``METADATA``, served beside the wheel on files.pythonhosted.org), checked
on every fetch (the file is read out of the wheel by HTTP ranges where the index serves no metadata file).
The list was chosen once (``--choose``) from the most downloaded packages: those whose
newest wheel has a README of at least ``MIN_WORDS`` words and a summary of at least three words.

    .venv/bin/python bench/readmes.py             # writes .cache/long/readmes (fetches ~1,000 small files)
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import re
import urllib.error
import urllib.request
import zipfile
from concurrent.futures import ThreadPoolExecutor
from email.parser import Parser
from pathlib import Path

from long_documents import describe, write_known_items

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ROOT / "bench" / "readmes-packages.tsv"
OUT = ROOT / ".cache" / "long" / "readmes"
RAW = ROOT / ".cache" / "long" / "readmes-metadata"
SIMPLE = "https://pypi.org/simple/{name}/"
SEED = 11
MIN_WORDS = 150
MAX_WORDS = 3000

_IMAGE = re.compile(r"\[?!\[[^\]]*\]\([^)]*\)(?:\]\([^)]*\))?")
_LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)")
_RST_LINK = re.compile(r"`([^`<]+?)\s*<[^>]+>`_+")
_TAG = re.compile(r"<[^>\n]+>")
_URL = re.compile(r"https?://\S+")
_DIRECTIVE = re.compile(r"^\s*(?:\.\. [|\w-].*|:(?:target|alt|width|height|align|scale):.*)$", re.MULTILINE)


def _get(url: str, accept: str | None = None) -> bytes:
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(request, timeout=60) as response:
        return bytes(response.read())


def wheel_url(name: str, version: str) -> str | None:
    """``name``'s first wheel of ``version`` (its wheels share one ``METADATA``), None if it has none."""
    index = json.loads(_get(SIMPLE.format(name=name), "application/vnd.pypi.simple.v1+json"))
    for f in index.get("files", ()):
        filename = f["filename"]
        if filename.endswith(".whl") and filename.split("-")[1] == version.replace("-", "_"):
            return str(f["url"])
    return None


class _Ranges(io.RawIOBase):
    """A remote file read by HTTP ranges, for ``zipfile`` to find one member without the whole wheel."""

    def __init__(self, url: str) -> None:
        self._url, self._at = url, 0
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=60) as response:
            self._size = int(response.headers["Content-Length"])

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._at = {io.SEEK_SET: 0, io.SEEK_CUR: self._at, io.SEEK_END: self._size}[whence] + offset
        return self._at

    def tell(self) -> int:
        return self._at

    def read(self, size: int = -1) -> bytes:
        end = self._size if size < 0 else min(self._at + size, self._size)
        if end <= self._at:
            return b""
        request = urllib.request.Request(self._url, headers={"Range": f"bytes={self._at}-{end - 1}"})
        with urllib.request.urlopen(request, timeout=60) as response:
            data = bytes(response.read())
        self._at += len(data)
        return data


def wheel_metadata(url: str) -> bytes:
    """A wheel's ``METADATA``: its PEP 658 file where the index serves one, else read out of the wheel."""
    try:
        return _get(f"{url}.metadata")
    except urllib.error.HTTPError as exc:
        if exc.code != 404:
            raise
    with zipfile.ZipFile(_Ranges(url)) as wheel:
        (member,) = [n for n in wheel.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
        return wheel.read(member)


def fetch(name: str, version: str, sha256: str | None) -> bytes | None:
    """The metadata file (cached in ``RAW``), checked against ``sha256`` when it is given."""
    path = RAW / f"{name}-{version}.metadata"
    if path.is_file():
        body = path.read_bytes()
    else:
        url = wheel_url(name, version)
        if url is None:
            return None
        body = wheel_metadata(url)
    if sha256 is not None and hashlib.sha256(body).hexdigest() != sha256:
        raise ValueError(f"{name} {version}: the metadata's sha256 is not the one pinned in {PACKAGES.name}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(body)
    return body


def read(body: bytes) -> tuple[str, str, str]:
    """(name, summary, README as text) of one metadata file."""
    message = Parser().parsestr(body.decode("utf-8", "replace"))
    readme = message.get_payload() or message.get("Description") or ""
    return str(message.get("Name", "")), " ".join(str(message.get("Summary", "")).split()), str(readme)


def clean(readme: str, summary: str) -> str:
    """The README's prose and code: images, badges, tags, link targets and directives dropped, the summary
    taken out, cut at ``MAX_WORDS`` words (whole lines)."""
    text = _IMAGE.sub(" ", readme)
    text = _LINK.sub(r"\1", text)
    text = _RST_LINK.sub(r"\1", text)
    text = _TAG.sub(" ", text)
    text = _URL.sub(" ", text)
    text = _DIRECTIVE.sub("", text)
    if summary:
        text = re.sub(re.escape(summary.rstrip(".")) + r"\.?", " ", text, flags=re.IGNORECASE)
    lines, words = [], 0
    for line in (re.sub(r"[ \t]+", " ", raw).strip() for raw in text.splitlines()):
        words += len(line.split())
        if words > MAX_WORDS:
            break
        lines.append(line)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def _key(summary: str) -> str:
    return summary.lower().rstrip(".").strip()


def choose(ranked: Path, count: int) -> None:
    """Write ``PACKAGES``: the first ``count`` packages of ``ranked`` (a tsv of name, version, month, rank,
    summary, the most downloaded first) whose wheel's README has ``MIN_WORDS`` words and whose summary three."""
    rows = [line.split("\t") for line in ranked.read_text(encoding="utf-8").splitlines()[1:]]
    ranks = sorted((int(r[3]), r[0], r[1]) for r in rows if len(r) > 4 and r[3].isdigit() and r[1])

    def one(row: tuple[int, str, str]) -> tuple[int, str, str, str] | None:
        _, name, version = row
        try:
            body = fetch(name, version, None)
        except (OSError, ValueError, zipfile.BadZipFile):
            return None
        if body is None:
            return None
        _, summary, readme = read(body)
        if len(summary.split()) < 3 or len(clean(readme, summary).split()) < MIN_WORDS:
            return None
        return row[0], name, version, hashlib.sha256(body).hexdigest()

    with ThreadPoolExecutor(max_workers=8) as pool:
        kept = [r for r in pool.map(one, ranks[: count * 2]) if r is not None][:count]
    PACKAGES.write_text(
        "name\tversion\tmetadata_sha256\n" + "".join(f"{n}\t{v}\t{h}\n" for _, n, v, h in kept), encoding="utf-8"
    )


def build(out: Path = OUT, queries: int = 300, seed: int = SEED) -> Path:
    if (out / "corpus.jsonl").is_file():
        return out
    pinned = [line.split("\t") for line in PACKAGES.read_text(encoding="utf-8").splitlines()[1:] if line]
    with ThreadPoolExecutor(max_workers=8) as pool:
        bodies = list(pool.map(lambda row: fetch(row[0], row[1], row[2]), pinned))
    docs: list[dict[str, str]] = []
    by_summary: dict[str, list[str]] = {}
    for (name, version, _), body in zip(pinned, bodies, strict=True):
        if body is None:
            raise ValueError(f"{name} {version}: no wheel metadata on PyPI")
        title, summary, readme = read(body)
        doc_id = f"{name}-{version}"
        docs.append({"_id": doc_id, "title": title, "text": clean(readme, summary)})
        by_summary.setdefault(_key(summary), []).append(doc_id)
    return write_known_items(
        out,
        docs,
        by_summary,
        queries=queries,
        seed=seed,
        sources="Built by bench/readmes.py from the metadata of the Python packages pinned in "
        "bench/readmes-packages.tsv (PyPI, the wheels' METADATA; each package's licence is in it): each README "
        f"cleaned of markup and cut at {MAX_WORDS} words, the package's summary taken out and used as the query",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--choose", type=Path, metavar="RANKED_TSV", help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, default=1000)
    args = parser.parse_args()
    if args.choose is not None:
        choose(args.choose, args.count)
    print(describe(build(queries=args.queries), "READMEs"))


if __name__ == "__main__":
    main()
