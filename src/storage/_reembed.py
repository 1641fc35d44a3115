"""Moving an index to another embedding model with no downtime: read every document of the version the
alias points at, embed it with the new model, write a new version, check it, move the alias.

::

    alias ─▶ source version ──read (point-in-time pages)──▶ embed (new model) ─▶ bulk ─▶ target version
                   │                                                                        │
                   └── catch-up: ids written or deleted meanwhile ─────────────────────────▶│
                                       counts equal, nothing failed ─▶ alias moved atomically

- Searches go on against the source until the alias moves (nothing touches it before).
- The target is marked ``_meta.reembed.state: "building"`` (with its source and model) until it is
  complete: an interrupted run leaves the alias untouched and the partial version identifiable
  (``health()`` lists it). **A second run resumes**: it finds that version and skips the documents already
  in it (their ids), so only what is missing is embedded; ``restart=True`` deletes it and starts clean.
- Documents that fail to embed or to be written are reported (``report.failed``), never dropped silently;
  any of them keeps the alias where it was, and a second run retries just them.
- Writes during the run: documents added to the alias (they land in the source) or deleted from it are
  carried over by a catch-up pass before the counts are compared. A document *updated* in place while the
  run reads the source keeps the text it had when it was read: pause updates, or run again (a second run
  does not compare contents).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from embeddings import Embedder

from ._backend import Backend
from ._errors import IndexNotFound
from ._indices import IndexManager, write_index_of
from ._ingest import Ingester, Record
from ._mapping import BUILDING, stored_passages
from ._models import FailedDocument, IndexProgress, ReembedReport
from ._settings import SearchSettings
from .passages import PassageSetting

__all__ = ["Reembedder"]

#: Documents read per page of the source (the embedding of a page dominates: ~10 s at 50 docs/s).
PAGE_SIZE = 500
#: Ids asked for at once when listing what the target already holds.
_IDS_PAGE = 5000


def _record(doc_id: str, source: dict[str, Any]) -> Record:
    """A stored document on its way into the target (its vectors and passages are made anew for it)."""
    kept = {k: v for k, v in source.items() if k not in ("embedding", "passages")}
    return Record(doc_id, kept, str(source.get("title") or ""), str(source.get("text") or ""))


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
        stack = b.embeddings_stack()  # the new model's failures are its own
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
        # indexed flat, is rebuilt too: storage._mapping)
        passage_props = mappings.get("properties", {}).get("passages", {}).get("properties", {})
        head_indexed = mappings.get("properties", {}).get("embedding", {}).get("index", True) is not False
        current_layout = built is None or ("text" in passage_props and head_indexed)
        # (and an index whose analyzer reembed moves: _analyzer)
        current_layout = current_layout and _analyzer(mappings, b.settings) == _source_analyzer(mappings)
        if previous == emb.model_id and built == b.passage_setting(emb) and current_layout and len(current) == 1:
            return ReembedReport(
                **report,
                target=None,
                documents=await self._count(source),
                reason=f"{source} holds {previous!r} already" + (", in passages" if built else ""),
            )
        target, resumed_from = await self._target(source, emb, mappings, restart=restart)
        b.events.emit(
            20,
            "reembed started",
            "index.reembed",
            {"index.alias": alias, "index.source": source, "index.name": target, "embeddings.model": emb.model_id},
        )
        total = await self._count(source)
        failed: dict[str, FailedDocument] = {}
        tally = {"embedded": 0, "resumed": 0, "done": 0}  # done: written, resumed or failed so far

        def report_progress(batch: IndexProgress | None = None) -> None:
            if progress is not None:
                base = tally["done"]
                progress(
                    IndexProgress(
                        total=total,
                        embedded=base + (batch.embedded if batch else 0),
                        indexed=base - len(failed) + (batch.indexed if batch else 0),
                        failed=len(failed) + (batch.failed if batch else 0),
                        vectors=batch.vectors if batch else 0,
                    )
                )

        async def carry(records: Sequence[Record], resumed: int) -> None:
            """Write ``records`` (embedded with the new model); ``resumed`` more were in the target already."""
            tally["resumed"] += resumed
            tally["done"] += resumed
            if records:
                indexed, bad, _ = await self._ingester.write(
                    records, target, progress=report_progress, embedder=emb, stack=stack
                )
                tally["embedded"] += len(indexed)
                failed.update((f.id, f) for f in bad)
                tally["done"] += len(records)
            report_progress()

        # 1. Every document of the source (a point-in-time: a stable view), minus what the target holds.
        async for page in self._pages(source):
            present = await self._present(target, [doc_id for doc_id, _ in page])
            todo = [_record(i, src) for i, src in page if i not in present]
            await carry(todo, len(page) - len(todo))
        # 2. Catch-up: documents written to (or deleted from) the alias while the source was read.
        await self._refresh(source, target)
        source_ids, target_ids = await self._ids(source), await self._ids(target)
        missing = sorted(source_ids - target_ids - failed.keys())
        for start in range(0, len(missing), PAGE_SIZE):
            docs = await self._get(source, missing[start : start + PAGE_SIZE])
            total += len(docs)
            await carry([_record(i, src) for i, src in docs], 0)
        removed = sorted(target_ids - source_ids)
        if removed:
            await self._delete(target, removed)
        await self._refresh(source, target)
        documents, written = await self._count(source), await self._count(target)
        out = ReembedReport(
            **report,
            target=target,
            documents=documents,
            embedded=tally["embedded"],
            resumed=tally["resumed"],
            removed=len(removed),
            failed=sorted(failed.values(), key=lambda f: f.id),
        )
        if failed:
            reason = f"{len(failed)} documents failed (listed): the alias stays on {source}; run again to retry them"
        elif documents != written:
            reason = f"{target} holds {written} documents, {source} {documents}: the alias stays on {source}"
        else:
            reason = None
        if reason is None:
            await self._indices.update_meta(
                target, {"reembed": {"state": "complete", "source": source, "model_id": emb.model_id}}
            )
            await self._indices.promote_index(target, delete_old=delete_old)
            out = out.model_copy(update={"promoted": True, "deleted_old": delete_old})
        else:
            out = out.model_copy(update={"reason": reason})
        out = out.model_copy(update={"seconds": time.perf_counter() - started})
        b.events.emit(
            20 if out.promoted else 30,
            "reembed finished" if out.promoted else "reembed finished; the alias was not moved",
            "index.reembed",
            {
                "index.alias": alias,
                "index.name": target,
                "index.documents": documents,
                "index.failed": len(failed),
                "index.promoted": out.promoted,
                "event.duration": int(out.seconds * 1e9),
                **({"index.resumed_from": resumed_from} if resumed_from else {}),
            },
        )
        return out

    async def _target(
        self, source: str, emb: Embedder, mappings: dict[str, Any], *, restart: bool
    ) -> tuple[str, str | None]:
        """The version to write: an interrupted run's for the same source and model (resumed), unless
        ``restart`` (then it is deleted), else a new one (marked as building)."""
        passages = self._b.passage_setting(emb)
        partial = [
            name
            for name, info in (await self._indices.versions()).items()
            if _building(info, source, emb.model_id, passages) and self._indices.alias not in info.get("aliases", {})
        ]
        if partial and not restart:
            resumed = sorted(partial)[-1]
            await self._refresh(resumed)  # what the interrupted run wrote last is found, not embedded again
            return resumed, resumed
        for name in partial:
            await self._b.es_call(lambda name=name: self._b.es.indices.delete(index=name))  # type: ignore[misc]
        analyzer = _analyzer(mappings, self._b.settings)
        meta = {
            "reembed": {
                "state": BUILDING,
                "source": source,
                "model_id": emb.model_id,
                "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
            }
        }
        return await self._indices.create_version(embedder=emb, analyzer=analyzer, meta=meta), None

    async def _pages(self, index: str) -> AsyncIterator[list[tuple[str, dict[str, Any]]]]:
        """The index's documents (id, ``_source`` without the vector), a page at a time."""
        async for hits in self._indices.scan(index, size=PAGE_SIZE, source=True):
            yield [(str(h["_id"]), dict(h.get("_source") or {})) for h in hits]

    async def _ids(self, index: str) -> set[str]:
        """Every id in the index."""
        return {str(h["_id"]) async for hits in self._indices.scan(index, size=_IDS_PAGE, source=False) for h in hits}

    async def _present(self, index: str, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` the index holds."""
        return await self._indices.existing_in(index, ids) if ids else set()

    async def _get(self, index: str, ids: Sequence[str]) -> list[tuple[str, dict[str, Any]]]:
        b = self._b
        resp = await b.es_call(lambda: b.es.mget(index=index, ids=list(ids), source_excludes=["embedding", "passages"]))
        return [(str(d["_id"]), dict(d["_source"])) for d in resp.body["docs"] if d.get("found")]

    async def _delete(self, index: str, ids: Sequence[str]) -> None:
        b = self._b
        operations: list[dict[str, Any]] = [{"delete": {"_index": index, "_id": doc_id}} for doc_id in ids]
        await b.es_call(lambda: b.es.bulk(operations=operations))

    async def _refresh(self, *indices: str) -> None:
        await self._b.es_call(lambda: self._b.es.indices.refresh(index=",".join(indices)))

    async def _count(self, index: str) -> int:
        return await self._indices.count_all(index)


def _building(info: dict[str, Any], source: str, model_id: str, passages: PassageSetting | None) -> bool:
    """A version an interrupted run was building from ``source``, for the same model and passages."""
    meta = info.get("mappings", {}).get("_meta", {})
    state = meta.get("reembed", {})
    return bool(
        state.get("state") == BUILDING
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
