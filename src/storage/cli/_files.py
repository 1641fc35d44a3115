"""What ``hybrid-search ingest FOLDER`` makes of a folder of files: one document per file it can read.

- kinds read: plain text (``.txt``), Markdown (``.md``, ``.markdown``), reStructuredText (``.rst``), HTML
  (``.html``, ``.htm``: the text without markup, scripts or styles, by Beautiful Soup) and PDF (``.pdf``: each
  page's text, by pypdf); every other file is skipped and counted by kind, never read as something else;
- ``id``: the path relative to the folder (re-ingesting the folder replaces, never duplicates);
- ``title``: the HTML ``<title>`` (else its first ``<h1>``), a PDF's own title (else its first line), else the
  first heading of the text (``# Heading``, or a line underlined with ``===``) or its first line;
- ``source``: the folder the file is in, relative to the ingested one (its own name for files at its top),
  so a ``source`` facet or ``one_per: source`` groups a documentation tree by section;
- ``doc_type``: the kind (``text``, ``markdown``, ``rst``, ``html``, ``pdf``).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from .._types.models import Document

__all__ = ["KINDS", "FolderRead", "heading", "read_folder", "read_folder_file"]

#: Suffix -> doc_type.
KINDS = {
    ".txt": "text",
    ".md": "markdown",
    ".markdown": "markdown",
    ".rst": "rst",
    ".html": "html",
    ".htm": "html",
    ".pdf": "pdf",
}
_TITLE_CHARS = 200
_BLOCKS = [
    "p", "div", "section", "article", "header", "footer", "nav", "aside", "main", "li", "dt", "dd", "tr", "pre",
    "blockquote", "table", "ul", "ol", "dl", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "figure", "figcaption",
]  # fmt: skip
_MD_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$")
_UNDERLINE = re.compile(r"^\s*([=\-~^*#+])\1{2,}\s*$")


@dataclass
class FolderRead:
    """The documents read, where each came from, the files that could not be read (with why) and the
    files skipped as kinds this does not read (suffix -> count)."""

    documents: list[Document] = field(default_factory=list)
    where: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)


def read_folder(folder: Path) -> FolderRead:
    """Every file under ``folder`` (hidden ones aside) of a kind in :data:`KINDS`, one document each."""
    read = FolderRead()
    for file in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = file.relative_to(folder)
        if any(part.startswith(".") for part in rel.parts):  # .git, .DS_Store, editors' files
            continue
        if file.suffix.lower() not in KINDS:
            read.skipped[file.suffix.lower() or "(no suffix)"] += 1
            continue
        _add(read, file, rel, str(rel.parent) if rel.parent != Path(".") else folder.resolve().name)
    return read


def read_folder_file(file: Path) -> FolderRead:
    """One file of a kind in :data:`KINDS` (its name is its id, its folder's name its source)."""
    read = FolderRead()
    _add(read, file, Path(file.name), file.resolve().parent.name)
    return read


def _add(read: FolderRead, file: Path, rel: Path, source: str) -> None:
    kind = KINDS[file.suffix.lower()]
    try:
        title, text = _read(file, kind)
    except Exception as exc:  # a parser's own error for a broken file: that file only
        read.problems.append(f"{rel}: cannot be read as {kind} ({type(exc).__name__}: {exc})"[:300])
        return
    text = text.strip()
    if not text and not title:
        read.problems.append(f"{rel}: no text in it")
        return
    read.documents.append(Document(id=str(rel), title=title[:_TITLE_CHARS], text=text, source=source, doc_type=kind))
    read.where.append(str(rel))


def _read(file: Path, kind: str) -> tuple[str, str]:
    if kind == "html":
        return _html(file.read_bytes())
    if kind == "pdf":
        return _pdf(file)
    text = file.read_text(encoding="utf-8", errors="replace")
    return heading(text), text


def heading(text: str) -> str:
    """The first heading of a text (Markdown ``# Heading``, or a line underlined with ``===``/``---``),
    else its first non-empty line."""
    lines = text.splitlines()
    first = ""
    for n, line in enumerate(lines[:200]):
        if (m := _MD_HEADING.match(line)) is not None:
            return m.group(1).strip()
        if line.strip() and n + 1 < len(lines) and _UNDERLINE.match(lines[n + 1]) and not _UNDERLINE.match(line):
            return line.strip()
        if not first and line.strip() and not _UNDERLINE.match(line):
            first = line.strip()
    return first


def _html(raw: bytes) -> tuple[str, str]:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(raw, "html.parser")
    for tag in soup(["script", "style", "noscript", "template"]):
        tag.decompose()
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    if not title and (h1 := soup.find("h1")) is not None:
        title = h1.get_text(" ", strip=True)
    if soup.title:
        soup.title.decompose()
    # A line break after each block (a paragraph, a heading, a list item, a row...), none inside a line: an
    # inline element (<code>, <a>, <b>) stays part of its sentence ("call os.cpu_count() to").
    for tag in soup.find_all(_BLOCKS):
        tag.append("\n")
    for code in soup.select("pre > code"):  # several listings in one <pre> (a page's JS and TS variants)
        code.append("\n")
    for br in soup.find_all("br"):
        br.replace_with("\n")
    body = soup.body or soup
    lines = (re.sub(r"[ \t\r\f\v]+", " ", line).strip() for line in body.get_text().split("\n"))
    return title, "\n".join(line for line in lines if line)


def _pdf(file: Path) -> tuple[str, str]:
    from pypdf import PdfReader

    reader = PdfReader(file)
    text = "\n\n".join((page.extract_text() or "").strip() for page in reader.pages)
    meta_title = reader.metadata.title if reader.metadata is not None else None
    return (str(meta_title).strip() if meta_title else heading(text)), text
