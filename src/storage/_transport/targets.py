"""What a client knows about the indices it reads, kept so that a search pays a dict lookup for it.

- **The vectors of each concrete index**: its ``_meta.embedding`` (the model, the passage setting). A
  concrete index's vectors never change, so it is read once per index and kept for the client's life; the
  kNN leg checks the index it searched against the client's embedder with one lookup.
- **What a search of each target needs** (:class:`TargetInfo`): the fusion stored with it (``_meta.fusion``,
  written by ``tune(apply=True)``; see ``storage._fusion.setting``) and its layout (passages or one vector
  per document: what its kNN leg searches). Read when a client is entered (or first searches a target), then
  refreshed in the background once a minute, so a new tuning or a reembed's new version reaches running
  clients and a search never waits for it.

Every lookup is one attempt of at most :data:`METADATA_TIMEOUT_S`, **outside** the resilience stack: a
search never depends on it (a failed lookup keeps the last value and is tried again after
:data:`LOOKUP_RETRY_S`), and a struggling cluster must not see retries for it, nor its breaker count them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import time
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from cachetools import LRUCache
from elasticsearch import AsyncElasticsearch

from .._dsl.mapping import NESTED_LIMIT, index_meta, stored_passages, vectors_in_source
from .._dsl.queries import HIGHLIGHT_LIMIT
from .._errors import AccessDenied
from .._fusion.setting import FusionSetting, stored_setting
from .._observability.tracing import without_request_spans
from ..passages import AGREEMENT_MIN_DOCUMENTS, AGREEMENT_THRESHOLD, PassageSetting
from .translate import map_es_error

__all__ = [
    "CACHED_TARGETS",
    "FUSION_RECHECK_S",
    "LOOKUP_RETRY_S",
    "METADATA_TIMEOUT_S",
    "IndexMetadata",
    "TargetInfo",
    "target_info",
]

#: How long a client keeps the fusion stored with an index before it looks again (a search after that reads
#: the index's mapping once, in the background): a new ``tune --apply`` reaches running clients within this.
FUSION_RECHECK_S = 60.0
#: A lookup that failed (the search went on without it) is tried again after this: one lookup per few
#: seconds while Elasticsearch struggles, not one per search.
LOOKUP_RETRY_S = 5.0
#: A metadata lookup is one attempt of at most this long (entering a client waits for one, at most this).
METADATA_TIMEOUT_S = 2.0
#: Targets (and concrete indices) whose metadata a client keeps: far more than a service searches at once;
#: one more is a lookup, not an error.
CACHED_TARGETS = 256


@dataclass(frozen=True, slots=True)
class TargetInfo:
    """What a search of a target (an alias, or explicit indices) needs from its indices' ``_meta``."""

    #: The fusion setting stored with it (tuned), or None.
    fusion: FusionSetting | None = None
    #: Every index of the target has passages: its kNN leg searches them (else the head ``embedding``).
    passages: bool = False
    #: The passage setting its newest index was built with (what writes to it use), or None.
    passage_setting: PassageSetting | None = None
    #: Its newest index records each document's content hash (writes skip unchanged documents).
    content_hash: bool = False
    #: The mapped type of each ``metadata.<key>`` in any of its indices (what a facet may count).
    metadata_types: Mapping[str, str] = field(default_factory=dict)
    #: Every index of the target holds its passages' text (BM25 reads each passage; storage._dsl.queries).
    passage_text: bool = False
    #: Its newest index does (what writes to it give each passage).
    writes_passage_text: bool = False
    #: Every index of the target has each document's head vector indexed flat (``embedding``): one vector per
    #: document, or passages built since mapping version 4 (only long documents nested). False for an index
    #: read in passages built before (every vector nested, the head included).
    head_vectors: bool = True
    #: Its newest index is read in passages the old way: writes give every document a nested head.
    writes_nested_heads: bool = False
    #: Some document of the target has nested passages (one longer than the model's window), or it is not
    #: known. Where every head is flat and no document is long, a search sends the head-only requests.
    long_documents: bool = True
    #: The embedding model its newest index records (what writes to it must embed with), or None.
    model_id: str | None = None
    #: Every index of the target keeps its head vectors in ``_source`` (built before mapping version 2 / 5, or
    #: on a server before 8.17), so a stage that needs them reads them there; else from their doc values.
    vectors_in_source: bool = True
    #: The median agreement of its long documents' passages with their heads (``storage.passages.agreement``),
    #: or None (no long document measured: an index before mapping version 6, or none long yet).
    agreement: float | None = None
    #: How many long documents that median is of.
    agreement_documents: int = 0
    #: Its newest index records each long document's agreement (what writes to it give each one).
    writes_agreement: bool = False
    #: The smallest ``index.highlight.max_analyzed_offset`` of its indices: how far into a text the fetch's
    #: highlighter reads (``storage._dsl.queries.HIGHLIGHT_LIMIT`` where it is not known).
    highlight_limit: int = HIGHLIGHT_LIMIT
    #: Its newest index's ``index.mapping.nested_objects.limit``: the most passages a document written to it
    #: may have (a longer one is refused before it is embedded).
    nested_limit: int = NESTED_LIMIT

    @property
    def head_first(self) -> bool:
        """Its long documents agree with their heads: they are read head first (``storage.passages``)."""
        return (
            self.agreement is not None
            and self.agreement >= AGREEMENT_THRESHOLD
            and self.agreement_documents >= AGREEMENT_MIN_DOCUMENTS
        )

    @property
    def searches_passages(self) -> bool:
        """A search reads nested passages: the target has them and (with flat heads) some document is long."""
        return self.passages and (self.long_documents or not self.head_vectors)


def target_info(
    mappings: Mapping[str, Any],
    *,
    long_documents: bool = True,
    agreement: float | None = None,
    agreement_documents: int = 0,
) -> TargetInfo:
    """A get-index (or get-mapping: settings unknown) answer's :class:`TargetInfo` (``long_documents``,
    ``agreement``: what a look at the documents found, see :meth:`IndexMetadata.read_target`)."""
    if not mappings:
        return TargetInfo()
    newest = sorted(mappings)[-1]
    layouts = [_has_passages(info) for info in mappings.values()]
    embedding = index_meta(mappings, newest).get("embedding")
    setting = stored_passages(embedding)
    model = embedding.get("model_id") if isinstance(embedding, Mapping) else None
    props = mappings[newest].get("mappings", {}).get("properties", {}) if isinstance(mappings[newest], Mapping) else {}
    texts = [_has_passage_text(info) for info in mappings.values()]
    return TargetInfo(
        stored_setting(mappings),
        all(layouts),
        setting,
        "content_hash" in props,
        _metadata_types(mappings),
        passage_text=all(texts),
        writes_passage_text=_has_passage_text(mappings[newest]),
        head_vectors=all(_has_head_vector(info) for info in mappings.values()),
        writes_nested_heads=_has_passages(mappings[newest]) and not _has_head_vector(mappings[newest]),
        long_documents=long_documents,
        model_id=str(model) if model is not None else None,
        vectors_in_source=all(vectors_in_source(info) for info in mappings.values()),
        agreement=agreement,
        agreement_documents=agreement_documents,
        writes_agreement="passage_agreement" in props,
        highlight_limit=min(_index_setting(info, _HIGHLIGHT_LIMIT, HIGHLIGHT_LIMIT) for info in mappings.values()),
        nested_limit=_index_setting(mappings[newest], _NESTED_LIMIT, NESTED_LIMIT),
    )


def _agreements_recorded(mappings: Mapping[str, Any]) -> bool:
    """Every index of the target records its long documents' agreement (mapping version 6): a median over
    some of its indices only would decide for all of them."""
    return all(
        "passage_agreement" in (info.get("mappings", {}).get("properties", {}) if isinstance(info, Mapping) else {})
        for info in mappings.values()
    )


_HIGHLIGHT_LIMIT = ("highlight", "max_analyzed_offset")
_NESTED_LIMIT = ("mapping", "nested_objects", "limit")


def _index_setting(info: Any, path: tuple[str, ...], default: int) -> int:
    """One index's whole-number setting ``index.<path>`` in a get-index answer (``default``: Elasticsearch's,
    where the index does not set it, or the answer is a get-mapping's)."""
    value: Any = info.get("settings", {}).get("index", {}) if isinstance(info, Mapping) else {}
    for key in path:
        value = value.get(key) if isinstance(value, Mapping) else None
    try:
        return int(value) if value is not None else default
    except (TypeError, ValueError):
        return default


def _metadata_types(mappings: Mapping[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for info in mappings.values():
        props = info.get("mappings", {}).get("properties", {}) if isinstance(info, Mapping) else {}
        keys = props.get("metadata", {}).get("properties", {}) if isinstance(props, Mapping) else {}
        for key, spec in keys.items() if isinstance(keys, Mapping) else ():
            if isinstance(spec, Mapping) and "type" in spec:
                out.setdefault(str(key), str(spec["type"]))
    return out


def _has_passages(info: Any) -> bool:
    props = info.get("mappings", {}).get("properties", {}) if isinstance(info, Mapping) else {}
    return isinstance(props, Mapping) and props.get("passages", {}).get("type") == "nested"


def _has_head_vector(info: Any) -> bool:
    props = info.get("mappings", {}).get("properties", {}) if isinstance(info, Mapping) else {}
    embedding = props.get("embedding") if isinstance(props, Mapping) else None
    return isinstance(embedding, Mapping) and embedding.get("index", True) is not False


def _has_passage_text(info: Any) -> bool:
    props = info.get("mappings", {}).get("properties", {}) if isinstance(info, Mapping) else {}
    passages = props.get("passages", {}) if isinstance(props, Mapping) else {}
    return _has_passages(info) and "text" in (passages.get("properties") or {})


class IndexMetadata:
    """The per-client cache of indices' ``_meta`` (see the module docstring). No per-request state.
    ``assume_passages``: the layout a target is searched with while its mapping cannot be read (the layout
    this client creates)."""

    def __init__(self, es: AsyncElasticsearch, check_open: Callable[[], None], *, assume_passages: bool) -> None:
        self._es = es
        self._check_open = check_open
        self._unknown = TargetInfo(passages=assume_passages)
        #: Concrete index -> its ``_meta.embedding`` (None: not recorded, or not readable with these
        #: credentials, or a lookup that failed and will be tried again). Bounded: the least recently used
        #: go first (a service searching many indices keeps the ones it uses).
        self.embeddings: MutableMapping[str, dict[str, Any] | None] = LRUCache(CACHED_TARGETS)
        #: Search target -> (when to look again, what a search of it needs). Bounded likewise: the keys come
        #: from callers (``index=``), and a client lives as long as its process.
        self.targets: MutableMapping[str, tuple[float, TargetInfo]] = LRUCache(CACHED_TARGETS)
        self._refreshing: dict[str, asyncio.Task[TargetInfo]] = {}

    def close(self) -> None:
        """Stop any background lookup."""
        for task in list(self._refreshing.values()):
            task.cancel()

    @functools.cached_property
    def _client(self) -> AsyncElasticsearch:
        """The client for metadata a search can do without (made once): a short timeout, no retry."""
        return without_request_spans(self._es.options(request_timeout=METADATA_TIMEOUT_S, max_retries=0))

    async def _mappings(self, target: str) -> tuple[dict[str, Any] | None, bool]:
        """``GET <target>`` (its indices' aliases, mappings and settings): (the answer or None, whether a
        failure is lasting: no privilege, no such index)."""
        self._check_open()
        try:
            resp = await self._client.options(ignore_status=404).indices.get(index=target)
        except Exception as exc:
            return None, isinstance(map_es_error(exc), AccessDenied)
        if resp.meta.status != 200 or not isinstance(resp.body, dict):
            return None, resp.meta.status == 404
        return dict(resp.body), False

    # -- the vectors of a concrete index -----------------------------------------------------------------

    async def embedding(self, index: str) -> dict[str, Any] | None:
        """``index``'s ``_meta.embedding`` (looked up once, then a dict lookup). A lookup that fails skips the
        check, never the search: for good without the privilege to read it (``view_index_metadata``);
        otherwise the next search after :data:`LOOKUP_RETRY_S` tries again."""
        if index in self.embeddings:
            return self.embeddings[index]
        found, lasting = await self._mappings(index)
        if found is None and not lasting:
            self.embeddings[index] = None
            asyncio.get_running_loop().call_later(LOOKUP_RETRY_S, self.embeddings.pop, index, None)
            return None
        recorded = index_meta(found or {}, index).get("embedding")
        meta = dict(recorded) if isinstance(recorded, Mapping) else None
        self.embeddings[index] = meta
        return meta

    def forget_embedding(self, index: str) -> None:
        self.embeddings.pop(index, None)

    # -- what a search of a target needs ------------------------------------------------------------------

    async def read_target(self, target: str) -> TargetInfo:
        """Read what a search of ``target`` needs now, and keep it for :data:`FUSION_RECHECK_S` (a failed
        lookup keeps the last value for :data:`LOOKUP_RETRY_S`)."""
        cached = self.targets.get(target)
        found, lasting = await self._mappings(target)
        if found is None and not lasting:
            stale = cached[1] if cached is not None else self._unknown
            self.targets[target] = (time.monotonic() + LOOKUP_RETRY_S, stale)
            return stale
        info = target_info(found, **await self._long_documents(target, found)) if found else self._unknown
        self.targets[target] = (time.monotonic() + FUSION_RECHECK_S, info)
        return info

    async def _long_documents(self, target: str, mappings: Mapping[str, Any]) -> dict[str, Any]:
        """Whether ``target`` holds a document with nested passages (``long_documents``) and its long
        documents' median agreement (``agreement``, where its indices record it: mapping version 6): one
        ``size: 0`` search, asked only of a target whose heads are flat (mapping version 4 on, where only long
        documents are nested); without agreements to read, it stops at the first long document. Not known (a
        failed look): long documents, no agreement (the requests that find every document, in full)."""
        info = target_info(mappings)
        if not info.passages or not info.head_vectors:
            return {"long_documents": True}
        body: dict[str, Any] = {"size": 0, "track_total_hits": 1}
        if _agreements_recorded(mappings):
            body["aggs"] = {
                "agreement": {"percentiles": {"field": "passage_agreement", "percents": [50]}},
                "measured": {"value_count": {"field": "passage_agreement"}},
            }
        else:
            body["terminate_after"] = 1
        try:
            resp = await self._client.search(
                index=target, query={"nested": {"path": "passages", "query": {"match_all": {}}}}, **body
            )
        except Exception:
            return {"long_documents": True}
        total = resp.body.get("hits", {}).get("total", {})
        aggs = resp.body.get("aggregations") or {}
        median = (aggs.get("agreement") or {}).get("values", {}).get("50.0")
        measured = (aggs.get("measured") or {}).get("value")
        return {
            "long_documents": not isinstance(total, Mapping) or total.get("value", 1) != 0,
            "agreement": float(median) if isinstance(median, int | float) else None,
            "agreement_documents": int(measured) if isinstance(measured, int | float) else 0,
        }

    def saw_long_documents(self) -> None:
        """A write of this client is giving a target long documents (nested passages): every target known to
        have none is searched with its passages from now on (other clients see them at their next look, within
        :data:`FUSION_RECHECK_S`; until then they find those documents by their heads)."""
        for target, (when, info) in list(self.targets.items()):
            if not info.long_documents:
                self.targets[target] = (when, dataclasses.replace(info, long_documents=True))

    async def target(self, target: str) -> TargetInfo:
        """What a search of ``target`` needs, as a search asks: a dict lookup. Read (and waited for) once, when
        a client first searches a target it has not read (entering the client and ``ensure_index()`` read the
        alias's); then refreshed in the background once a minute."""
        cached = self.targets.get(target)
        if cached is None:
            return await self.read_target(target)
        if cached[0] <= time.monotonic():
            self._refresh(target)
        return cached[1]

    def remember(self, target: str, mappings: Mapping[str, Any], *, empty: bool = False) -> None:
        """Keep what ``mappings`` says (a get-index or get-mapping answer the caller has anyway); whether the
        target holds long documents stays what was last seen (``empty``: an index just created has none)."""
        cached = self.targets.get(target)
        long_documents = not empty and (cached is None or cached[1].long_documents)
        known = None if empty or cached is None else cached[1]
        self.targets[target] = (
            time.monotonic() + FUSION_RECHECK_S,
            target_info(
                mappings,
                long_documents=long_documents,
                agreement=known.agreement if known else None,
                agreement_documents=known.agreement_documents if known else 0,
            ),
        )

    def forget(self, target: str) -> None:
        self.targets.pop(target, None)

    def _refresh(self, target: str) -> None:
        """Look the target up again in the background (a search never waits for it); one at a time per target,
        cancelled when the client closes."""
        if target in self._refreshing:
            return
        try:
            self._check_open()
        except Exception:
            return
        task = asyncio.get_running_loop().create_task(self.read_target(target), name="storage-metadata-refresh")
        self._refreshing[target] = task
        task.add_done_callback(lambda done: self._lookup_done(target, done))

    def _lookup_done(self, target: str, task: asyncio.Task[TargetInfo]) -> None:
        self._refreshing.pop(target, None)
        if not task.cancelled():
            task.exception()  # retrieved: a client closing under a lookup is nothing to report
