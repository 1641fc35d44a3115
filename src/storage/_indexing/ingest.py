"""Ingest: validate, embed in batches while earlier batches are bulk-indexed, report every id. The write
stage (:meth:`Ingester.write`) also carries re-embedding into a new index version (``reembed``).

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
from collections.abc import AsyncGenerator, Callable, Iterable, Sequence
from typing import Any

from elasticsearch.helpers import async_streaming_bulk

from embeddings import Embedder, InvalidEmbedding, ProviderError, Vector, Windowed

from .._dsl.mapping import NESTED_LIMIT, valid_target
from .._dsl.tenancy import require
from .._errors import CircuitOpen, IngestInterrupted, InvalidQuery, ModelMismatch, SearchError
from .._transport.backend import Backend
from .._transport.resilience import Resilience
from .._transport.translate import map_provider_error
from .._types.models import FailedDocument, IndexProgress, IndexReport, content_hash, embedding_text
from .._types.requests import IngestRequest, ProgressCallback
from ..passages import Agreement, PassagePlan, PassageSetting, plan_passages
from .bulk_load import MERGE_MIN_DOCUMENTS, BulkLoad, begin_bulk_load, end_bulk_load, ever_written
from .changes import held_while_blocked
from .indices import IndexManager
from .intake import (
    Embedded,
    Intake,
    Outcomes,
    Record,
    bulk_failure,
    embedding_failure,
    too_many_passages,
    transport_failure,
)
from .meta import require_recorded

__all__ = ["Ingester", "Record"]
_INDEXING_CONCURRENCY_QUEUE = 2  # embedded batches waiting for bulk: bounds memory, keeps both busy


class Ingester:
    def __init__(self, backend: Backend, indices: IndexManager) -> None:
        self._b = backend
        self._indices = indices
        #: Per model: what unrelated documents' vectors look like (storage.passages.Agreement), learned from
        #: the first documents this client embeds, so a call that writes one document is measured too.
        self._agreements: dict[str, Agreement] = {}

    async def index_documents(self, request: IngestRequest) -> IndexReport:
        b = self._b
        b.check_open()
        started = time.perf_counter()
        index, tenant_id = request.index, request.tenant_id
        if tenant_id is not None:
            require(tenant_id, "index_documents", multi_tenant=b.settings.multi_tenant)
        if index is not None and "," in index:
            raise InvalidQuery("index_documents writes to one index or alias")
        target = valid_target(index) if index is not None else b.settings.index
        intake = Intake(
            request.documents,
            tenant_id=tenant_id,
            multi_tenant=b.settings.multi_tenant,
            strict=request.on_invalid == "raise",
        )
        if self._indices.checked_index is None and index is None:
            await self._indices.ensure_index()
        if (await b.metadata.read_target(target)).model_id is None:  # (not ours, or a failed look: strictly)
            require_recorded(*await self._indices.write_index_info(target))  # (missing: IndexNotFound)
        outcomes = Outcomes()
        load = await self._bulk_load(target, request.bulk_load)
        try:
            await self.write(
                intake.batches(b.settings.embed_batch_size),
                target,
                outcomes,
                intake=intake,
                progress=request.progress,
                overwrite=request.overwrite,
                load=load,
            )
        except BaseException:
            if load is not None:  # (the refresh restored, whatever failed; the original error goes on)
                with contextlib.suppress(Exception):
                    await end_bulk_load(b, load, merge=False)
            raise
        failed = [*intake.invalid, *outcomes.failed]
        if load is not None:
            merge = request.bulk_load is True or len(outcomes.indexed) >= MERGE_MIN_DOCUMENTS
            await end_bulk_load(b, load, merge=merge and bool(outcomes.indexed))
        if intake.invalid:
            b.events.emit(
                30,
                "invalid documents skipped",
                "index.invalid_documents",
                {"index.invalid": len(intake.invalid), "error.message": intake.invalid[0].detail[:200]},
            )
        if request.refresh and outcomes.indexed and not any(f.reason == "not_sent" for f in failed):
            await b.es_call(lambda: b.es.indices.refresh(index=target))  # (not_sent: ES is down)
        report = IndexReport(
            index=target,
            indexed=outcomes.indexed,
            failed=failed,
            duplicates=intake.duplicates,
            unchanged=outcomes.unchanged,
            seconds=time.perf_counter() - started,
            bulk_load=load is not None,
        )
        b.events.emit(
            20 if report.ok and intake.error is None else 30,
            "documents indexed",
            "index.documents",
            {
                "index.name": target,
                "index.submitted": intake.taken,
                "index.indexed": len(report.indexed),
                "index.failed": len(failed),
                "event.duration": int(report.seconds * 1e9),
            },
        )
        if intake.error is not None:
            raise IngestInterrupted(
                f"the documents given raised {type(intake.error).__name__} after {intake.taken} were read: "
                f"{len(report.indexed)} indexed, {len(failed)} failed (see .report; re-sending them is safe: "
                f"ids are explicit)",
                report=report,
            ) from intake.error
        return report

    async def _bulk_load(self, target: str, asked: bool | None) -> BulkLoad | None:
        """A bulk load of ``target`` when asked (True: its failure to start raises), or by default when nothing
        was ever written to it (a failed look then writes as usual: the write reports what Elasticsearch did).
        A target once seen written to is remembered: a stream of small writes pays one look."""
        if asked is False or (asked is None and target in self._indices.written):
            return None
        try:
            if asked is None and await ever_written(self._b, target):
                self._indices.written.add(target)
                return None
            return await begin_bulk_load(self._b, *await self._indices.write_index_info(target))
        except SearchError:
            if asked:
                raise
            return None

    async def write(
        self,
        batches: Iterable[list[Record]],
        target: str,
        outcomes: Outcomes,
        *,
        intake: Intake | None = None,
        progress: ProgressCallback | None = None,
        embedder: Embedder | None = None,
        stack: Resilience | None = None,
        overwrite: bool = True,
        load: BulkLoad | None = None,
    ) -> None:
        """Embed the records of ``batches`` (read one batch at a time: a generator of any length is read with
        flat memory; with ``embedder`` through ``stack``, default the client's) while earlier ones are
        bulk-indexed into ``target``, recording each record's outcome in ``outcomes``: indexed or failed, a
        record whose embedding failed never written without its vectors, one taken and never sent
        ``not_sent``. Into a target read in passages, every record gets them (cut as the target recorded).
        Into a target that records content hashes, a record it holds already with the same content is neither
        embedded nor written (indexed, and apart as unchanged). ``intake``: where the batches come from (its
        repeated ids and its invalid documents count in the progress). ``overwrite=False``: Elasticsearch's
        ``create`` (a document the target holds fails with reason ``exists``). ``load``: the bulk load this
        write is (told of each bulk request's documents)."""
        b = self._b
        info = await b.metadata.read_target(target)
        model = (embedder or b.embedder).model_id
        if info.model_id is not None and info.model_id != model:
            raise ModelMismatch(_mismatch(target, info.model_id, model))
        setting = info.passage_setting
        with_text, nested_heads = info.writes_passage_text, info.writes_nested_heads
        agreement = self._agreements.setdefault(model, Agreement()) if info.writes_agreement else None
        hashed = info.content_hash and overwrite  # the target records each document's content: skip unchanged
        look = hashed and await self._indices.count_all(target) > 0
        counts = {"taken": 0, "embedded": 0, "vectors": 0}

        def report_progress(embedding: int = 0) -> None:
            """``embedding``: records of the batch being embedded whose vectors are all done."""
            if progress is not None:
                invalid = len(intake.invalid) if intake is not None else 0
                progress(
                    IndexProgress(
                        total=counts["taken"] + invalid,
                        embedded_count=counts["embedded"] + invalid + embedding,
                        indexed_count=len(outcomes.indexed),
                        failed_count=len(outcomes.failed) + invalid,
                        vector_count=counts["vectors"],
                    )
                )

        def embedding_step(records_done: int, vectors_done: int) -> None:
            counts["vectors"] += vectors_done
            report_progress(records_done)

        queue: asyncio.Queue[list[Embedded] | None] = asyncio.Queue(_INDEXING_CONCURRENCY_QUEUE)
        stopped: list[SearchError] = []

        async def produce() -> None:
            try:
                for batch in batches:
                    if stopped:
                        break
                    if hashed:
                        batch = [_hashed(r) for r in batch]
                    outcomes.taken(batch)
                    if intake is not None and intake.repeats:
                        outcomes.repeated(batch, intake.repeats)
                    counts["taken"] += len(batch)
                    if look:
                        batch = await self._skip_unchanged(target, batch, outcomes, stopped)
                    if batch:
                        groups = self._embed_groups(
                            batch, embedder, stack, setting, embedding_step, nested_limit=info.nested_limit
                        )
                        async with contextlib.aclosing(groups):
                            async for ok, bad, done in groups:  # written as each group is embedded
                                for failure in bad:
                                    outcomes.fail(_by_id(batch, failure.id), failure)
                                report_progress(done)
                                if ok:
                                    await queue.put(ok)
                    counts["embedded"] = counts["taken"]
                    report_progress()
            except asyncio.CancelledError:
                # Cancelled only once the consumer has stopped (below): nobody reads the end marker, and
                # waiting to put it into a full queue would hang the caller's cancellation for ever.
                raise
            except BaseException:
                await queue.put(None)  # the consumer is still reading: let it finish what was queued
                raise
            await queue.put(None)

        async def fits(model: str) -> dict[str, Any] | None:
            """Before held writes are sent again: the alias may have moved to an index of another model."""
            now = (await b.metadata.read_target(target)).model_id
            if now is None or now == model:
                return None
            return {"status": 409, "error": {"type": "model_mismatch", "reason": _mismatch(target, now, model)}}

        async def consume() -> None:
            while (item := await queue.get()) is not None:
                if stopped:
                    continue  # (the producer stops at its next batch; what it queued is reported not sent)
                if agreement is not None:
                    agreement.saw([e.vectors for e in item])
                actions = [
                    {
                        "_op_type": "index" if overwrite else "create",
                        "_index": target,
                        "_id": e.record.id,
                        "_source": e.source_for(with_text=with_text, nested_heads=nested_heads, agreement=agreement),
                    }
                    for e in item
                ]
                if not nested_heads and any(len(e.spans) > 1 for e in item):
                    b.metadata.saw_long_documents()  # (before the write: a search right after must read them)
                records = {e.record.id: e.record for e in item}
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
                    for r in records.values():
                        outcomes.fail(r, transport_failure(r.id, exc))
                    report_progress()
                    continue
                for ok, info in results:
                    doc_id = str(info.get("_id"))
                    if doc_id not in records:
                        continue
                    if ok:
                        outcomes.ok(records[doc_id])
                    else:
                        outcomes.fail(records[doc_id], bulk_failure(doc_id, info))
                report_progress()
                if load is not None:
                    await load.written(b, len(outcomes.indexed))

        producer = asyncio.create_task(produce(), name="storage-embed-producer")
        try:
            await consume()
        finally:
            if not producer.done():
                producer.cancel()
            await asyncio.gather(producer, return_exceptions=True)
            why = f"{type(stopped[0]).__name__}: {stopped[0]}" if stopped else "bulk indexing stopped"
            outcomes.settle(why)  # every record taken has an outcome, whatever happened above
            report_progress()
        if not producer.cancelled() and (producer_exc := producer.exception()) is not None:
            raise producer_exc

    async def _skip_unchanged(
        self, target: str, batch: list[Record], outcomes: Outcomes, stopped: list[SearchError]
    ) -> list[Record]:
        """The records of ``batch`` whose content ``target`` does not hold already (those it holds are
        indexed, unchanged). A failed lookup fails the batch (an open breaker stops the ingest)."""
        try:
            held = await self._indices.content_hashes(target, [r.id for r in batch])
        except SearchError as exc:
            if isinstance(exc, CircuitOpen):
                stopped.append(exc)
            for r in batch:
                outcomes.fail(r, transport_failure(r.id, exc))
            return []
        for r in batch:
            if held.get(r.id) == r.source["content_hash"]:
                outcomes.ok(r, unchanged=True)
        return [r for r in batch if held.get(r.id) != r.source["content_hash"]]

    async def _send_bulk(self, actions: list[dict[str, Any]]) -> list[tuple[bool, dict[str, Any]]]:
        """One bulk write of ``actions`` through Elasticsearch's resilience stack."""
        s = self._b.settings
        return await self._b.es_call(
            functools.partial(self._bulk, actions), deadline_s=s.bulk_timeout_s * 2, attempt_timeout_s=s.bulk_timeout_s
        )

    async def _bulk(self, actions: list[dict[str, Any]]) -> list[tuple[bool, dict[str, Any]]]:
        """One attempt at bulk-indexing ``actions``: per-item 429s are retried inside (with backoff); a
        request-level error raises (and the resilience stack retries the batch: ids make it idempotent). Each
        request may take the attempt's budget, or half of it where the transport can fail over: a node that
        stops answering costs half the budget and the bulk goes to another node (:meth:`Backend.request_timeout`)."""
        s = self._b.settings
        es = self._b.es.options(request_timeout=self._b.request_timeout(s.bulk_timeout_s))
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
        *,
        nested_limit: int = NESTED_LIMIT,
    ) -> AsyncGenerator[tuple[list[Embedded], list[FailedDocument], int], None]:
        """Embed a batch (every record's head, and its passages when ``setting``) in groups of records of about
        ``embed_batch_size`` texts (a record with more is a group of its own), yielding each group as it is
        done — ``(embedded, failed, records of the batch done so far)`` — so that its writes start while the
        next group is embedded (a batch of long documents is many groups). The texts go to the embedder in
        calls of at most ``embed_batch_size``; after each, ``step(records of the batch whose vectors are all
        done, vectors the call embedded)``. If an answer is invalid, the group is embedded record by record
        so only the bad documents fail. A record with more passages than the target's ``nested_limit`` fails
        first, never embedded (reason ``too_large``: Elasticsearch would refuse it)."""
        try:
            plans = await self._plans(batch, embedder, setting)
        except ProviderError as exc:  # the model could not be loaded to count its tokens
            error = map_provider_error(exc, "embeddings")
            yield [], [embedding_failure(r.id, error) for r in batch], len(batch)
            return
        nested = [len(plan.passages) + 1 if plan is not None and plan.passages else 0 for plan in plans]
        over = [n for n, count in enumerate(nested) if count > nested_limit]
        refused = len(over)
        if over:
            yield [], [too_many_passages(batch[n].id, nested[n], nested_limit) for n in over], refused
            batch = [r for n, r in enumerate(batch) if n not in over]
            plans = [p for n, p in enumerate(plans) if n not in over]
        texts = [_texts(r, plan) for r, plan in zip(batch, plans, strict=True)]
        size = max(self._b.settings.embed_batch_size, 1)
        first = 0
        while first < len(batch):
            last, count = first + 1, len(texts[first])
            while last < len(batch) and count + len(texts[last]) <= size:
                count += len(texts[last])
                last += 1
            ok, bad = await self._embed_isolating(
                batch[first:last], plans[first:last], texts[first:last], embedder, stack, step, refused + first
            )
            yield ok, bad, refused + last
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
                return [], [embedding_failure(r.id, exc) for r in records]
        ok: list[Embedded] = []
        bad: list[FailedDocument] = []
        for rec, plan, group in zip(records, plans, texts, strict=True):
            try:
                ok += _regroup([rec], [plan], [group], await embed(group))
            except SearchError as exc:
                bad.append(embedding_failure(rec.id, exc))
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
    return Record(record.id, source, record.title, record.text, record.position)


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


def _mismatch(target: str, recorded: str, model: str) -> str:
    return (
        f"{target} holds vectors of {recorded!r} and this client embeds with {model!r}: its writes are refused "
        f"(never mixed). Configure {recorded!r} (EMBEDDINGS_MODEL) — after a reembed moved the index, the writers "
        "move to its model too"
    )


def _by_id(batch: Sequence[Record], doc_id: str) -> Record:
    return next(r for r in batch if r.id == doc_id)
