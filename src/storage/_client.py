"""``SearchClient``: the thin I/O shell around the pure cores (filters, query builders, fusion)."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal, Self, TypeVar, cast, get_args

from elasticsearch import AsyncElasticsearch
from elasticsearch.helpers import async_streaming_bulk
from pydantic import ValidationError

from embeddings import (
    Embedder,
    EmbeddingConfigError,
    EmbeddingError,
    InvalidEmbedding,
    Vector,
    create_embedder,
)

from ._errors import (
    ClientClosed,
    ConfigurationError,
    DimensionMismatch,
    ElasticsearchNotConfigured,
    IndexNotFound,
    InvalidDocument,
    InvalidQuery,
    SearchError,
    SearchFailed,
)
from ._errors_map import error_type as _error_type
from ._errors_map import map_embedding_error, map_es_error, timeout_error
from ._filters import FilterInput, Term, parse_filters, to_es_filters
from ._fusion import FusionMethod, LegHit, fuse
from ._logging import event, get_correlation_id, query_hash
from ._mapping import index_body, next_index_name, versioned_index_name
from ._models import (
    Document,
    FailedDocument,
    IndexProgress,
    IndexReport,
    Leg,
    LegReport,
    SearchHit,
    SearchMode,
    SearchResponse,
)
from ._queries import bm25_request, knn_request
from ._resilience import Resilience, ResiliencePolicy
from ._settings import SearchSettings
from ._text import clean_query
from ._tracing import AttrValue, mark_error, span

__all__ = ["ProgressCallback", "SearchClient"]

ProgressCallback = Callable[[IndexProgress], None]
T = TypeVar("T")
_MODES: tuple[str, ...] = get_args(SearchMode)
_FUSIONS: tuple[str, ...] = get_args(FusionMethod)
_INDEXING_CONCURRENCY_QUEUE = 2  # embedded batches waiting for bulk: bounds memory, keeps both busy


@dataclass
class _LegOutcome:
    leg: Leg
    hits: list[dict[str, Any]] = field(default_factory=list)
    error: SearchError | None = None
    latency_ms: float = 0.0
    took_ms: int | None = None
    embed_ms: float | None = None
    #: What the leg was waiting on (for a timeout's error): "elasticsearch" or "embeddings".
    waiting_on: Literal["elasticsearch", "embeddings"] = "elasticsearch"


class SearchClient:
    """Hybrid search over one Elasticsearch alias: BM25 ∥ kNN, fused in the client.

    Lifecycle is explicit: ``async with SearchClient.from_settings() as client`` (or ``await
    client.aclose()``). A closed client raises :class:`ClientClosed`.
    """

    def __init__(
        self,
        es: AsyncElasticsearch,
        embedder: Embedder,
        settings: SearchSettings | None = None,
        *,
        owns_clients: bool = True,
        es_policy: ResiliencePolicy | None = None,
        embeddings_policy: ResiliencePolicy | None = None,
    ) -> None:
        self._es = es
        self._embedder = embedder
        self._settings = settings if settings is not None else SearchSettings()
        self._owns = owns_clients
        self._closed = False
        self._checked_index: str | None = None
        self._es_resilience = Resilience("elasticsearch", es_policy or self._settings.es_policy())
        self._embed_resilience = Resilience("embeddings", embeddings_policy or self._settings.embeddings_policy())

    # -- construction and lifecycle -------------------------------------------------------------------

    @classmethod
    def from_settings(cls, settings: SearchSettings | None = None, *, embedder: Embedder | None = None) -> SearchClient:
        """A client from ``ES_*`` (and ``EMBEDDINGS_*``) environment variables, or the settings given."""
        s = settings if settings is not None else SearchSettings()
        hosts = s.hosts()
        if not hosts:
            raise ElasticsearchNotConfigured()
        auth: dict[str, Any] = {"ca_certs": s.ca_certs} if s.ca_certs else {}
        if s.api_key is not None:
            auth["api_key"] = s.api_key.get_secret_value()
        elif s.username is not None:
            auth["basic_auth"] = (s.username, s.password.get_secret_value() if s.password else "")
        es = AsyncElasticsearch(
            hosts,
            request_timeout=s.request_timeout_s,
            # One retry layer only (ours). The transport keeps node failover for multi-node clusters and
            # never retries statuses by itself (it would, immediately and without backoff).
            max_retries=max(len(hosts) - 1, 0),
            retry_on_status=(),
            retry_on_timeout=False,
            verify_certs=s.verify_certs,
            **auth,
        )
        try:
            emb = embedder if embedder is not None else create_embedder()
        except EmbeddingConfigError as exc:
            raise ConfigurationError(str(exc)) from exc
        return cls(es, emb, s)

    async def __aenter__(self) -> Self:
        self._check_open()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the Elasticsearch connection pool and the embedder. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._es_resilience.close()
        self._embed_resilience.close()
        if self._owns:
            try:
                await self._es.close()
            finally:
                await self._embedder.aclose()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def settings(self) -> SearchSettings:
        return self._settings

    @property
    def embedder(self) -> Embedder:
        return self._embedder

    @property
    def resilience(self) -> dict[str, Resilience]:
        """The per-dependency stacks (breaker state, counters)."""
        return {"elasticsearch": self._es_resilience, "embeddings": self._embed_resilience}

    @property
    def index(self) -> str:
        """The alias searched and written."""
        return self._settings.index

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosed("the SearchClient is closed")

    # -- Elasticsearch calls (one place, so the resilience layer wraps them all) ------------------------

    async def _es_call(
        self,
        op: Callable[[], Awaitable[T]],
        *,
        deadline_s: float | None = None,
        attempt_timeout_s: float | None = None,
    ) -> T:
        """Every Elasticsearch request goes through here: error mapping inside the resilience stack."""
        self._check_open()

        async def attempt() -> T:
            try:
                return await op()
            except SearchError:
                raise
            except Exception as exc:
                raise map_es_error(exc) from exc

        return await self._es_resilience.call(attempt, deadline_s=deadline_s, attempt_timeout_s=attempt_timeout_s)

    async def _embed_call(
        self,
        op: Callable[[], Awaitable[T]],
        *,
        kind: Literal["query", "documents"],
        count: int,
        deadline_s: float | None = None,
        attempt_timeout_s: float | None = None,
    ) -> T:
        """Every embedding call goes through here: its own stack, so one breaker never blocks the other."""
        self._check_open()

        async def attempt() -> T:
            try:
                return await op()
            except EmbeddingError as exc:
                raise map_embedding_error(exc) from exc

        attrs: dict[str, AttrValue] = {
            "embeddings.kind": kind,
            "embeddings.count": count,
            "embeddings.model": self._embedder.model_id,
        }
        with span("hybrid_search.embed", attrs):
            return await self._embed_resilience.call(
                attempt, deadline_s=deadline_s, attempt_timeout_s=attempt_timeout_s
            )

    async def _embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        # A batch of documents may legitimately take longer than one query: half a second per text on top.
        budget = self._settings.embeddings_timeout_s + 0.5 * len(texts)
        return await self._embed_call(
            lambda: self._embedder.embed_documents(texts),
            kind="documents",
            count=len(texts),
            deadline_s=budget * 2,
            attempt_timeout_s=budget,
        )

    async def _embed_query(self, text: str, *, deadline_s: float | None = None) -> Vector:
        return await self._embed_call(
            lambda: self._embedder.embed_query(text), kind="query", count=1, deadline_s=deadline_s
        )

    # -- index management ------------------------------------------------------------------------------

    async def ensure_index(self) -> str:
        """Create the alias and its first versioned index if missing; check an existing one fits.

        Idempotent and safe to call concurrently. Returns the concrete (write) index. Raises
        :class:`DimensionMismatch` if the index was built for other vectors than the embedder's.
        """
        self._check_open()
        await self._probe_embedder()
        alias = self.index
        existing = await self._get_index(alias)
        if existing is None:
            name = versioned_index_name(alias, 1)
            body = self._index_body()
            resp = await self._es_call(
                lambda: self._es.options(ignore_status=400).indices.create(
                    index=name, aliases={alias: {"is_write_index": True}}, **body
                )
            )
            if resp.meta.status == 400 and _error_type(resp.body) != "resource_already_exists_exception":
                raise ConfigurationError(f"could not create index {name}: {_error_reason(resp.body)}")
            existing = await self._get_index(alias)
            if existing is None:  # pragma: no cover - deleted between our calls
                raise IndexNotFound(f"index {name} vanished right after creation")
        write_index = self._check_existing(alias, existing)
        self._checked_index = write_index
        event(20, "index ready", "index.ensure", {"index.alias": alias, "index.name": write_index})
        return write_index

    async def create_index_version(self) -> str:
        """Create the next versioned index (``<alias>-000002``...) for the current embedder, *not* aliased.

        Index into it with ``index_documents(docs, index=name)``, then :meth:`promote_index` swaps the alias
        atomically: searches never see a half-built index (zero-downtime reindex for a new model).
        """
        self._check_open()
        await self._probe_embedder()
        resp = await self._es_call(
            lambda: self._es.options(ignore_status=404).indices.get(index=f"{self.index}-*", expand_wildcards="all")
        )
        names = list(resp.body) if resp.meta.status == 200 else []
        name = next_index_name(self.index, names)
        await self._es_call(lambda: self._es.indices.create(index=name, **self._index_body()))
        return name

    async def promote_index(self, name: str, *, delete_old: bool = False) -> None:
        """Point the alias at ``name`` (atomically) and make it the write index."""
        self._check_open()
        alias = self.index
        current = await self._get_index(alias)
        actions: list[dict[str, Any]] = [{"add": {"index": name, "alias": alias, "is_write_index": True}}]
        old = [n for n in (current or {}) if n != name]
        actions += [{"remove": {"index": n, "alias": alias}} for n in old]
        await self._es_call(lambda: self._es.indices.update_aliases(actions=actions))
        if delete_old and old:
            await self._es_call(lambda: self._es.indices.delete(index=",".join(old)))
        self._checked_index = None

    async def delete_index(self) -> None:
        """Delete the alias and every index behind it (tests, demos)."""
        self._check_open()
        current = await self._get_index(self.index)
        if current:
            await self._es_call(lambda: self._es.indices.delete(index=",".join(current)))
        self._checked_index = None

    async def refresh(self) -> None:
        """Make everything indexed so far searchable now."""
        await self._es_call(lambda: self._es.indices.refresh(index=self.index))

    async def count(self, *, filters: FilterInput = None) -> int:
        clauses = to_es_filters(parse_filters(filters))
        resp = await self._es_call(lambda: self._es.count(index=self.index, query={"bool": {"filter": clauses}}))
        return int(resp.body["count"])

    async def get_document(self, doc_id: str) -> dict[str, Any] | None:
        """The stored ``_source`` of one document (without its vector), or None."""
        resp = await self._es_call(
            lambda: self._es.options(ignore_status=404).get(index=self.index, id=doc_id, source_excludes=["embedding"])
        )
        if resp.meta.status == 404:
            if _error_type(resp.body) == "index_not_found_exception":
                raise IndexNotFound(f"index {self.index!r} does not exist; call ensure_index()")
            return None
        return cast(dict[str, Any], resp.body.get("_source", {}))

    async def _probe_embedder(self) -> None:
        try:
            await self._embedder.probe()
        except EmbeddingConfigError as exc:
            raise ConfigurationError(str(exc)) from exc
        except EmbeddingError as exc:
            raise map_embedding_error(exc) from exc

    def _index_body(self) -> dict[str, Any]:
        return index_body(
            dimensions=self._embedder.dimensions,
            normalized=self._embedder.normalized,
            model_id=self._embedder.model_id,
            analyzer=self._settings.analyzer,
        )

    async def _get_index(self, name: str) -> dict[str, Any] | None:
        resp = await self._es_call(lambda: self._es.options(ignore_status=404).indices.get(index=name))
        if resp.meta.status == 404:
            return None
        return dict(resp.body)

    def _check_existing(self, alias: str, indices: Mapping[str, Any]) -> str:
        write_index = None
        for name, info in indices.items():
            meta = info.get("mappings", {}).get("_meta", {}).get("embedding", {})
            vector = info.get("mappings", {}).get("properties", {}).get("embedding", {})
            dims = meta.get("dimensions", vector.get("dims"))
            if dims is None:
                raise DimensionMismatch(f"index {name} has no 'embedding' vector field; it was not created by us")
            if int(dims) != self._embedder.dimensions:
                raise DimensionMismatch(
                    f"index {name} holds {dims}-dim vectors but the embedder {self._embedder.model_id!r} "
                    f"produces {self._embedder.dimensions}: use the model the index was built with, or build a "
                    "new index version (create_index_version, index_documents(index=...), promote_index)"
                )
            model = meta.get("model_id")
            if model is not None and model != self._embedder.model_id:
                raise DimensionMismatch(
                    f"index {name} was built with {model!r}, the embedder is {self._embedder.model_id!r}: "
                    "vectors of different models must never share an index"
                )
            alias_info = info.get("aliases", {}).get(alias, {})
            if name == alias or alias_info.get("is_write_index") or len(indices) == 1:
                write_index = name
        if write_index is None:
            raise ConfigurationError(f"alias {alias!r} points at several indices and none is the write index")
        return write_index

    # -- indexing --------------------------------------------------------------------------------------

    async def index_documents(
        self,
        documents: Iterable[Document | Mapping[str, Any]],
        *,
        refresh: bool = False,
        progress: ProgressCallback | None = None,
        index: str | None = None,
    ) -> IndexReport:
        """Embed (in batches) and bulk-index documents; embedding and bulk requests overlap.

        Every document is validated before anything is sent (:class:`InvalidDocument` names the first bad
        one). Every unique id submitted ends up in exactly one of ``report.indexed`` / ``report.failed``;
        a document whose embedding failed is reported and never indexed without its vector.
        ``refresh=True`` waits until the documents are searchable.
        """
        self._check_open()
        started = time.perf_counter()
        docs, duplicates = _coerce_documents(documents)
        if self._checked_index is None and index is None:
            await self.ensure_index()
        target = index or self.index
        total = len(docs)
        indexed: list[str] = []
        failed: list[FailedDocument] = []
        embedded = 0

        def report_progress() -> None:
            if progress is not None:
                progress(IndexProgress(total=total, embedded=embedded, indexed=len(indexed), failed=len(failed)))

        queue: asyncio.Queue[list[tuple[Document, Vector]] | None] = asyncio.Queue(_INDEXING_CONCURRENCY_QUEUE)

        async def produce() -> None:
            nonlocal embedded
            try:
                size = self._settings.embed_batch_size
                for start in range(0, total, size):
                    batch = docs[start : start + size]
                    ok, bad = await self._embed_batch_isolating(batch)
                    failed.extend(bad)
                    embedded += len(batch)
                    report_progress()
                    if ok:
                        await queue.put(ok)
            finally:
                await queue.put(None)

        async def consume() -> None:
            while (item := await queue.get()) is not None:
                actions = [
                    {
                        "_op_type": "index",
                        "_index": target,
                        "_id": doc.id,
                        "_source": {**doc.to_source(), "embedding": vector},
                    }
                    for doc, vector in item
                ]
                try:
                    results = await self._es_call(
                        functools.partial(self._bulk, actions),
                        deadline_s=self._settings.bulk_timeout_s * 2,
                        attempt_timeout_s=self._settings.bulk_timeout_s,
                    )
                except SearchError as exc:
                    # The whole batch failed after retries (or fast, breaker open): report it, go on.
                    for doc, _ in item:
                        failed.append(
                            FailedDocument(
                                id=doc.id,
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
        for doc in docs:  # defensive: every id is accounted for, whatever happened above
            if doc.id not in accounted:
                failed.append(FailedDocument(id=doc.id, reason="not_sent", detail="bulk indexing stopped"))
        if refresh and indexed:
            await self._es_call(lambda: self._es.indices.refresh(index=target))
        report_progress()
        report = IndexReport(
            index=target,
            indexed=indexed,
            failed=failed,
            duplicates=duplicates,
            seconds=time.perf_counter() - started,
        )
        event(
            20 if report.ok else 30,
            "documents indexed",
            "index.documents",
            {
                "index.name": target,
                "index.submitted": total,
                "index.indexed": len(indexed),
                "index.failed": len(failed),
                "event.duration": int(report.seconds * 1e9),
            },
        )
        return report

    async def _bulk(self, actions: list[dict[str, Any]]) -> list[tuple[bool, dict[str, Any]]]:
        """One attempt at bulk-indexing ``actions``: per-item 429s are retried inside (with backoff); a
        request-level error raises (and the resilience stack retries the batch: ids make it idempotent)."""
        es = self._es.options(request_timeout=self._settings.bulk_timeout_s)
        out: list[tuple[bool, dict[str, Any]]] = []
        async for ok, item in async_streaming_bulk(
            es,
            actions,
            chunk_size=self._settings.bulk_chunk_size,
            max_chunk_bytes=self._settings.bulk_max_bytes,
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
        self, batch: list[Document]
    ) -> tuple[list[tuple[Document, Vector]], list[FailedDocument]]:
        """Embed a batch; if the answer is invalid, embed one by one so only the bad documents fail."""
        try:
            vectors = await self._embed_documents([d.embedding_text() for d in batch])
            return list(zip(batch, vectors, strict=True)), []
        except SearchError as exc:
            cause = exc.__cause__
            if not isinstance(cause, InvalidEmbedding) or len(batch) == 1:
                return [], [_embedding_failure(d, exc) for d in batch]
        ok: list[tuple[Document, Vector]] = []
        bad: list[FailedDocument] = []
        for doc in batch:
            try:
                ok.append((doc, (await self._embed_documents([doc.embedding_text()]))[0]))
            except SearchError as exc:
                bad.append(_embedding_failure(doc, exc))
        return ok, bad

    # -- search ----------------------------------------------------------------------------------------

    async def search(
        self,
        query: str,
        *,
        mode: SearchMode = "hybrid",
        filters: FilterInput = None,
        limit: int = 10,
        offset: int = 0,
        tenant_id: str | None = None,
        fusion: FusionMethod | None = None,
        rrf_k: int | None = None,
        weights: Mapping[str, float] | None = None,
        window: int | None = None,
        num_candidates: int | None = None,
        similarity: float | None = None,
        strict: bool = False,
        highlight: bool = True,
        index: str | None = None,
    ) -> SearchResponse:
        """Search ``query`` with BM25, kNN or both (in parallel), fused in the client.

        Validation happens before any request: an empty query, an unknown filter field, a bad mode or
        ``offset + limit`` beyond the fusion ``window`` raise :class:`InvalidQuery`.
        In hybrid mode a failed leg degrades the result (``degraded=True``) unless ``strict=True``;
        if every leg fails, :class:`SearchFailed` carries each leg's typed error.
        """
        self._check_open()
        started = time.perf_counter()
        s = self._settings
        if mode not in _MODES:
            raise InvalidQuery(f"mode must be one of {_MODES}, got {mode!r}")
        method: FusionMethod = fusion or s.fusion
        if method not in _FUSIONS:
            raise InvalidQuery(f"fusion must be one of {_FUSIONS}, got {method!r}")
        win = window if window is not None else s.window
        k = rrf_k if rrf_k is not None else s.rrf_k
        candidates = num_candidates if num_candidates is not None else s.num_candidates
        if not 1 <= win <= 10_000:
            raise InvalidQuery("window must be between 1 and 10000")
        if k < 1:
            raise InvalidQuery("rrf_k must be >= 1")
        if limit < 1 or offset < 0:
            raise InvalidQuery("limit must be >= 1 and offset >= 0")
        if offset + limit > win:
            raise InvalidQuery(
                f"offset + limit = {offset + limit} is beyond the fusion window ({win}); pass a larger window="
            )
        if not win <= candidates <= 10_000:
            candidates = min(max(candidates, win), 10_000)
        leg_weights = {"bm25": s.bm25_weight, "knn": s.knn_weight}
        if weights:
            unknown = set(weights) - set(leg_weights)
            if unknown:
                raise InvalidQuery(f"weights for unknown legs: {sorted(unknown)}; legs are bm25 and knn")
            leg_weights.update(weights)
        if any(not (w >= 0) or w == float("inf") for w in leg_weights.values()):
            raise InvalidQuery("weights must be finite numbers >= 0")
        cleaned = clean_query(query)
        parsed = parse_filters(filters)
        if tenant_id is not None:
            parsed.append(Term("tenant_id", tenant_id))
        clauses = to_es_filters(parsed)
        target = index or self.index

        attrs: dict[str, AttrValue] = {
            "search.mode": mode,
            "search.query_hash": query_hash(cleaned.text),
            "search.fusion.method": method,
            "search.window": win,
            "search.limit": limit,
        }
        with span("hybrid_search.search", attrs) as search_span:
            legs: list[Leg] = ["bm25", "knn"] if mode == "hybrid" else [mode]
            coros: list[Awaitable[_LegOutcome]] = []
            if "bm25" in legs:
                body = bm25_request(cleaned.text, filters=clauses, size=win, highlight=highlight)
                bm25 = _LegOutcome("bm25")
                coros.append(self._run_leg(bm25, self._bm25_leg(bm25, target, body)))
            if "knn" in legs:
                knn = _LegOutcome("knn")
                coros.append(
                    self._run_leg(knn, self._knn_leg(knn, target, cleaned.text, clauses, win, candidates, similarity))
                )
            outcomes: dict[str, _LegOutcome] = {o.leg: o for o in await asyncio.gather(*coros)}

            failed: dict[str, SearchError] = {leg: o.error for leg, o in outcomes.items() if o.error is not None}
            if failed and (strict or len(failed) == len(outcomes)):
                self._log_search(cleaned.text, mode, outcomes, None, started, error=next(iter(failed.values())))
                errors = list(failed.values())
                if all(isinstance(e, IndexNotFound) for e in errors):
                    raise errors[0]
                if closed := [e for e in errors if isinstance(e, ClientClosed)]:
                    raise closed[0]  # closing is the caller's act, not a dependency failure
                raise SearchFailed(
                    "; ".join(f"{leg} leg failed: {err}" for leg, err in failed.items()), leg_errors=failed
                )
            ok_legs = {leg: o for leg, o in outcomes.items() if o.error is None}
            fused = fuse(
                {
                    leg: [LegHit(str(h["_id"]), float(h.get("_score") or 0.0)) for h in o.hits]
                    for leg, o in ok_legs.items()
                },
                method=method,
                k=k,
                weights={leg: leg_weights[leg] for leg in ok_legs},
            )
            sources: dict[str, dict[str, Any]] = {}
            highlights: dict[str, dict[str, list[str]]] = {}
            for o in ok_legs.values():
                for h in o.hits:
                    sources.setdefault(str(h["_id"]), h.get("_source") or {})
                    if "highlight" in h:
                        highlights[str(h["_id"])] = h["highlight"]
            hits = [
                SearchHit(
                    id=f.id,
                    score=f.score,
                    normalized_score=f.normalized_score,
                    ranks=dict(f.ranks),
                    leg_scores=dict(f.leg_scores),
                    source=sources.get(f.id, {}),
                    highlights=highlights.get(f.id, {}),
                )
                for f in fused[offset : offset + limit]
            ]
            overlap = 0
            if len(ok_legs) == 2:
                overlap = len(
                    {str(h["_id"]) for h in ok_legs["bm25"].hits} & {str(h["_id"]) for h in ok_legs["knn"].hits}
                )
            first_error = next(iter(failed.values()), None)
            response = SearchResponse(
                query=cleaned.text,
                mode=mode,
                hits=hits,
                total_fused=len(fused),
                offset=offset,
                limit=limit,
                legs={leg: _leg_report(o) for leg, o in outcomes.items()},
                overlap=overlap,
                fusion={
                    "method": method,
                    "k": k,
                    "weights": {leg: leg_weights[leg] for leg in legs},
                    "window": win,
                    "num_candidates": candidates,
                },
                degraded=bool(failed),
                legs_failed=sorted(failed),
                degraded_reason=first_error.reason if first_error else None,
                query_adjustments=cleaned.adjustments,
                latency_ms=(time.perf_counter() - started) * 1000,
                correlation_id=get_correlation_id(),
            )
            self._log_search(cleaned.text, mode, outcomes, response, started, original_length=cleaned.original_length)
            search_span.set_attribute("search.hits", len(hits))
            search_span.set_attribute("search.degraded", response.degraded)
            if response.degraded:
                search_span.set_attribute("search.legs_failed", response.legs_failed)
                search_span.set_attribute("search.degraded_reason", response.degraded_reason or "")
            return response

    async def search_tool(
        self,
        query: str,
        search_type: SearchMode = "hybrid",
        indices: Sequence[str] | str | None = None,
        ticker: str | None = None,
        filters: FilterInput = None,
        limit: int = 10,
    ) -> SearchResponse:
        """The seed systems' call shape, delegating to :meth:`search`."""
        merged: FilterInput = filters
        if ticker is not None:
            if filters is not None and not isinstance(filters, Mapping):
                raise InvalidQuery("pass ticker inside filters when filters is a list of Filter objects")
            merged = {**(filters or {}), "ticker": ticker}
        index = indices if isinstance(indices, str) or indices is None else ",".join(indices)
        return await self.search(query, mode=search_type, filters=merged, limit=limit, index=index)

    async def _run_leg(self, outcome: _LegOutcome, work: Awaitable[None]) -> _LegOutcome:
        """Run one leg within its budget; its failure becomes data (``outcome.error``), never an exception."""
        started = time.perf_counter()
        with span(f"hybrid_search.leg.{outcome.leg}", {"search.leg": outcome.leg}) as leg_span:
            try:
                async with asyncio.timeout(self._settings.leg_timeout_s):
                    await work
            except TimeoutError:
                outcome.hits = []
                outcome.error = timeout_error(outcome.leg, outcome.waiting_on, self._settings.leg_timeout_s)
            except SearchError as exc:
                outcome.hits = []
                outcome.error = exc
            outcome.latency_ms = (time.perf_counter() - started) * 1000
            leg_span.set_attribute("search.leg.hits", len(outcome.hits))
            if outcome.error is not None:
                mark_error(leg_span, outcome.error, reason=outcome.error.reason)
        return outcome

    async def _bm25_leg(self, out: _LegOutcome, index: str, body: dict[str, Any]) -> None:
        es = self._es.options(request_timeout=self._settings.leg_timeout_s)
        resp = await self._es_call(lambda: es.search(index=index, **body), deadline_s=self._settings.leg_timeout_s)
        out.hits, out.took_ms = list(resp.body["hits"]["hits"]), resp.body.get("took")

    async def _knn_leg(
        self,
        out: _LegOutcome,
        index: str,
        text: str,
        clauses: list[dict[str, Any]],
        k: int,
        num_candidates: int,
        similarity: float | None,
    ) -> None:
        t0 = time.perf_counter()
        budget = self._settings.leg_timeout_s
        out.waiting_on = "embeddings"
        vector = await self._embed_query(text, deadline_s=budget)
        out.embed_ms = (time.perf_counter() - t0) * 1000
        out.waiting_on = "elasticsearch"
        body = knn_request(vector, filters=clauses, k=k, num_candidates=num_candidates, similarity=similarity)
        es = self._es.options(request_timeout=budget)
        remaining = max(budget - (time.perf_counter() - t0), 0.001)
        resp = await self._es_call(lambda: es.search(index=index, **body), deadline_s=remaining)
        out.hits, out.took_ms = list(resp.body["hits"]["hits"]), resp.body.get("took")

    def _log_search(
        self,
        text: str,
        mode: str,
        outcomes: Mapping[str, _LegOutcome],
        response: SearchResponse | None,
        started: float,
        *,
        error: SearchError | None = None,
        original_length: int | None = None,
    ) -> None:
        fields: dict[str, Any] = {
            "search.mode": mode,
            "search.query_hash": query_hash(text),
            "search.query_length": len(text),
            "event.duration": int((time.perf_counter() - started) * 1e9),
            "event.outcome": "failure" if error else "success",
        }
        for leg, o in outcomes.items():
            fields[f"search.legs.{leg}.latency_ms"] = round(o.latency_ms, 2)
            fields[f"search.legs.{leg}.hits"] = len(o.hits)
            if o.error is not None:
                fields[f"search.legs.{leg}.reason"] = o.error.reason
        if response is not None:
            fields["search.overlap"] = response.overlap
            fields["search.fusion.method"] = response.fusion["method"]
            fields["search.fusion.k"] = response.fusion["k"]
            fields["search.hits"] = len(response.hits)
            fields["search.degraded"] = response.degraded
            if response.degraded:
                fields["search.legs_failed"] = response.legs_failed
                fields["search.degraded_reason"] = response.degraded_reason
            if "truncated" in response.query_adjustments:
                fields["search.query_truncated_from"] = original_length
            if response.query_adjustments:
                fields["search.query_adjustments"] = response.query_adjustments
        if error is not None:
            fields["error.type"] = type(error).__name__
            fields["error.message"] = str(error)
        level = 40 if error else (30 if response is not None and response.degraded else 20)
        event(level, "search", "search", fields)


def _coerce_documents(documents: Iterable[Document | Mapping[str, Any]]) -> tuple[list[Document], list[str]]:
    if isinstance(documents, Document | Mapping | str | bytes):
        raise InvalidDocument("index_documents takes an iterable of documents, not a single one")
    unique: dict[str, Document] = {}
    duplicates: list[str] = []
    for position, item in enumerate(documents):
        if isinstance(item, Document):
            doc = item
        elif isinstance(item, Mapping):
            try:
                doc = Document.model_validate(item)
            except ValidationError as exc:
                raise InvalidDocument(f"document #{position} is invalid: {exc}", position=position) from None
        else:
            raise InvalidDocument(
                f"document #{position} is a {type(item).__name__}, not a Document or mapping",
                position=position,
            )
        if doc.id in unique:
            duplicates.append(doc.id)
            del unique[doc.id]  # the last occurrence wins, in its own position
        unique[doc.id] = doc
    return list(unique.values()), duplicates


def _embedding_failure(doc: Document, exc: SearchError) -> FailedDocument:
    cause = exc.__cause__ or exc
    return FailedDocument(id=doc.id, reason="embedding_failed", detail=f"{type(cause).__name__}: {cause}")


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


def _leg_report(o: _LegOutcome) -> LegReport:
    return LegReport(
        leg=o.leg,
        ok=o.error is None,
        hits=len(o.hits),
        latency_ms=round(o.latency_ms, 3),
        took_ms=o.took_ms,
        embed_ms=round(o.embed_ms, 3) if o.embed_ms is not None else None,
        reason=o.error.reason if o.error else None,
        error=f"{type(o.error).__name__}: {o.error}" if o.error else None,
    )


def _error_reason(body: Any) -> str:
    if isinstance(body, Mapping) and isinstance(body.get("error"), Mapping):
        return str(body["error"].get("reason", body["error"]))
    return str(body)
