"""Moving an index to another embedding model with no downtime, while it is written to, losing nothing:
read every document of the version the alias points at, embed it with the new model, write a new version,
catch up with what was written meanwhile, and move the alias.

::

    alias ─▶ source ──copy (point-in-time pages)──▶ embed (new model) ─▶ bulk ─▶ target
               │                                                               ▲
               ├── catch-up rounds: what was written since (sequence numbers) ─┤   writes go on
               ├── write block: in-flight writes finish; new ones are held ────┤
               ├── last catch-up; documents deleted meanwhile removed ─────────┘
               └── alias moved atomically ─▶ block lifted ─▶ held writes land in the target

- **Writes go on during the run** and none is lost. Before the copy, the source's per-shard checkpoints are
  read (:mod:`storage._indexing.changes`): every document written or updated after that has a higher sequence
  number, and *catch-up rounds* copy those (re-embedded) while writes continue, until a round finds few.
  Then the source is **write-blocked** (Elasticsearch returns once the writes in flight are done), the last
  changes are copied, documents deleted from the source meanwhile are removed from the target (the two are
  compared page by page), the counts must agree, and the alias moves atomically — then the block is lifted
  (or the source deleted, ``delete_old``). **Writes refused by the block are held** by our writers (ingest,
  deletes: :func:`storage._indexing.changes.held_while_blocked`) and sent again through the alias, which then names
  the target: every write acknowledged before the move is in the target, every one after it goes there.
  A program writing to the index without this library gets Elasticsearch's 403 while the block lasts
  (usually well under a second).
- Searches go on against the source until the alias moves (nothing touches it before).
- The target is marked ``_meta.reembed.state: "building"`` (with its source, its model and the checkpoints
  the copy started from) until it is complete: an interrupted run leaves the alias untouched and the partial
  version identifiable (``health()`` lists it). **A second run resumes**: it skips the documents already in
  the target (their ids) and catches up from the first run's checkpoints, so a document changed since it was
  copied is copied again; ``restart=True`` deletes it and starts clean. A run that died with the source
  blocked (state ``switching``) leaves the block: the next run lifts it first.
- Documents that fail to embed or to be written are reported (``report.failed``), never dropped silently;
  any of them keeps the alias where it was, and a second run retries just them.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from embeddings import Embedder

from .._dsl.mapping import BUILDING, stored_passages, write_index_of
from .._errors import IndexNotFound
from .._settings import SearchSettings
from .._transport.backend import Backend
from .._transport.resilience import Resilience
from .._types.models import FailedDocument, IndexProgress, ReembedReport
from ..passages import PassageSetting
from .changes import Checkpoint, block_writes, changed_since, checkpoint, unblock_writes, writes_blocked
from .indices import IndexManager
from .ingest import Ingester
from .intake import Outcomes, Record
from .meta import change_meta, set_meta

__all__ = ["Reembedder"]

#: Documents read per page of the source (the embedding of a page dominates: ~10 s at 50 docs/s).
PAGE_SIZE = 500
#: Ids asked for at once when comparing the target with the source.
_IDS_PAGE = 5000
#: Catch-up rounds while writes go on: stop when a round copies at most this many documents (the rest is
#: copied with the source blocked, so the block lasts about the embedding of this many)...
_SETTLED = 100
#: ... or after this many rounds (writes faster than the new model embeds never settle: block then).
_MAX_ROUNDS = 5
#: ``_meta.reembed.state`` while the source is blocked and the alias is being moved.
SWITCHING = "switching"


def _record(doc_id: str, source: dict[str, Any]) -> Record:
    """A stored document on its way into the target (its vectors and passages are made anew for it)."""
    kept = {k: v for k, v in source.items() if k not in ("embedding", "passages")}
    return Record(doc_id, kept, str(source.get("title") or ""), str(source.get("text") or ""))


@dataclass
class _Run:
    """One reembed in progress (per call, never stored on the shared client)."""

    source: str
    target: str
    embedder: Embedder
    stack: Resilience
    progress: Callable[[IndexProgress], None] | None
    total: int = 0
    embedded: int = 0
    resumed: int = 0
    done: int = 0  # written, resumed or failed so far
    failed: dict[str, FailedDocument] = field(default_factory=dict)

    def report_progress(self, batch: IndexProgress | None = None) -> None:
        if self.progress is not None:
            base = self.done
            self.progress(
                IndexProgress(
                    total=self.total,
                    embedded_count=base + (batch.embedded_count if batch else 0),
                    indexed_count=base - len(self.failed) + (batch.indexed_count if batch else 0),
                    failed_count=len(self.failed) + (batch.failed_count if batch else 0),
                    vector_count=batch.vector_count if batch else 0,
                )
            )


class Reembedder:
    def __init__(self, backend: Backend, indices: IndexManager, ingester: Ingester) -> None:
        self._b = backend
        self._indices = indices
        self._ingester = ingester

    async def reembed(
        self,
        embedder: Embedder | None = None,
        *,
        delete_old: bool = False,
        restart: bool = False,
        progress: Callable[[IndexProgress], None] | None = None,
    ) -> ReembedReport:
        b = self._b
        b.check_open()
        started = time.perf_counter()
        emb = embedder or b.embedder
        await b.probe_embedder(emb)
        alias = self._indices.alias
        current = await self._indices.aliased()
        if not current:
            raise IndexNotFound(f"alias {alias!r} does not exist: nothing to re-embed (ensure_index() creates it)")
        source = write_index_of(alias, current)
        mappings = current[source].get("mappings", {})
        previous = mappings.get("_meta", {}).get("embedding", {}).get("model_id")
        report = {"alias": alias, "source": source, "previous_model": previous, "model": emb.model_id}
        built = stored_passages(mappings.get("_meta", {}).get("embedding"))
        # (an index read in passages from before their text was indexed, or from before the heads were
        # indexed flat, is rebuilt too: storage._dsl.mapping)
        passage_props = mappings.get("properties", {}).get("passages", {}).get("properties", {})
        head_indexed = mappings.get("properties", {}).get("embedding", {}).get("index", True) is not False
        current_layout = built is None or ("text" in passage_props and head_indexed)
        # (and an index whose analyzer reembed moves: _analyzer)
        current_layout = current_layout and _analyzer(mappings, b.settings) == _source_analyzer(mappings)
        if previous == emb.model_id and built == b.passage_setting(emb) and current_layout and len(current) == 1:
            if await writes_blocked(b, source):  # (a run that died while it switched: lift its block)
                await unblock_writes(b, source)
            return ReembedReport(
                **report,
                target=None,
                documents=await self._count(source),
                reason=f"{source} holds {previous!r} already" + (", in passages" if built else ""),
            )
        target, resumed_from, since = await self._target(source, emb, mappings, restart=restart)
        b.events.emit(
            20,
            "reembed started",
            "index.reembed",
            {"index.alias": alias, "index.source": source, "index.name": target, "embeddings.model": emb.model_id},
        )
        run = _Run(source, target, emb, b.embeddings_stack(), progress, total=await self._count(source))
        # 1. Every document of the source (a point-in-time: a stable view, taken after a refresh, so that it
        # holds everything at or below the checkpoints), minus what the target holds; then
        # 2. catch-up rounds: what was written since the checkpoints, while writes go on.
        await self._refresh(source)
        async for page in self._pages(source):
            present = await self._present(target, [doc_id for doc_id, _ in page])
            await self._carry(run, [_record(i, src) for i, src in page if i not in present], len(present))
        for _ in range(_MAX_ROUNDS):
            since, copied = await self._catch_up(run, since)
            if copied <= _SETTLED:
                break
        # 3. The switch: the source stands still (held writers wait), the last changes, the deletions.
        await self._mark(target, SWITCHING)
        await block_writes(b, source)
        deleted = False
        try:
            await self._catch_up(run, since)
            removed = await self._remove_deleted(source, target)
            documents, written = await self._count(source), await self._count(target)
            reason = _kept_because(run, documents, written)
            if reason is None:
                done = {"state": "complete", "source": source, "model_id": emb.model_id}
                await set_meta(b, target, {"reembed": done})
                await self._indices.promote_index(target, delete_old=delete_old)
                deleted = delete_old
            else:
                await self._mark(target, BUILDING)
        finally:
            if not deleted:
                await unblock_writes(b, source)
        out = ReembedReport(
            **report,
            target=target,
            documents=documents,
            embedded=run.embedded,
            resumed=run.resumed,
            removed=removed,
            failed=sorted(run.failed.values(), key=lambda f: f.id),
            promoted=reason is None,
            deleted_old=reason is None and delete_old,
            reason=reason,
            seconds=time.perf_counter() - started,
        )
        b.events.emit(
            20 if out.promoted else 30,
            "reembed finished" if out.promoted else "reembed finished; the alias was not moved",
            "index.reembed",
            {
                "index.alias": alias,
                "index.name": target,
                "index.documents": documents,
                "index.failed": len(run.failed),
                "index.promoted": out.promoted,
                "event.duration": int(out.seconds * 1e9),
                **({"index.resumed_from": resumed_from} if resumed_from else {}),
            },
        )
        return out

    async def _carry(self, run: _Run, records: Sequence[Record], resumed: int) -> None:
        """Write ``records`` (embedded with the new model); ``resumed`` more were in the target already."""
        run.resumed += resumed
        run.done += resumed
        if records:
            outcomes = Outcomes()
            await self._ingester.write(
                [list(records)],
                run.target,
                outcomes,
                progress=run.report_progress,
                embedder=run.embedder,
                stack=run.stack,
            )
            run.embedded += len(outcomes.indexed)
            for f in outcomes.failed:
                run.failed[f.id] = f
            for doc_id in outcomes.indexed:  # (a later catch-up wrote what an earlier write failed)
                run.failed.pop(doc_id, None)
            run.done += len(records)
        run.report_progress()

    async def _catch_up(self, run: _Run, since: Checkpoint) -> tuple[Checkpoint, int]:
        """Copy what was written to the source after ``since`` (up to its checkpoints now); returns those
        checkpoints and how many documents were copied."""
        until = await checkpoint(self._b, run.source)
        await self._refresh(run.source)
        copied = 0
        async for page in changed_since(self._b, run.source, since, until, size=PAGE_SIZE):
            run.total += len(page)
            copied += len(page)
            await self._carry(run, [_record(i, src) for i, src in page], 0)
        return until, copied

    async def _remove_deleted(self, source: str, target: str) -> int:
        """Documents deleted from the (blocked) source during the run, removed from the target: only looked
        for when the target holds more (its ids compared page by page: memory stays flat)."""
        await self._refresh(source, target)
        if await self._count(target) <= await self._count(source):
            return 0
        removed = 0
        async for hits in self._indices.scan(target, size=_IDS_PAGE, source=False):
            ids = [str(h["_id"]) for h in hits]
            gone = sorted(set(ids) - await self._present(source, ids))
            if gone:
                await self._delete(target, gone)
                removed += len(gone)
        await self._refresh(target)
        return removed

    async def _mark(self, target: str, state: str) -> None:
        """Set the target's ``_meta.reembed.state`` (its other reembed keys kept)."""

        def edit(meta: dict[str, Any]) -> dict[str, Any]:
            return meta | {"reembed": {**meta.get("reembed", {}), "state": state}}

        await change_meta(self._b, target, edit)

    async def _target(
        self, source: str, emb: Embedder, mappings: dict[str, Any], *, restart: bool
    ) -> tuple[str, str | None, Checkpoint]:
        """The version to write and the checkpoints of the source its copy started from: an interrupted run's
        for the same source and model (resumed, with its checkpoints), unless ``restart`` (then it is
        deleted), else a new one (marked as building). A run that died while it switched left the source
        blocked: the block is lifted here."""
        b = self._b
        passages = b.passage_setting(emb)
        partial = {
            name: _reembed_meta(info)
            for name, info in (await self._indices.versions()).items()
            if _building(info, source, emb.model_id, passages) and self._indices.alias not in info.get("aliases", {})
        }
        if any(state.get("state") == SWITCHING for state in partial.values()) and await writes_blocked(b, source):
            await unblock_writes(b, source)
        resumable = {name: state for name, state in partial.items() if isinstance(state.get("checkpoint"), dict)}
        if resumable and not restart:
            resumed = sorted(resumable)[-1]
            await self._refresh(resumed)  # what the interrupted run wrote last is found, not embedded again
            stored = resumable[resumed]["checkpoint"]
            return resumed, resumed, {int(shard): int(at) for shard, at in stored.items()}
        for name in partial:  # (a version built before checkpoints were recorded cannot be resumed: anew)
            await b.es_call(lambda name=name: b.es.indices.delete(index=name))  # type: ignore[misc]
        since = await checkpoint(b, source)  # before the copy's view is taken: later writes are above it
        analyzer = _analyzer(mappings, b.settings)
        meta = {
            "reembed": {
                "state": BUILDING,
                "source": source,
                "model_id": emb.model_id,
                "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
                "checkpoint": {str(shard): at for shard, at in since.items()},
            }
        }
        return await self._indices.create_version(embedder=emb, analyzer=analyzer, meta=meta), None, since

    async def _pages(self, index: str) -> AsyncIterator[list[tuple[str, dict[str, Any]]]]:
        """The index's documents (id, ``_source`` without the vector), a page at a time."""
        async for hits in self._indices.scan(index, size=PAGE_SIZE, source=True):
            yield [(str(h["_id"]), dict(h.get("_source") or {})) for h in hits]

    async def _present(self, index: str, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` the index holds."""
        return await self._indices.existing_in(index, ids) if ids else set()

    async def _delete(self, index: str, ids: Sequence[str]) -> None:
        b = self._b
        operations: list[dict[str, Any]] = [{"delete": {"_index": index, "_id": doc_id}} for doc_id in ids]
        await b.es_call(lambda: b.es.bulk(operations=operations))

    async def _refresh(self, *indices: str) -> None:
        await self._b.es_call(lambda: self._b.es.indices.refresh(index=",".join(indices)))

    async def _count(self, index: str) -> int:
        return await self._indices.count_all(index)


def _kept_because(run: _Run, documents: int, written: int) -> str | None:
    """Why the alias stays on the source (None: it moves)."""
    if run.failed:
        return f"{len(run.failed)} documents failed (listed): the alias stays on {run.source}; run again to retry them"
    if documents != written:
        return f"{run.target} holds {written} documents, {run.source} {documents}: the alias stays on {run.source}"
    return None


def _reembed_meta(info: Mapping[str, Any]) -> dict[str, Any]:
    return dict(info.get("mappings", {}).get("_meta", {}).get("reembed", {}))


def _building(info: dict[str, Any], source: str, model_id: str, passages: PassageSetting | None) -> bool:
    """A version an interrupted run was building (or switching to) from ``source``, for the same model and
    passages."""
    meta = info.get("mappings", {}).get("_meta", {})
    state = meta.get("reembed", {})
    return bool(
        state.get("state") in (BUILDING, SWITCHING)
        and state.get("source") == source
        and meta.get("embedding", {}).get("model_id") == model_id
        and stored_passages(meta.get("embedding")) == passages
    )


def _source_analyzer(mappings: Mapping[str, Any]) -> str:
    return str(mappings.get("properties", {}).get("text", {}).get("analyzer", "standard"))


def _analyzer(mappings: Mapping[str, Any], settings: SearchSettings) -> str:
    """The analyzer of the version a reembed builds: ``ES_ANALYZER`` when it is set; else the source's, except
    the former default ``english``, which moves to the default (``english_folded``: the same analysis with
    accents folded)."""
    source = _source_analyzer(mappings)
    if "analyzer" in settings.model_fields_set or source == "english":
        return settings.analyzer
    return source
