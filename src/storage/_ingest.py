"""Ingest: validate, embed in batches while earlier batches are bulk-indexed, report every id. The write
stage (:meth:`Ingester.write`) also carries re-embedding into a new index version (``_reembed``).

Into an index read in passages (``storage.passages``), every document gets its head's vector and, when its
text goes on past the model's window, one per passage (cut by the model's own tokenizer): all of them are
embedded before it is written, and a document one of whose vectors failed is reported and never written
with some of its passages missing."""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import functools
import itertools
import time
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from elasticsearch.helpers import async_streaming_bulk
from pydantic import ValidationError

from embeddings import Embedder, InvalidEmbedding, ProviderError, Vector, Windowed

from ._backend import Backend
from ._changes import held_while_blocked
from ._errors import CircuitOpen, InvalidDocument, InvalidQuery, ModelMismatch, SearchError
from ._errors_map import map_provider_error
from ._indices import IndexManager
from ._mapping import valid_target
from ._models import Document, FailedDocument, IndexProgress, IndexReport, content_hash, embedding_text
from ._requests import IngestRequest, ProgressCallback
from ._resilience import Resilience
from ._tenancy import require, stamp
from .passages import PassagePlan, PassageSetting, Span, plan_passages

__all__ = ["Ingester", "Record"]
_INDEXING_CONCURRENCY_QUEUE = 2  # embedded batches waiting for bulk: bounds memory, keeps both busy


@dataclass(frozen=True, slots=True)
class Record:
    """One document on its way into an index: its id, its ``_source`` (without vectors or passages), and its
    title and text (the embedder reads the title and the text: :func:`embedding_text`)."""

    id: str
    source: dict[str, Any]
    title: str
    text: str

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

    def source_for(self, *, with_text: bool, nested_heads: bool = False) -> dict[str, Any]:
        """The ``_source`` written; ``with_text``: the target indexes each passage's title and text (they are
        not stored: its ``_source`` excludes them). A document that fits the window (its head is its only
        span) gets no nested passages, unless ``nested_heads`` (an index built before mapping version 4,
        whose kNN leg reads nested vectors only)."""
        out = {**self.record.source, "embedding": self.vectors[0]}
        if len(self.spans) > 1 or (self.spans and nested_heads):
            out["passages"] = [
                {"start": s, "end": e, "vector": v} for (s, e), v in zip(self.spans, self.vectors, strict=True)
            ]
            if with_text:  # (an index before mapping version 4 indexes each passage's title too)
                title, text = self.record.title, self.record.text
                for passage in out["passages"]:
                    passage["text"] = text[passage["start"] : passage["end"]]
                    if nested_heads:
                        passage["title"] = title
        return out


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
        records = [Record(doc.id, doc.to_source(), doc.title, doc.text) for doc in docs]
        indexed, failed, unchanged = await self.write(records, target, progress=progress, already_failed=invalid)
        if refresh and indexed and not any(f.reason == "not_sent" for f in failed):  # (not_sent: ES is down)
            await b.es_call(lambda: b.es.indices.refresh(index=target))
        report = IndexReport(
            index=target,
            indexed=indexed,
            failed=failed,
            duplicates=duplicates,
            unchanged=unchanged,
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
    ) -> tuple[list[str], list[FailedDocument], list[str]]:
        """Embed ``records`` in batches (with ``embedder`` through ``stack``, default the client's) while
        earlier batches are bulk-indexed into ``target``: every id ends up indexed or failed, and a record
        whose embedding failed is never written without its vectors. Into a target read in passages, every
        record gets them (cut as the target recorded). Into a target that records content hashes, a record
        it holds already with the same content is neither embedded nor written (returned as indexed, and
        apart as unchanged). ``already_failed`` are counted in the progress and the failures (documents
        refused before this stage). Returns (indexed, failed, unchanged)."""
        b = self._b
        info = await b.metadata.read_target(target)
        model = (embedder or b.embedder).model_id
        if info.model_id is not None and info.model_id != model:
            raise ModelMismatch(_mismatch(target, info.model_id, model))
        setting = info.passage_setting
        with_text, nested_heads = info.writes_passage_text, info.writes_nested_heads
        if info.content_hash:  # the target records each document's content: unchanged ones are skipped
            records = [_hashed(r) for r in records]
            look = bool(records) and await self._indices.count_all(target) > 0
        else:
            look = False
        unchanged: list[str] = []
        total = len(records) + len(already_failed)
        indexed: list[str] = []
        failed: list[FailedDocument] = list(already_failed)
        embedded = len(already_failed)
        vectors = 0

        def report_progress(embedding: int = 0) -> None:
            """``embedding``: records of the batch being embedded whose vectors are all done."""
            if progress is not None:
                progress(
                    IndexProgress(
                        total=total,
                        embedded=embedded + embedding,
                        indexed=len(indexed),
                        failed=len(failed),
                        vectors=vectors,
                    )
                )

        def embedding_step(records_done: int, vectors_done: int) -> None:
            nonlocal vectors
            vectors += vectors_done
            report_progress(records_done)

        queue: asyncio.Queue[list[Embedded] | None] = asyncio.Queue(_INDEXING_CONCURRENCY_QUEUE)

        async def produce() -> None:
            nonlocal embedded
            try:
                size = b.settings.embed_batch_size
                for start in range(0, len(records), size):
                    batch = records[start : start + size]
                    if look:
                        held = await self._indices.content_hashes(target, [r.id for r in batch])
                        same = [r for r in batch if held.get(r.id) == r.source["content_hash"]]
                        if same:
                            unchanged.extend(r.id for r in same)
                            indexed.extend(r.id for r in same)
                            batch = [r for r in batch if held.get(r.id) != r.source["content_hash"]]
                    if batch:
                        groups = self._embed_groups(batch, embedder, stack, setting, embedding_step)
                        async with contextlib.aclosing(groups):
                            async for ok, bad, done in groups:  # written as each group is embedded
                                failed.extend(bad)
                                report_progress(done)
                                if ok:
                                    await queue.put(ok)
                    embedded += len(records[start : start + size])
                    report_progress()
            except asyncio.CancelledError:
                # Cancelled only once the consumer has stopped (below): nobody reads the end marker, and
                # waiting to put it into a full queue would hang the caller's cancellation for ever.
                raise
            except BaseException:
                await queue.put(None)  # the consumer is still reading: let it finish what was queued
                raise
            await queue.put(None)

        stopped: list[SearchError] = []

        async def fits(model: str) -> dict[str, Any] | None:
            """Before held writes are sent again: the alias may have moved to an index of another model."""
            now = (await b.metadata.read_target(target)).model_id
            if now is None or now == model:
                return None
            return {"status": 409, "error": {"type": "model_mismatch", "reason": _mismatch(target, now, model)}}

        async def consume() -> None:
            while (item := await queue.get()) is not None:
                actions = [
                    {
                        "_op_type": "index",
                        "_index": target,
                        "_id": e.record.id,
                        "_source": e.source_for(with_text=with_text, nested_heads=nested_heads),
                    }
                    for e in item
                ]
                if not nested_heads and any(len(e.spans) > 1 for e in item):
                    b.metadata.saw_long_documents()  # (before the write: a search right after must read them)
                try:
                    results = await held_while_blocked(
                        self._send_bulk, actions, lambda a: str(a["_id"]), still_fits=functools.partial(fits, model)
                    )
                except SearchError as exc:
                    # The whole batch failed after retries (or fast, breaker open): report it, go on — unless
                    # Elasticsearch's breaker is open (it failed again and again): then the rest would only be
                    # embedded in vain; stop, and report the rest as not sent.
                    if isinstance(exc, CircuitOpen):
                        stopped.append(exc)
                    for e in item:
                        failed.append(
                            FailedDocument(
                                id=e.record.id,
                                reason=exc.reason if exc.reason != "error" else "transport_error",
                                detail=f"{type(exc).__name__}: {exc} (outcome unknown; re-sending is safe: "
                                "ids are explicit)",
                            )
                        )
                    report_progress()
                    if stopped:
                        return
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
                why = f"{type(stopped[0]).__name__}: {stopped[0]}" if stopped else "bulk indexing stopped"
                failed.append(FailedDocument(id=rec.id, reason="not_sent", detail=why))
        report_progress()
        return indexed, failed, unchanged

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

    async def _send_bulk(self, actions: list[dict[str, Any]]) -> list[tuple[bool, dict[str, Any]]]:
        """One bulk write of ``actions`` through Elasticsearch's resilience stack."""
        s = self._b.settings
        return await self._b.es_call(
            functools.partial(self._bulk, actions), deadline_s=s.bulk_timeout_s * 2, attempt_timeout_s=s.bulk_timeout_s
        )

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

    async def _embed_groups(
        self,
        batch: Sequence[Record],
        embedder: Embedder | None,
        stack: Resilience | None,
        setting: PassageSetting | None,
        step: Callable[[int, int], None] | None = None,
    ) -> AsyncGenerator[tuple[list[Embedded], list[FailedDocument], int], None]:
        """Embed a batch (every record's head, and its passages when ``setting``) in groups of records of about
        ``embed_batch_size`` texts (a record with more is a group of its own), yielding each group as it is
        done — ``(embedded, failed, records of the batch done so far)`` — so that its writes start while the
        next group is embedded (a batch of long documents is many groups). The texts go to the embedder in
        calls of at most ``embed_batch_size``; after each, ``step(records of the batch whose vectors are all
        done, vectors the call embedded)``. If an answer is invalid, the group is embedded record by record
        so only the bad documents fail."""
        try:
            plans = await self._plans(batch, embedder, setting)
        except ProviderError as exc:  # the model could not be loaded to count its tokens
            error = map_provider_error(exc, "embeddings")
            yield [], [_embedding_failure(r.id, error) for r in batch], len(batch)
            return
        texts = [_texts(r, plan) for r, plan in zip(batch, plans, strict=True)]
        size = max(self._b.settings.embed_batch_size, 1)
        first = 0
        while first < len(batch):
            last, count = first + 1, len(texts[first])
            while last < len(batch) and count + len(texts[last]) <= size:
                count += len(texts[last])
                last += 1
            ok, bad = await self._embed_isolating(
                batch[first:last], plans[first:last], texts[first:last], embedder, stack, step, first
            )
            yield ok, bad, last
            first = last

    async def _embed_isolating(
        self,
        records: Sequence[Record],
        plans: Sequence[PassagePlan | None],
        texts: Sequence[list[str]],
        embedder: Embedder | None,
        stack: Resilience | None,
        step: Callable[[int, int], None] | None,
        done_before: int,
    ) -> tuple[list[Embedded], list[FailedDocument]]:
        """One group's vectors (see :meth:`_embed_groups`)."""
        embed = functools.partial(self._b.embed_documents, embedder=embedder, stack=stack)
        flat = [t for group in texts for t in group]
        ends = list(itertools.accumulate(len(group) for group in texts))
        size = max(self._b.settings.embed_batch_size, 1)
        try:
            vectors: list[Vector] = []
            for start in range(0, len(flat), size):
                vectors += await embed(flat[start : start + size])
                if step is not None:
                    step(done_before + bisect.bisect_right(ends, len(vectors)), min(size, len(flat) - start))
            return _regroup(records, plans, texts, vectors), []
        except SearchError as exc:
            cause = exc.__cause__
            if not isinstance(cause, InvalidEmbedding) or len(records) == 1:
                return [], [_embedding_failure(r.id, exc) for r in records]
        ok: list[Embedded] = []
        bad: list[FailedDocument] = []
        for rec, plan, group in zip(records, plans, texts, strict=True):
            try:
                ok += _regroup([rec], [plan], [group], await embed(group))
            except SearchError as exc:
                bad.append(_embedding_failure(rec.id, exc))
        return ok, bad

    async def _plans(
        self, batch: Sequence[Record], embedder: Embedder | None, setting: PassageSetting | None
    ) -> list[PassagePlan | None]:
        """Where each record is cut (None: a target without passages), by the model's own tokens."""
        emb = embedder or self._b.embedder
        window = emb.window_tokens if isinstance(emb, Windowed) else None
        if setting is None or window is None or not isinstance(emb, Windowed):
            return [None] * len(batch)
        spans = await emb.token_spans([r.text for r in batch] + [r.title for r in batch])
        overhead = emb.overhead_tokens
        return [
            plan_passages(
                r.text,
                spans[n],
                title_tokens=len(spans[len(batch) + n]),
                window=window,
                overhead=overhead,
                setting=setting,
            )
            for n, r in enumerate(batch)
        ]


def _hashed(record: Record) -> Record:
    """The record with its content hash in its source."""
    source = {**record.source, "content_hash": content_hash(record.source)}
    return Record(record.id, source, record.title, record.text)


def _texts(record: Record, plan: PassagePlan | None) -> list[str]:
    """What the embedder reads of a record: its head, then each passage with the title in front."""
    if plan is None:
        return [record.head]
    return [record.head, *(embedding_text(record.title, record.text[s:e]) for s, e in plan.passages)]


def _regroup(
    batch: Sequence[Record], plans: Sequence[PassagePlan | None], texts: Sequence[list[str]], vectors: Sequence[Vector]
) -> list[Embedded]:
    """The flat list of vectors given back to each record (in the order :func:`_texts` gave them)."""
    out: list[Embedded] = []
    at = 0
    for rec, plan, group in zip(batch, plans, texts, strict=True):
        mine = list(vectors[at : at + len(group)])
        at += len(group)
        spans = () if plan is None else ((0, plan.head_end), *plan.passages)
        out.append(Embedded(rec, mine, spans))
    return out


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


def _mismatch(target: str, recorded: str, model: str) -> str:
    return (
        f"{target} holds vectors of {recorded!r} and this client embeds with {model!r}: its writes are refused "
        f"(never mixed). Configure {recorded!r} (EMBEDDINGS_MODEL) — after a reembed moved the index, the writers "
        "move to its model too"
    )


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
    elif kind == "model_mismatch":
        reason = "model_mismatch"
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
