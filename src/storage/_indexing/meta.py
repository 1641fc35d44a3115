"""What an index records about itself — its mapping's ``_meta``: the model and passage setting it was built
with, the fusion stored with it, a running bulk load, a reembed's state — changed one writer at a time.

Elasticsearch replaces ``_meta`` as a whole and offers no compare-and-set for it, so a change is a read, an
edit and a put, and two of them at once lose one (a fusion stored while a bulk load begins was gone when the
load's record was written back). Every ``_meta`` change of a client goes through :func:`change_meta`: one at
a time per client (:attr:`Backend.meta_writes`), each reading ``_meta`` afresh just before its put. Two
*processes* changing one index's ``_meta`` in the same round trip can still lose one of the two: the
server has nothing to make that safe.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .._dsl.mapping import index_meta
from .._errors import ConfigurationError
from .._transport.backend import Backend

__all__ = ["change_meta", "require_recorded", "set_meta"]

#: Given an index's current ``_meta``, the ``_meta`` to put, or None to leave it as it is.
Edit = Callable[[dict[str, Any]], dict[str, Any] | None]


async def change_meta(b: Backend, index: str, edit: Edit) -> dict[str, Any] | None:
    """Apply ``edit`` to ``index``'s ``_meta`` (read afresh, under the client's lock); what was put, or None
    when ``edit`` left it as it was."""
    async with b.meta_writes:
        resp = await b.es_call(lambda: b.es.indices.get_mapping(index=index))
        current = index_meta(resp.body, index)
        new = edit(dict(current))
        if new is None or new == current:
            return None
        await b.es_call(lambda: b.es.indices.put_mapping(index=index, meta=new))
        b.metadata.forget_embedding(index)
        return new


async def set_meta(b: Backend, index: str, updates: Mapping[str, Any], drop: tuple[str, ...] = ()) -> None:
    """Set top-level ``_meta`` keys of ``index`` and remove those in ``drop``, keeping every other key."""

    def edit(meta: dict[str, Any]) -> dict[str, Any]:
        for key in drop:
            meta.pop(key, None)
        return meta | dict(updates)

    await change_meta(b, index, edit)


def require_recorded(name: str, info: Mapping[str, Any]) -> None:
    """Refuse a write to the index ``name`` (``info``: its get-index entry) unless it records its model
    (``_meta.embedding``: an index this library made). A write would otherwise add to any other index with the
    fields Elasticsearch guesses: the vectors as an array of floats no kNN search reads, reported indexed."""
    if not isinstance(index_meta({name: info}, name).get("embedding"), Mapping):
        raise ConfigurationError(
            f"index {name} was not made by this library (its mapping records no embedding model): writing to it "
            "would leave Elasticsearch to guess its fields. Write to the client's alias, or to a version from "
            "client.indices.create_version()"
        )
