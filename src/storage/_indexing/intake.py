"""The caller's documents on their way in, read as the ingest needs them: validated one at a time, in bounded
groups, so that a generator of a million documents is read with flat memory; and every document's outcome,
kept so that the report accounts for each one taken — written, failed, or not sent — whatever stops the
ingest (the input raising, Elasticsearch's breaker opening, the caller cancelling).

Pure: no I/O. :class:`Intake` reads; :class:`Embedded` is a record with its vectors, as it is written;
:class:`Outcomes` records; the ``*_failure`` functions say why a document failed, as its report says.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from embeddings import Vector

from .._dsl.tenancy import stamp
from .._errors import DependencyError, InvalidDocument, InvalidQuery, SearchError
from .._types.models import Document, FailedDocument, embedding_text
from ..passages import Agreement, Span

__all__ = [
    "Embedded",
    "Intake",
    "Outcomes",
    "Record",
    "bulk_failure",
    "embedding_failure",
    "too_many_passages",
    "transport_failure",
]


@dataclass(frozen=True, slots=True)
class Record:
    """One document on its way into an index: its id, its ``_source`` (without vectors or passages), its title
    and text (the embedder reads the title and the text: :func:`embedding_text`), and its position in the
    caller's input (-1: not from a caller's input, e.g. a reembed's copy)."""

    id: str
    source: dict[str, Any]
    title: str
    text: str
    position: int = -1

    @property
    def head(self) -> str:
        return embedding_text(self.title, self.text)


@dataclass(frozen=True, slots=True)
class Embedded:
    """A record with its vectors: the head's first, then each passage's (``spans``: their offsets in the
    text, the head's ``(0, head_end)`` first). Without passages, the head's only."""

    record: Record
    vectors: list[Vector]
    spans: tuple[Span, ...] = ()

    def source_for(
        self, *, with_text: bool, nested_heads: bool = False, agreement: Agreement | None = None
    ) -> dict[str, Any]:
        """The ``_source`` written; ``with_text``: the target indexes each passage's title and text (they are
        not stored: its ``_source`` excludes them). A document that fits the window (its head is its only
        span) gets no nested passages, unless ``nested_heads`` (an index built before mapping version 4,
        whose kNN leg reads nested vectors only). A long document's head passage keeps its offsets (and its
        text) but not its vector, which is ``embedding`` already: the kNN leg takes the better of the two.
        ``agreement``: the target records each long document's."""
        out = {**self.record.source, "embedding": self.vectors[0]}
        if agreement is not None and len(self.spans) > 1 and (found := agreement.of(self.vectors)) is not None:
            out["passage_agreement"] = found
        if len(self.spans) > 1 or (self.spans and nested_heads):
            out["passages"] = [{"start": s, "end": e} for s, e in self.spans]
            first = 0 if nested_heads else 1  # (the head's vector is ``embedding``'s: indexed once, unless the
            # kNN leg reads nested vectors only)
            for passage, vector in zip(out["passages"][first:], self.vectors[first:], strict=True):
                passage["vector"] = vector
            if with_text:  # (an index before mapping version 4 indexes each passage's title too)
                title, text = self.record.title, self.record.text
                for passage in out["passages"]:
                    passage["text"] = text[passage["start"] : passage["end"]]
                    if nested_heads:
                        passage["title"] = title
        return out


class Intake:
    """Reads ``documents`` (``Document`` objects or mappings) lazily: each valid one becomes a :class:`Record`
    (``tenant_id`` stamped), each invalid one a ``FailedDocument`` in :attr:`invalid` (reason
    ``invalid_document``, its position), an id read again goes into :attr:`duplicates` (its last occurrence
    wins). An error raised by the input itself ends the reading and is kept in :attr:`error`: what was read
    before it is still written and reported. ``strict``: the whole input is read and checked first, and the
    first invalid document raises :class:`InvalidDocument` before anything is sent (so a strict ingest holds
    its whole input in memory)."""

    def __init__(
        self,
        documents: Iterable[Document | Mapping[str, Any]],
        *,
        tenant_id: str | None,
        multi_tenant: bool,
        strict: bool,
    ) -> None:
        if isinstance(documents, Document | Mapping | str | bytes):
            raise InvalidDocument("index_documents takes an iterable of documents, not a single one")
        try:
            self._source: Iterator[Document | Mapping[str, Any]] = iter(documents)
        except TypeError:
            raise InvalidDocument(
                f"index_documents takes an iterable of documents, not a {type(documents).__name__}"
            ) from None
        self._tenant_id, self._multi_tenant = tenant_id, multi_tenant
        self.invalid: list[FailedDocument] = []
        #: Ids read more than once, in the order their repeats were read; and as a set.
        self.duplicates: list[str] = []
        self.repeats: set[str] = set()
        #: Documents read so far (valid or not).
        self.taken = 0
        self.error: BaseException | None = None
        self._seen: set[str] = set()
        self._read: list[Record] | None = None
        if strict:
            self._read = list(self._records())
            if self.error is not None:
                raise self.error
            if self.invalid:
                first = self.invalid[0]
                raise InvalidDocument(f"document #{first.position} is invalid: {first.detail}", position=first.position)

    def batches(self, size: int) -> Iterator[list[Record]]:
        """The records, ``size`` at a time (a repeated id within one batch: only its last occurrence)."""
        records = iter(self._read) if self._read is not None else self._records()
        batch: dict[str, Record] = {}
        for record in records:
            batch.pop(record.id, None)
            batch[record.id] = record
            if len(batch) >= size:
                yield list(batch.values())
                batch = {}
        if batch:
            yield list(batch.values())

    def _records(self) -> Iterator[Record]:
        while True:
            try:
                item = next(self._source)
            except StopIteration:
                return
            except Exception as exc:  # the caller's input failed: stop reading, keep what was read
                self.error = exc
                return
            position = self.taken
            self.taken += 1
            doc = self._document(item, position)
            if doc is None:
                continue
            if doc.id in self._seen:
                self.duplicates.append(doc.id)
                self.repeats.add(doc.id)
            self._seen.add(doc.id)
            yield Record(doc.id, doc.to_source(), doc.title, doc.text, position)

    def _document(self, item: object, position: int) -> Document | None:
        """``item`` as a valid, tenant-stamped Document, or None (its failure recorded)."""
        if isinstance(item, Document):
            doc = item
        elif isinstance(item, Mapping):
            try:
                doc = Document.model_validate(item)
            except ValidationError as exc:
                problems = "; ".join(
                    f"{'.'.join(str(p) for p in e['loc']) or 'document'}: {e['msg']}" for e in exc.errors()
                )
                raw_id = item.get("id")
                doc_id = raw_id if isinstance(raw_id, str) and raw_id else f"#{position}"
                self._refuse(doc_id, problems, position)
                return None
        else:
            self._refuse(f"#{position}", f"a {type(item).__name__}, not a Document or mapping", position)
            return None
        try:
            tenant = stamp(self._tenant_id, doc.tenant_id, multi_tenant=self._multi_tenant, doc_id=doc.id)
        except InvalidQuery as exc:
            self._refuse(doc.id, str(exc), position)
            return None
        return doc if tenant == doc.tenant_id else doc.model_copy(update={"tenant_id": tenant})

    def _refuse(self, doc_id: str, detail: str, position: int) -> None:
        self.invalid.append(FailedDocument(id=doc_id, reason="invalid_document", detail=detail, position=position))


@dataclass
class Outcomes:
    """Every document's outcome as the ingest learns it. An id given more than once is reported once, with
    the outcome of its last occurrence (:meth:`repeated` says which that is); a record taken and never
    resolved is ``not_sent`` (:meth:`settle`). Memory: the ids written (the report lists them), plus the
    records in flight."""

    indexed: list[str] = field(default_factory=list)
    failed: list[FailedDocument] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    #: Records taken and not yet resolved, by (id, position).
    in_flight: dict[tuple[str, int], Record] = field(default_factory=dict)
    #: For an id given more than once: the position of its last occurrence, and that occurrence's outcome.
    _last: dict[str, int] = field(default_factory=dict)
    _resolved: dict[str, tuple[bool, FailedDocument | None]] = field(default_factory=dict)

    def taken(self, records: Iterable[Record]) -> None:
        for r in records:
            self.in_flight[(r.id, r.position)] = r

    def repeated(self, records: Iterable[Record], repeats: set[str]) -> None:
        """``records`` were just read; those whose id is in ``repeats`` (read before) are now their id's last."""
        for r in records:
            if r.id in repeats:
                self._last[r.id] = r.position

    def ok(self, record: Record, *, unchanged: bool = False) -> None:
        self._resolve(record, None, unchanged)

    def fail(self, record: Record, failure: FailedDocument) -> None:
        self._resolve(record, failure, False)

    def _resolve(self, record: Record, failure: FailedDocument | None, unchanged: bool) -> None:
        self.in_flight.pop((record.id, record.position), None)
        last = self._last.get(record.id)
        if last is not None:
            if record.position >= last:
                self._resolved[record.id] = (unchanged, failure)
            return
        if failure is None:
            self.indexed.append(record.id)
            if unchanged:
                self.unchanged.append(record.id)
        else:
            self.failed.append(failure)

    def settle(self, why: str) -> None:
        """Everything still in flight is ``not_sent`` (``why``); an id given more than once gets the outcome
        of its last occurrence, once."""
        for record in list(self.in_flight.values()):
            self.fail(record, FailedDocument(id=record.id, reason="not_sent", detail=why))
        if not self._last:
            return
        repeated = set(self._last)
        self.indexed = [i for i in self.indexed if i not in repeated]
        self.unchanged = [i for i in self.unchanged if i not in repeated]
        self.failed = [f for f in self.failed if f.id not in repeated]
        for doc_id, (unchanged, failure) in self._resolved.items():
            if failure is None:
                self.indexed.append(doc_id)
                if unchanged:
                    self.unchanged.append(doc_id)
            else:
                self.failed.append(failure)
        self._last.clear()
        self._resolved.clear()


# -- why a document failed, as its report says -------------------------------------------------------


def transport_failure(doc_id: str, exc: SearchError) -> FailedDocument:
    if isinstance(exc, DependencyError) and exc.status == 413:  # (refused whole: nothing of it was written)
        return FailedDocument(
            id=doc_id,
            reason="too_large",
            status=413,
            detail="Elasticsearch refused the bulk request holding it as too large (over its "
            "http.max_content_length); nothing of it was written",
        )
    return FailedDocument(
        id=doc_id,
        reason=exc.reason if exc.reason != "error" else "transport_error",
        detail=f"{type(exc).__name__}: {exc} (outcome unknown; re-sending is safe: ids are explicit)",
    )


def embedding_failure(doc_id: str, exc: SearchError) -> FailedDocument:
    cause = exc.__cause__ or exc
    return FailedDocument(id=doc_id, reason="embedding_failed", detail=f"{type(cause).__name__}: {cause}")


def too_many_passages(doc_id: str, count: int, limit: int) -> FailedDocument:
    """A document cut into ``count`` passages, more than its index lets one document hold (Elasticsearch would
    refuse it after it was embedded): refused before."""
    return FailedDocument(
        id=doc_id,
        reason="too_large",
        detail=(
            f"{count} passages (the head's included), over the {limit} nested objects its index allows a document "
            "(index.mapping.nested_objects.limit): raise that setting on the index, or index the document in parts"
        ),
    )


def bulk_failure(doc_id: str, info: Mapping[str, Any]) -> FailedDocument:
    status = info.get("status")
    error = info.get("error")
    if isinstance(error, Mapping):
        kind = str(error.get("type", "error"))
        detail = f"{kind}: {error.get('reason', '')}"
    else:
        kind, detail = "transport_error", str(error)
    if status == 429:
        reason = "rejected"
    elif kind == "model_mismatch":
        reason = "model_mismatch"
    elif status == 409 and kind == "version_conflict_engine_exception":
        reason = "exists"  # (overwrite=False: the index holds this id)
    elif kind in (
        "mapper_parsing_exception",
        "document_parsing_exception",
        "strict_dynamic_mapping_exception",
    ):
        reason = "mapping_error"
    elif "exception" in info:
        reason = "transport_error"
    else:
        reason = kind
    return FailedDocument(id=doc_id, reason=reason, detail=detail, status=status if isinstance(status, int) else None)
