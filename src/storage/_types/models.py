"""The data that crosses the public API: documents in, and the reports of writes, reembeds and tuning.
Search results are in ``results``, answers in ``answers``."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from datetime import date, datetime
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

__all__ = [
    "Document",
    "FailedDocument",
    "IndexProgress",
    "IndexReport",
    "Leg",
    "ReembedReport",
    "SearchMode",
    "TuneReport",
    "TuneRow",
    "content_hash",
    "derive_id",
    "embedding_text",
]

Leg = Literal["bm25", "knn"]
SearchMode = Literal["bm25", "knn", "hybrid"]

#: A metadata key (the one rule for ``Document.metadata`` and for every ``metadata.<key>`` a filter, facet or
#: grouping names): ASCII letters, digits, ``_`` and ``-``, 1 to 64 of them.
METADATA_KEY = re.compile(r"[A-Za-z0-9_\-]{1,64}")


#: The most UTF-8 bytes one keyword value may have (Lucene's limit on an indexed term: ``ticker``, ``doc_type``,
#: ``source`` and ``tenant_id``; a metadata value over 1,024 characters is kept but not indexed).
KEYWORD_MAX_BYTES = 32_766
#: The most UTF-8 bytes a document id may have (Elasticsearch's limit).
ID_MAX_BYTES = 512


def lone_surrogate(value: object) -> bool:
    """Whether a string in ``value`` (lists, tuples and mappings walked, keys too) holds a lone surrogate: not
    Unicode text (what a broken decode leaves, e.g. ``json.loads('"\\ud800"')``), which no JSON encoder writes
    as UTF-8 and so no request can carry."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, Mapping):
        return any(lone_surrogate(k) or lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(lone_surrogate(v) for v in value)
    return False


def is_metadata_field(field: str) -> bool:
    """``metadata.<key>`` with a key :data:`METADATA_KEY` accepts."""
    return field.startswith("metadata.") and METADATA_KEY.fullmatch(field[9:]) is not None


def derive_id(title: str, text: str, source: str | None) -> str:
    """A stable id from the content: re-indexing the same document overwrites it instead of duplicating."""
    digest = hashlib.sha256("\x1f".join((source or "", title, text)).encode("utf-8", "surrogatepass")).hexdigest()
    return digest[:32]


def embedding_text(title: str, text: str) -> str:
    """What the embedder reads of a document: its title and its text, or whichever of them it has."""
    title, text = title.strip(), text.strip()
    return f"{title}\n{text}" if title and text else title or text


class Document(BaseModel):
    """One document to index: a ``title``, a ``text`` or both (catalogue records and headlines often have
    only a title). ``id`` is yours; if omitted it is derived from source, title and text.

    ``ticker``, ``doc_type``, ``source`` and ``tenant_id`` are keywords (matched exactly by filters), each at
    most 32,766 UTF-8 bytes (Lucene's limit on one term; a longer one is an invalid document, refused before it
    is embedded). A ``metadata`` value is a keyword too; one over 1,024 characters is stored and given back but
    not indexed: no filter matches it and no facet counts it. Every string (the payload's too) must be Unicode
    text: one holding a lone surrogate (what a broken decode leaves) is refused, as no request can carry it.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=False)

    id: str = Field(min_length=1, max_length=ID_MAX_BYTES)
    text: str = ""
    title: str = ""
    ticker: str | None = None
    doc_type: str | None = None
    source: str | None = None
    tenant_id: str | None = None
    published_at: datetime | date | None = None
    #: Free keyword metadata, searchable as filters ``metadata.<key>``. Each distinct key is three fields of the
    #: index's mapping (about 320 keys fit Elasticsearch's default 1,000-field limit): what is never filtered on
    #: belongs in ``payload``.
    metadata: dict[str, str | list[str]] = Field(default_factory=dict)
    #: Any JSON object, stored and returned exactly as given, never searched (a framework's own metadata:
    #: ``storage.integrations``). None: none.
    payload: dict[str, Any] | None = None

    @model_validator(mode="before")
    @classmethod
    def _derive_id(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and data.get("id") in (None, ""):
            data = dict(data)
            data["id"] = derive_id(str(data.get("title") or ""), str(data.get("text") or ""), data.get("source"))
        return data

    @field_validator("id", "text", "title", "ticker", "doc_type", "source", "tenant_id", "metadata", "payload")
    @classmethod
    def _unicode(cls, value: Any) -> Any:
        if lone_surrogate(value):
            raise ValueError("not valid Unicode (a lone surrogate, as a broken decode leaves): no request can carry it")
        return value

    @field_validator("id")
    @classmethod
    def _id_fits(cls, value: str) -> str:
        if len(value.encode("utf-8", "surrogatepass")) > ID_MAX_BYTES:
            raise ValueError(f"id is longer than Elasticsearch's {ID_MAX_BYTES}-byte limit")
        return value

    @field_validator("ticker", "doc_type", "source", "tenant_id")
    @classmethod
    def _keyword_fits(cls, value: str | None, info: ValidationInfo) -> str | None:
        # Lucene's own bound on one indexed term: Elasticsearch refuses the document (after it was embedded).
        if value is not None and len(value.encode("utf-8", "surrogatepass")) > KEYWORD_MAX_BYTES:
            raise ValueError(f"{info.field_name} is longer than Elasticsearch's {KEYWORD_MAX_BYTES:,}-byte limit")
        return value

    @model_validator(mode="after")
    def _has_content(self) -> Document:
        if not self.title.strip() and not self.text.strip():
            raise ValueError("a document needs a title or a text (both are blank)")
        return self

    @field_validator("metadata")
    @classmethod
    def _metadata_keys(cls, value: dict[str, str | list[str]]) -> dict[str, str | list[str]]:
        for key in value:
            if not METADATA_KEY.fullmatch(key):
                raise ValueError(f"metadata key {key!r} must match {METADATA_KEY.pattern}")
        return value

    def embedding_text(self) -> str:
        """What the embedder sees: the title and the text, or whichever of them the document has."""
        return embedding_text(self.title, self.text)

    def to_source(self) -> dict[str, Any]:
        """The ``_source`` stored in Elasticsearch (without the vector)."""
        return self.model_dump(mode="json", exclude={"id"}, exclude_none=True)


def stored_document(doc_id: str, source: Mapping[str, Any]) -> Document:
    """A stored ``_source`` as the :class:`Document` it was indexed from: its fields only (not what the index
    adds: passages, the content hash). One another program wrote that is not a valid Document (say, with
    neither a title nor a text) comes back as stored, unvalidated, rather than refused: reading never fails
    on what is already in the index."""
    fields = {k: v for k, v in source.items() if k in Document.model_fields and k != "id"}
    try:
        return Document(**fields, id=doc_id)
    except ValidationError:
        return Document.model_construct(**fields, id=doc_id)


def content_hash(source: Mapping[str, Any]) -> str:
    """A document's content (its stored fields, without vectors or an earlier hash), as a short digest: a
    document indexed again with the same content is recognised and neither embedded nor written again."""
    kept = {k: v for k, v in source.items() if k not in ("embedding", "passages", "content_hash")}
    return hashlib.sha256(json.dumps(kept, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:32]


class FailedDocument(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    #: A machine tag: ``invalid_document``, ``embedding_failed``, ``mapping_error``, ``rejected`` (429 after
    #: retries), ``too_large`` (a 413: the request holding it was over the server's size limit; or more
    #: passages than its index lets a document hold, refused before it is embedded), ``transport_error``...
    reason: str
    detail: str = ""
    status: int | None = None
    #: ``invalid_document`` only: the document's 0-based position in what was submitted (its ``id`` is
    #: ``#<position>`` when it had no usable one).
    position: int | None = None


class IndexReport(BaseModel):
    """Outcome of :meth:`SearchClient.index_documents`: every submitted id is in exactly one list."""

    model_config = ConfigDict(frozen=True)

    index: str
    indexed: list[str]
    failed: list[FailedDocument]
    #: Ids given more than once in one call: indexed once (the last occurrence, in its position, wins).
    duplicates: list[str] = Field(default_factory=list)
    #: Of ``indexed``: documents the index already held with the same content, so they were neither embedded
    #: nor written again (a re-run of an interrupted ingest embeds only what is missing).
    unchanged: list[str] = Field(default_factory=list)
    seconds: float = 0.0
    #: The call ran as a bulk load: the index's refresh was off while it wrote, then restored (and the index
    #: merged, when asked or large: ``index_documents(bulk_load=...)``).
    bulk_load: bool = False

    @property
    def ok(self) -> bool:
        return not self.failed

    @property
    def failed_ids(self) -> list[str]:
        return [f.id for f in self.failed]


class TuneRow(BaseModel):
    """One fusion setting's nDCG@10 over the judged queries, and its paired comparison with the current
    setting (the gain, its 95 % bootstrap interval, the randomization test's p-value)."""

    model_config = ConfigDict(frozen=True)

    setting: dict[str, Any]
    label: str
    ndcg: float
    gain: float = 0.0
    low: float = 0.0
    high: float = 0.0
    p_value: float = 1.0


class TuneReport(BaseModel):
    """Outcome of :func:`storage.evaluation.tune`: what the judged queries say about the index's fusion setting."""

    model_config = ConfigDict(frozen=True)

    dataset: str
    index: str
    #: Judged queries used (those with a judged document in the index), and those left out.
    queries: int
    queries_left_out: int = 0
    judged_documents: int = 0
    #: Judged documents the index does not hold (or not for the tenant): counted, never silently ignored.
    judged_documents_missing: int = 0
    grid_size: int
    folds: int
    #: The legs retrieved once per query; then every setting fused in-process.
    retrieval_seconds: float
    fusion_seconds: float
    #: The setting searches use now (call arguments aside), and whether it is the one stored with the index.
    current: TuneRow
    current_stored: bool = False
    bm25_ndcg: float
    knn_ndcg: float
    #: The estimate of choosing by judgments: each fold's setting chosen on the other folds, scored on its own
    #: queries; its gain over the current setting, interval and p-value. What a new query can expect.
    cross_validated: TuneRow
    #: What the rule picks on all the judged queries: the grid's best setting if it beats the current one
    #: significantly, else the current one (what ``change`` recommends); and the grid's best rows by nDCG@10.
    best: TuneRow
    table: list[TuneRow]
    decision: Literal["change", "keep"]
    reason: str
    #: The setting to use (``decision == "change"``), as stored with the index.
    recommended: dict[str, Any] | None = None
    warnings: list[str] = Field(default_factory=list)
    #: Stored with the index (``apply=True`` and a significant change).
    applied: bool = False


class IndexProgress(BaseModel):
    """Where an ingest is: documents in all, how many are embedded (every vector of theirs), indexed and
    failed so far, and the vectors embedded so far (a document's head and each of its passages: a long
    document is many). Counts (``IndexReport`` holds the ids)."""

    model_config = ConfigDict(frozen=True)

    total: int
    embedded_count: int
    indexed_count: int
    failed_count: int
    vector_count: int = 0


class ReembedReport(BaseModel):
    """Outcome of :meth:`SearchClient.reembed`: a new index version built with another model, and whether
    the alias was moved to it."""

    model_config = ConfigDict(frozen=True)

    alias: str
    #: The version read (what the alias pointed at), and the one written.
    source: str
    target: str | None
    previous_model: str | None
    model: str
    #: Documents in the source when the run ended.
    documents: int
    #: Written by this run; already in the target from an interrupted run (resumed, not embedded again).
    embedded: int = 0
    resumed: int = 0
    #: Documents gone from the source while the run read it, removed from the target too.
    removed: int = 0
    #: Documents that could not be embedded or written: reported, never dropped silently. Any of them keeps
    #: the alias where it was (run again to retry just these).
    failed: list[FailedDocument] = Field(default_factory=list)
    #: The alias now points at ``target`` (and ``deleted_old``: the versions it pointed at were deleted).
    promoted: bool = False
    deleted_old: bool = False
    #: Why the alias was not moved, when it was not.
    reason: str | None = None
    seconds: float = 0.0
