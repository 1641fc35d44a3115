"""What changed in an index since a moment, and holding its writes for a moment: what a reembed needs to move
an alias that is being written to without losing an acknowledged write.

- **Checkpoints** (:func:`checkpoint`): Elasticsearch numbers every operation on a shard (``_seq_no``); a
  shard's *global checkpoint* is the highest number below which every operation is done on every in-sync
  copy. After a refresh, every document written or updated at or below it is searchable, and
  :func:`changed_since` finds those above an earlier checkpoint with a ``range`` query on ``_seq_no``, shard
  by shard. Deletions leave nothing to find: a reembed compares the two indices' documents at the end.
- **The write block** (:func:`block_writes`): ``PUT <index>/_block/write`` refuses new writes and returns
  once the writes in flight are done, so the index stands still while the last changes are copied and the
  alias moves. Our writers (ingest, deletes) **hold** a write refused by that block and send it again —
  through the alias, which by then names the new index — for up to :data:`WRITE_BLOCK_HOLD_S`
  (:func:`write_blocked`). Other programs writing to the index directly get Elasticsearch's 403 meanwhile.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

from .._transport.backend import Backend

__all__ = [
    "WRITE_BLOCK_HOLD_S",
    "Checkpoint",
    "block_writes",
    "changed_since",
    "checkpoint",
    "held_while_blocked",
    "unblock_writes",
    "write_blocked",
    "writes_blocked",
]

#: shard number -> its global checkpoint (-1: no operation yet).
Checkpoint = dict[int, int]
#: How long a writer holds a write refused by a reembed's block before it reports it failed. The block lasts
#: while the last changes are embedded and the alias moves: usually well under a second, a few seconds when
#: writes came faster than the new model embeds. A reembed that died holding it leaves the block in place
#: until the next reembed lifts it.
WRITE_BLOCK_HOLD_S = 60.0
#: How Elasticsearch names the block ``_block/write`` sets ("index [x] blocked by: [FORBIDDEN/8/index write
#: (api)];"): not the flood-stage disk block, which a reembed never sets and a writer must not wait for.
_WRITE_BLOCK = "index write (api)"


def write_blocked(item: Mapping[str, Any]) -> bool:
    """A bulk item (or error body) refused by the write block a reembed sets while it moves the alias."""
    error = item.get("error")
    return (
        isinstance(error, Mapping)
        and error.get("type") == "cluster_block_exception"
        and _WRITE_BLOCK in str(error.get("reason", ""))
    )


A = TypeVar("A")


async def held_while_blocked(
    send: Callable[[list[A]], Awaitable[list[tuple[bool, dict[str, Any]]]]],
    actions: Sequence[A],
    id_of: Callable[[A], str],
    *,
    still_fits: Callable[[], Awaitable[dict[str, Any] | None]] | None = None,
) -> list[tuple[bool, dict[str, Any]]]:
    """``send(actions)`` (one bulk request: ``(ok, item)`` per action, the item naming its ``_id``); the actions
    refused by a reembed's write block are sent again (after 0.1 s, doubling to 1 s) until they are taken or
    :data:`WRITE_BLOCK_HOLD_S` has passed — then their refusal is returned as it came. ``still_fits``, asked
    before each resend, may refuse it (an error body: the alias moved to an index these writes do not fit,
    e.g. of another embedding model); the held actions then fail with it."""
    out: list[tuple[bool, dict[str, Any]]] = []
    pending = list(actions)
    give_up = time.monotonic() + WRITE_BLOCK_HOLD_S
    delay = 0.1
    while pending:
        by_id = {id_of(a): a for a in pending}
        pending = []
        for ok, item in await send(list(by_id.values())):
            if not ok and write_blocked(item) and time.monotonic() < give_up and str(item.get("_id")) in by_id:
                pending.append(by_id[str(item.get("_id"))])
            else:
                out.append((ok, item))
        if pending:
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)
            refusal = await still_fits() if still_fits is not None else None
            if refusal is not None:
                out += [(False, {"_id": id_of(a), **refusal}) for a in pending]
                return out
    return out


async def checkpoint(b: Backend, index: str) -> Checkpoint:
    """Each shard's global checkpoint (read from its primary)."""
    resp = await b.es_call(
        lambda: b.es.indices.stats(
            index=index,
            level="shards",
            filter_path=["indices.*.shards.*.routing.primary", "indices.*.shards.*.seq_no.global_checkpoint"],
        )
    )
    shards = next(iter(resp.body["indices"].values()))["shards"]
    out: Checkpoint = {}
    for shard, copies in shards.items():
        primary = next((c for c in copies if c["routing"]["primary"]), copies[0])
        out[int(shard)] = int(primary["seq_no"]["global_checkpoint"])
    return out


async def changed_since(
    b: Backend, index: str, since: Checkpoint, until: Checkpoint, *, size: int
) -> AsyncIterator[list[tuple[str, dict[str, Any]]]]:
    """The documents of ``index`` (id, ``_source`` without vectors) whose last write is above ``since`` and at
    most ``until`` on their shard, a page at a time. Refresh the index after reading ``until``."""
    for shard, upper in sorted(until.items()):
        lower = since.get(shard, -1)
        after: list[Any] | None = None
        while upper > lower:
            body: dict[str, Any] = {
                "size": size,
                "query": {"range": {"_seq_no": {"gt": lower, "lte": upper}}},
                "sort": [{"_seq_no": "asc"}],
                "_source": {"excludes": ["embedding", "passages"]},
                "track_total_hits": False,
            }
            if after is not None:
                body["search_after"] = after
            preference = f"_shards:{shard}"
            resp = await b.es_call(
                lambda body=body, preference=preference: b.es.search(  # type: ignore[misc]
                    index=index, preference=preference, **body
                )
            )
            hits = resp.body["hits"]["hits"]
            if hits:
                yield [(str(h["_id"]), dict(h.get("_source") or {})) for h in hits]
            if len(hits) < size:
                break
            after = hits[-1]["sort"]


async def block_writes(b: Backend, index: str) -> None:
    """Refuse new writes to ``index``; returns once the writes in flight are done."""
    await b.es_call(lambda: b.es.indices.add_block(index=index, block="write"))


async def unblock_writes(b: Backend, index: str) -> None:
    """Lift the write block (the setting back to its default)."""
    await b.es_call(lambda: b.es.indices.put_settings(index=index, settings={"index.blocks.write": None}))


async def writes_blocked(b: Backend, index: str) -> bool:
    """Whether ``index`` has the write block set."""
    resp = await b.es_call(
        lambda: b.es.indices.get_settings(index=index, name="index.blocks.write", flat_settings=True)
    )
    found: dict[str, Any] = next(iter(resp.body.values()), {})
    return str(found.get("settings", {}).get("index.blocks.write", "false")).lower() == "true"
