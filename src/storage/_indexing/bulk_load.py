"""A bulk load: an ingest that relaxes the index's refresh while it writes and ends merged.

Elasticsearch makes a new segment at every refresh (each second by default): a load of minutes leaves
dozens of small segments, and the kNN leg searches each segment's graph (22 segments after 2,000 long
SciFact documents: kNN p50 1.32× the merged index's). A bulk load sets ``refresh_interval: -1`` on the
index it writes to, restores the interval it found when it ends (however it ends), refreshes, and
force-merges the index to one segment per shard (a merge waits for the shards' retention leases to move past
the load, at most a minute: merged before that, the segment would keep Elasticsearch's recovery copy of each
document, vectors included, for good).

While it writes it refreshes after its first bulk request and then once per :data:`SEGMENT_DOCUMENTS`
documents (a load that ends merged then has segments to merge, however small: a merge never rewrites a lone
segment, which would keep the recovery copies).

It runs when the caller asks (``index_documents(bulk_load=True)``: then it always ends merged) or, by
default, when nothing was ever written to the index (an initial load: nobody reads what is not there yet);
such a load ends merged when it wrote at least :data:`MERGE_MIN_DOCUMENTS`. Never behind a live index's
back: a call with ``bulk_load=None`` on an index written to before writes as usual.

The interval to restore is recorded in the index's ``_meta.bulk_load`` while the load runs. A second load
that finds it (a load running elsewhere) writes as usual and leaves the settings to the first. A process
killed during a load leaves the record and the refresh off: ``ensure_index()`` logs a warning naming both,
and :func:`end_unfinished` (what ``client.indices.end_bulk_load()`` runs) restores the interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .._errors import SearchError
from .._transport.backend import Backend
from .meta import change_meta, set_meta

__all__ = ["BulkLoad", "begin_bulk_load", "end_bulk_load", "end_unfinished", "ever_written", "unfinished_bulk_load"]

#: The longest a merge waits for the retention leases to move past the load (they move every 30 s).
LEASE_WAIT_S = 65.0
#: An initial load (``bulk_load=None``) of at least this many documents ends merged; a smaller one leaves the
#: few segments a load with the refresh off makes (a merge would wait up to 30 s for the retention lease).
MERGE_MIN_DOCUMENTS = 10_000
#: While a bulk load writes, one refresh (one segment) per this many documents instead of one per second.
SEGMENT_DOCUMENTS = 5_000
#: A force merge of a large index takes minutes; the request waits for it this long (it goes on in the
#: server if this passes: the load is still complete, the merge finishes on its own).
MERGE_TIMEOUT_S = 3600.0
_META_KEY = "bulk_load"


@dataclass(slots=True)
class BulkLoad:
    """A bulk load this call runs: the concrete index and the refresh interval to restore (None: the
    server's default)."""

    index: str
    restore: str | None
    #: Documents written when the load last refreshed (see :meth:`written`).
    refreshed_at: int = 0

    async def written(self, b: Backend, indexed: int) -> None:
        """After each bulk request (``indexed``: documents written so far): a refresh after the first and then
        every :data:`SEGMENT_DOCUMENTS`, so a load that ends merged has several segments to merge, however
        small (a lone segment is never rewritten by a merge, and keeps the recovery copies: 87.5 of a
        1,368-page manual's 128 MB). A failed refresh is left to the end."""
        if indexed and (not self.refreshed_at or indexed - self.refreshed_at >= SEGMENT_DOCUMENTS):
            self.refreshed_at = indexed
            with contextlib.suppress(SearchError):
                await b.es_call(lambda: b.es.indices.refresh(index=self.index))


def unfinished_bulk_load(info: Any) -> dict[str, Any] | None:
    """The ``_meta.bulk_load`` record of an index (its get-index entry), or None."""
    meta = info.get("mappings", {}).get("_meta", {}) if isinstance(info, dict) else {}
    record = meta.get(_META_KEY) if isinstance(meta, dict) else None
    return record if isinstance(record, dict) else None


async def _several_segments(b: Backend, index: str) -> bool:
    """Whether some primary shard of ``index`` has more than one segment."""
    shards = (await b.es_call(lambda: b.es.indices.segments(index=index))).body["indices"]
    return any(
        len(copy["segments"]) > 1
        for i in shards.values()
        for copies in i["shards"].values()
        for copy in copies
        if copy["routing"]["primary"]
    )


async def _lease_past_writes(b: Backend, index: str) -> bool:
    """Wait (at most :data:`LEASE_WAIT_S`) until every shard copy's retention lease has moved past the
    writes: Elasticsearch renews it every 30 s, and a merge before that keeps ``_recovery_source`` (a whole
    copy of each document, vectors included, that a filtered ``_source`` makes it keep until then) in the
    merged segment, which nothing merges again."""
    deadline = time.monotonic() + LEASE_WAIT_S
    while True:
        stats = (await b.es_call(lambda: b.es.indices.stats(index=index, level="shards", metric="docs"))).body
        copies = [c for i in stats["indices"].values() for shard in i["shards"].values() for c in shard]
        if all(
            lease["retaining_seq_no"] > c["seq_no"]["max_seq_no"]
            for c in copies
            for lease in c.get("retention_leases", {}).get("leases", ())
        ):
            return True
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(1.0)


async def ever_written(b: Backend, target: str) -> bool:
    """Whether any document was ever written to ``target``'s indices, refreshed or not, deleted since or not
    (a shard's highest sequence number is -1 until its first write, across restarts)."""
    stats = (await b.es_call(lambda: b.es.indices.stats(index=target, level="shards", metric="docs"))).body
    copies = [c for index in stats["indices"].values() for shard in index["shards"].values() for c in shard]
    return any(c.get("seq_no", {}).get("max_seq_no", -1) >= 0 for c in copies)


async def end_unfinished(b: Backend, index: str, info: dict[str, Any]) -> bool:
    """Finish the bulk load a killed process left on ``index`` (``info``: its get-index entry): restore the
    interval it recorded and refresh (no merge: ask for a bulk load to have one). False when there is none."""
    record = unfinished_bulk_load(info)
    if record is None:
        return False
    await end_bulk_load(b, BulkLoad(index, record.get("refresh_interval")), merge=False)
    return True


async def begin_bulk_load(b: Backend, index: str, info: dict[str, Any]) -> BulkLoad | None:
    """Start a bulk load on ``index`` (``info``: its get-index entry); None when another one runs on it (its
    record is there): this load then writes as usual and leaves the settings to that one."""
    restore = info.get("settings", {}).get("index", {}).get("refresh_interval")
    record = {"refresh_interval": restore, "started": datetime.now(UTC).isoformat()}

    def claim(meta: dict[str, Any]) -> dict[str, Any] | None:  # (the record read afresh: a test-and-set)
        return None if isinstance(meta.get(_META_KEY), dict) else meta | {_META_KEY: record}

    if unfinished_bulk_load(info) is not None or await change_meta(b, index, claim) is None:
        b.events.emit(30, "a bulk load runs on this index already", "index.bulk_load", {"index.name": index})
        return None
    try:
        await b.es_call(lambda: b.es.indices.put_settings(index=index, settings={"index": {"refresh_interval": "-1"}}))
    except SearchError:  # (no record left behind for a load that never started)
        with contextlib.suppress(SearchError):
            await set_meta(b, index, {}, drop=(_META_KEY,))
        raise
    b.events.emit(20, "bulk load started", "index.bulk_load", {"index.name": index, "index.refresh_restore": restore})
    return BulkLoad(index, restore)


async def end_bulk_load(b: Backend, load: BulkLoad, *, merge: bool = True) -> None:
    """Restore the refresh interval, drop the record, refresh, and (``merge``) force-merge to one segment per
    shard. Every step is tried even if the load failed: the index never stays unrefreshed."""
    started = time.perf_counter()
    index = load.index
    await b.es_call(
        lambda: b.es.indices.put_settings(index=index, settings={"index": {"refresh_interval": load.restore}})
    )
    await set_meta(b, index, {}, drop=(_META_KEY,))
    await b.es_call(lambda: b.es.indices.refresh(index=index))
    merge = merge and await _several_segments(b, index)  # (a lone segment: no merge would rewrite it)
    if merge:
        await b.es_call(lambda: b.es.indices.flush(index=index))
        await _lease_past_writes(b, index)
        es = b.es.options(request_timeout=MERGE_TIMEOUT_S)
        await b.es_call(
            lambda: es.indices.forcemerge(index=index, max_num_segments=1),
            attempt_timeout_s=MERGE_TIMEOUT_S,
            deadline_s=MERGE_TIMEOUT_S,
        )
    b.events.emit(
        20,
        "bulk load ended",
        "index.bulk_load",
        {"index.name": index, "index.merged": merge, "event.duration": int((time.perf_counter() - started) * 1e9)},
    )
