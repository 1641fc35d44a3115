"""Ingest: validate, embed in batches while earlier batches are bulk-indexed, report every id. The write
stage (:meth:`Ingester.write`) also carries re-embedding into a new index version (``_reembed``)."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from elasticsearch.helpers import async_streaming_bulk
from pydantic import ValidationError

from embeddings import Embedder, InvalidEmbedding, Vector

from ._backend import Backend
from ._errors import InvalidDocument, InvalidQuery, SearchError
from ._indices import IndexManager
from ._mapping import valid_target
from ._models import Document, FailedDocument, IndexProgress, IndexReport
from ._requests import IngestRequest, ProgressCallback
from ._resilience import Resilience
from ._tenancy import require, stamp

__all__ = ["Ingester", "Record"]
_INDEXING_CONCURRENCY_QUEUE = 2  # embedded batches waiting for bulk: bounds memory, keeps both busy


@dataclass(frozen=True, slots=True)
class Record:
    """One document on its way into an index: its id, its ``_source`` (without the vector) and what the
    embedder reads (the title and the text: :meth:`Document.embedding_text`)."""

    id: str
    source: dict[str, Any]
    text: str


class Ingester:
    def __init__(self, backend: Backend, indices: IndexManager) -> None:
        self._b = backend
        self._indices = indices

    async def index_documents(self, request: IngestRequest) -> IndexReport:
        b = self._b
        b.check_open()
        started = time.perf_counter()
        documents, refresh, progress, index, tenant_id, strict = (
            request.documents,
            request.refresh,
            request.progress,
            request.index,
            request.tenant_id,
            request.strict,
        )
        if tenant_id is not None:
            require(tenant_id, "index_documents", multi_tenant=b.settings.multi_tenant)
        coerced, duplicates, invalid = _coerce_documents(documents)
        docs, invalid = self._assign_tenant(coerced, tenant_id, invalid)
        if invalid and strict:
            first = min(invalid, key=lambda f: f.position or 0)
            raise InvalidDocument(f"document #{first.position} is invalid: {first.detail}", position=first.position)
        if invalid:
            b.events.emit(
                30,
                "invalid documents skipped",
                "index.invalid_documents",
                {"index.invalid": len(invalid), "error.message": invalid[0].detail[:200]},
            )
        if self._indices.checked_index is None and index is None:
            await self._indices.ensure_index()
        if index is not None and "," in index:
            raise InvalidQuery("index_documents writes to one index or alias")
        target = valid_target(index) if index else b.settings.index
        records = [Record(doc.id, doc.to_source(), doc.embedding_text()) for doc in docs]
        indexed, failed = await self.write(records, target, progress=progress, already_failed=invalid)
        if refresh and indexed:
            await b.es_call(lambda: b.es.indices.refresh(index=target))
        report = IndexReport(
            index=target,
            indexed=indexed,
            failed=failed,
            duplicates=duplicates,
            seconds=time.perf_counter() - started,
        )
        b.events.emit(
            20 if report.ok else 30,
            "documents indexed",
            "index.documents",
            {
                "index.name": target,
                "index.submitted": len(records) + len(invalid),
                "index.indexed": len(indexed),
                "index.failed": len(failed),
                "event.duration": int(report.seconds * 1e9),
            },
        )
        return report

    async def write(
        self,
        records: Sequence[Record],
        target: str,
        *,
        progress: ProgressCallback | None = None,
        already_failed: Sequence[FailedDocument] = (),
        embedder: Embedder | None = None,
        stack: Resilience | None = None,
    ) -> tuple[list[str], list[FailedDocument]]:
        """Embed ``records`` in batches (with ``embedder`` through ``stack``, default the client's) while
        earlier batches are bulk-indexed into ``target``: every id ends up indexed or failed, and a record
        whose embedding failed is never written without its vector. ``already_failed`` are counted in the
        progress and the failures (documents refused before this stage)."""
        b = self._b
        total = len(records) + len(already_failed)
        indexed: list[str] = []
        failed: list[FailedDocument] = list(already_failed)
        embedded = len(already_failed)

        def report_progress() -> None:
            if progress is not None:
                progress(IndexProgress(total=total, embedded=embedded, indexed=len(indexed), failed=len(failed)))

        queue: asyncio.Queue[list[tuple[Record, Vector]] | None] = asyncio.Queue(_INDEXING_CONCURRENCY_QUEUE)

        async def produce() -> None:
            nonlocal embedded
            try:
                size = b.settings.embed_batch_size
                for start in range(0, len(records), size):
                    batch = records[start : start + size]
                    ok, bad = await self._embed_batch_isolating(batch, embedder, stack)
                    failed.extend(bad)
                    embedded += len(batch)
                    report_progress()
                    if ok:
                        await queue.put(ok)
            except asyncio.CancelledError:
                # Cancelled only once the consumer has stopped (below): nobody reads the end marker, and
                # waiting to put it into a full queue would hang the caller's cancellation for ever.
                raise
            except BaseException:
                await queue.put(None)  # the consumer is still reading: let it finish what was queued
                raise
            await queue.put(None)

        async def consume() -> None:
            while (item := await queue.get()) is not None:
                actions = [
                    {
                        "_op_type": "index",
                        "_index": target,
                        "_id": rec.id,
                        "_source": {**rec.source, "embedding": vector},
                    }
                    for rec, vector in item
                ]
                try:
                    results = await b.es_call(
                        functools.partial(self._bulk, actions),
                        deadline_s=b.settings.bulk_timeout_s * 2,
                        attempt_timeout_s=b.settings.bulk_timeout_s,
                    )
                except SearchError as exc:
                    # The whole batch failed after retries (or fast, breaker open): report it, go on.
                    for rec, _ in item:
                        failed.append(
                            FailedDocument(
                                id=rec.id,
                                reason=exc.reason if exc.reason != "error" else "transport_error",
                                detail=f"{type(exc).__name__}: {exc} (outcome unknown; re-sending is safe: "
                                "ids are explicit)",
                            )
                        )
                    report_progress()
                    continue
                for ok, info in results:
                    doc_id = str(info.get("_id"))
                    if ok:
                        indexed.append(doc_id)
                    else:
                        failed.append(_bulk_failure(doc_id, info))
                report_progress()

        producer = asyncio.create_task(produce(), name="storage-embed-producer")
        try:
            await consume()
        finally:
            if not producer.done():
                producer.cancel()
            await asyncio.gather(producer, return_exceptions=True)
        if not producer.cancelled() and (producer_exc := producer.exception()) is not None:
            raise producer_exc
        accounted = set(indexed) | {f.id for f in failed}
        for rec in records:  # defensive: every id is accounted for, whatever happened above
            if rec.id not in accounted:
                failed.append(FailedDocument(id=rec.id, reason="not_sent", detail="bulk indexing stopped"))
        report_progress()
        return indexed, failed

    def _assign_tenant(
        self, docs: list[tuple[int, Document]], tenant_id: str | None, invalid: list[FailedDocument]
    ) -> tuple[list[Document], list[FailedDocument]]:
        """``tenant_id=`` stamps every document; a document of another tenant is invalid. A multi-tenant
        client takes no document without a tenant."""
        multi = self._b.settings.multi_tenant
        out: list[Document] = []
        for position, doc in docs:
            try:
                tenant = stamp(tenant_id, doc.tenant_id, multi_tenant=multi, doc_id=doc.id)
            except InvalidQuery as exc:
                invalid.append(FailedDocument(id=doc.id, reason="invalid_document", detail=str(exc), position=position))
                continue
            out.append(doc if tenant == doc.tenant_id else doc.model_copy(update={"tenant_id": tenant}))
        return out, invalid

    async def _bulk(self, actions: list[dict[str, Any]]) -> list[tuple[bool, dict[str, Any]]]:
        """One attempt at bulk-indexing ``actions``: per-item 429s are retried inside (with backoff); a
        request-level error raises (and the resilience stack retries the batch: ids make it idempotent)."""
        s = self._b.settings
        es = self._b.es.options(request_timeout=s.bulk_timeout_s)
        out: list[tuple[bool, dict[str, Any]]] = []
        async for ok, item in async_streaming_bulk(
            es,
            actions,
            chunk_size=s.bulk_chunk_size,
            max_chunk_bytes=s.bulk_max_bytes,
            max_retries=3,
            initial_backoff=0.5,
            max_backoff=8,
            raise_on_error=False,
            raise_on_exception=True,
            yield_ok=True,
        ):
            out.append((ok, next(iter(item.values()))))
        return out

    async def _embed_batch_isolating(
        self, batch: Sequence[Record], embedder: Embedder | None, stack: Resilience | None
    ) -> tuple[list[tuple[Record, Vector]], list[FailedDocument]]:
        """Embed a batch; if the answer is invalid, embed one by one so only the bad documents fail."""
        embed = functools.partial(self._b.embed_documents, embedder=embedder, stack=stack)
        try:
            vectors = await embed([r.text for r in batch])
            return list(zip(batch, vectors, strict=True)), []
        except SearchError as exc:
            cause = exc.__cause__
            if not isinstance(cause, InvalidEmbedding) or len(batch) == 1:
                return [], [_embedding_failure(r.id, exc) for r in batch]
        ok: list[tuple[Record, Vector]] = []
        bad: list[FailedDocument] = []
        for rec in batch:
            try:
                ok.append((rec, (await embed([rec.text]))[0]))
            except SearchError as exc:
                bad.append(_embedding_failure(rec.id, exc))
        return ok, bad


def _coerce_documents(
    documents: Iterable[Document | Mapping[str, Any]],
) -> tuple[list[tuple[int, Document]], list[str], list[FailedDocument]]:
    """(position, document) for the valid ones (unique ids, the last occurrence wins), the duplicate ids,
    and an ``invalid_document`` failure for each invalid one (its id, or ``#<position>``)."""
    if isinstance(documents, Document | Mapping | str | bytes):
        raise InvalidDocument("index_documents takes an iterable of documents, not a single one")
    unique: dict[str, tuple[int, Document]] = {}
    duplicates: list[str] = []
    invalid: list[FailedDocument] = []
    for position, item in enumerate(documents):
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
                invalid.append(FailedDocument(id=doc_id, reason="invalid_document", detail=problems, position=position))
                continue
        else:
            invalid.append(
                FailedDocument(
                    id=f"#{position}",
                    reason="invalid_document",
                    detail=f"a {type(item).__name__}, not a Document or mapping",
                    position=position,
                )
            )
            continue
        if doc.id in unique:
            duplicates.append(doc.id)
            del unique[doc.id]  # the last occurrence wins, in its own position
        unique[doc.id] = (position, doc)
    return list(unique.values()), duplicates, invalid


def _embedding_failure(doc_id: str, exc: SearchError) -> FailedDocument:
    cause = exc.__cause__ or exc
    return FailedDocument(id=doc_id, reason="embedding_failed", detail=f"{type(cause).__name__}: {cause}")


def _bulk_failure(doc_id: str, info: Mapping[str, Any]) -> FailedDocument:
    status = info.get("status")
    error = info.get("error")
    if isinstance(error, Mapping):
        kind = str(error.get("type", "error"))
        detail = f"{kind}: {error.get('reason', '')}"
    else:
        kind, detail = "transport_error", str(error)
    if status == 429:
        reason = "rejected"
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
