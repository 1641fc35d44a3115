"""Moving an index to another embedding model with no downtime, against the real Elasticsearch and the real
local models (an index built with all-MiniLM-L6-v2 meets a client configured with bge-small-en-v1.5)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest
from elasticsearch import AsyncElasticsearch

from embeddings import Embedder, HashingEmbedder, InvalidEmbedding, LocalEmbedder, Vector
from storage import Document, ModelMismatch, SearchClient, SearchSettings
from storage.types import IndexProgress

pytestmark = pytest.mark.slow

OLD, NEW = "all-MiniLM-L6-v2", "bge-small-en-v1.5"
TOPICS = ["revenue guidance", "cloud growth", "data center demand", "vehicle deliveries", "rainy weather"]
DOCS = [
    Document(id=f"d{i:03d}", title=f"Note {i} on {TOPICS[i % 5]}", text=f"Report {i}: {TOPICS[i % 5]} " * 8)
    for i in range(120)
]


class Flaky:
    """A real embedder that fails on chosen texts (or after a number of documents), or slows down: the
    faults a long re-embedding meets. Same model id: it is the same model. Closing it leaves the model
    loaded (the module's fixture closes it)."""

    def __init__(self, inner: Embedder, *, poison: str | None = None, fail_after: int | None = None) -> None:
        self.inner, self.poison, self.fail_after = inner, poison, fail_after
        self.delay_s = 0.0
        self.embedded = 0

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dimensions(self) -> int:
        return self.inner.dimensions

    @property
    def normalized(self) -> bool:
        return self.inner.normalized

    async def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        await asyncio.sleep(self.delay_s)
        if self.poison is not None and any(self.poison in t for t in texts):
            raise InvalidEmbedding("the model answered NaN for this text")
        if self.fail_after is not None and self.embedded + len(texts) > self.fail_after:
            raise RuntimeError("the process was interrupted")  # not an embedding error: the run stops
        self.embedded += len(texts)
        return await self.inner.embed_documents(texts)

    async def embed_query(self, text: str) -> Vector:
        return await self.inner.embed_query(text)

    async def probe(self) -> None:
        await self.inner.probe()

    async def aclose(self) -> None:
        pass


@pytest.fixture(scope="module")
async def models() -> AsyncIterator[dict[str, LocalEmbedder]]:
    loaded = {OLD: LocalEmbedder(OLD), NEW: LocalEmbedder(NEW)}
    yield loaded
    for embedder in loaded.values():
        await embedder.aclose()


@pytest.fixture
async def old_index(settings: SearchSettings, models: dict[str, LocalEmbedder]) -> AsyncIterator[SearchClient]:
    """The alias, built with the old model; and a client of the old model (owns nothing)."""
    async with SearchClient.from_settings(settings, embedder=Flaky(models[OLD])) as client:
        await client.ensure_index()
        assert (await client.index_documents(DOCS, refresh=True)).ok
        yield client


def _new_client(settings: SearchSettings, embedder: Embedder) -> SearchClient:
    return SearchClient.from_settings(settings, embedder=embedder if isinstance(embedder, Flaky) else Flaky(embedder))


async def _ids(es: AsyncElasticsearch, index: str) -> list[str]:
    resp = await es.search(index=index, size=1000, source=False, query={"match_all": {}})
    return sorted(h["_id"] for h in resp.body["hits"]["hits"])


async def test_a_model_change_moves_the_alias_while_searches_every_100_ms_all_succeed(
    settings: SearchSettings, old_index: SearchClient, models: dict[str, LocalEmbedder], es: AsyncElasticsearch
) -> None:
    before = await _ids(es, settings.index)
    new = _new_client(settings, models[NEW])
    with pytest.raises(ModelMismatch, match="hybrid-search reembed"):
        await new.ensure_index()  # the error says how to move
    seen: list[IndexProgress] = []
    reembed = asyncio.create_task(new.indices.reembed(progress=seen.append))
    searches = 0
    reasons: list[str | None] = []
    while not reembed.done():
        res = await old_index.search("cloud growth", limit=5)
        searches += 1
        reasons.append(res.degradation.reason if res.degradation is not None else None)
        await asyncio.sleep(0.1)
    report = await reembed
    assert searches >= 3
    # Until the move, the old clients search the old version, both legs; after it (the run lifts its write
    # block last), a client of the old model gets BM25 only, said so.
    moved = reasons.index("model_mismatch") if "model_mismatch" in reasons else len(reasons)
    assert reasons[:moved] == [None] * moved
    assert set(reasons[moved:]) <= {"model_mismatch"}
    assert report.promoted
    assert (report.source, report.target) == (f"{settings.index}-000001", f"{settings.index}-000002")
    assert (report.previous_model, report.model) == (models[OLD].model_id, models[NEW].model_id)
    assert (report.documents, report.embedded, report.failed) == (len(DOCS), len(DOCS), [])
    assert seen[-1].total == len(DOCS)
    assert seen[-1].indexed_count == len(DOCS)
    assert await _ids(es, settings.index) == before  # the same documents, behind the alias now
    assert (await new.search("cloud growth", limit=5)).legs["knn"].ok
    # A client still configured with the old model gets BM25 only, said so, instead of foreign neighbours.
    stale = await old_index.search("cloud growth", limit=5)
    assert stale.degraded
    assert stale.degradation.reason == "model_mismatch"
    assert stale.hits
    assert (await es.indices.exists(index=report.source)).body  # kept unless delete_old=True
    await new.aclose()


async def test_an_interrupted_run_leaves_the_alias_and_the_next_run_resumes(
    settings: SearchSettings, old_index: SearchClient, models: dict[str, LocalEmbedder], es: AsyncElasticsearch
) -> None:
    settings = settings.model_copy(update={"embed_batch_size": 16})
    interrupted = _new_client(settings, Flaky(models[NEW], fail_after=48))
    with pytest.raises(RuntimeError, match="interrupted"):
        await interrupted.indices.reembed()
    alias = (await es.indices.get_alias(name=settings.index)).body
    assert list(alias) == [f"{settings.index}-000001"]  # untouched
    health = await old_index.health()
    assert health.index.building == [f"{settings.index}-000002"]  # the partial version is identifiable
    resumed = _new_client(settings, models[NEW])
    report = await resumed.indices.reembed(delete_old=True)
    assert report.promoted
    assert report.target == f"{settings.index}-000002"
    assert 0 < report.resumed < len(DOCS)
    assert report.resumed + report.embedded == len(DOCS)
    assert list((await es.indices.get_alias(name=settings.index)).body) == [f"{settings.index}-000002"]
    assert not (await es.indices.exists(index=f"{settings.index}-000001")).body  # delete_old
    assert (await resumed.health()).index.building == []
    await interrupted.aclose()
    await resumed.aclose()


async def test_documents_that_fail_to_embed_are_reported_and_keep_the_alias_until_a_run_gets_them(
    settings: SearchSettings, old_index: SearchClient, models: dict[str, LocalEmbedder], es: AsyncElasticsearch
) -> None:
    poisoned = _new_client(settings, Flaky(models[NEW], poison="Report 7:"))
    report = await poisoned.indices.reembed()
    assert not report.promoted
    assert [f.id for f in report.failed] == ["d007"]
    assert report.failed[0].reason == "embedding_failed"
    assert "d007" in (report.reason or "") or "1 documents failed" in (report.reason or "")
    assert list((await es.indices.get_alias(name=settings.index)).body) == [f"{settings.index}-000001"]
    retry = _new_client(settings, models[NEW])
    again = await retry.indices.reembed()
    assert again.promoted
    assert (again.resumed, again.embedded) == (len(DOCS) - 1, 1)  # only the failed one was embedded again
    await poisoned.aclose()
    await retry.aclose()


async def test_restart_starts_clean_and_writes_made_during_the_run_are_carried_over(
    settings: SearchSettings, old_index: SearchClient, models: dict[str, LocalEmbedder], es: AsyncElasticsearch
) -> None:
    settings = settings.model_copy(update={"embed_batch_size": 16})
    first = _new_client(settings, Flaky(models[NEW], fail_after=32))
    with pytest.raises(RuntimeError):
        await first.indices.reembed()
    await first.aclose()
    slow = Flaky(models[NEW])
    slow.delay_s = 0.3
    client = _new_client(settings, slow)
    run = asyncio.create_task(client.indices.reembed(restart=True))
    await asyncio.sleep(0.5)  # the run has read its view of the source; now the alias changes under it
    added = Document(id="late-1", title="Late note", text="A document written while the index was re-embedded.")
    assert (await old_index.index_documents([added], refresh=True)).ok
    await es.delete(index=settings.index, id="d003", refresh=True)
    report = await run
    assert report.promoted
    assert report.resumed == 0  # restart: nothing of the interrupted version was kept
    assert report.removed == 1
    ids = await _ids(es, settings.index)
    assert "late-1" in ids
    assert "d003" not in ids
    assert len(ids) == len(DOCS)
    await client.aclose()


def test_the_command_line_moves_the_index_with_a_progress_bar(
    settings: SearchSettings, old_index: SearchClient, tmp_path: Path
) -> None:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "ES_URL": settings.url or "",
        "ES_INDEX": settings.index,
        "EMBEDDINGS_MODEL": OLD,
        **{k: v for k, v in os.environ.items() if k.startswith("EMBEDDINGS_CACHE")},
    }
    exe = str(Path(sys.executable).parent / "hybrid-search")
    done = subprocess.run(
        [exe, "reembed", "--model", NEW, "--delete-old"], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    assert f"alias {settings.index} -> {settings.index}-000002 (old version deleted)" in done.stdout
    assert f"{len(DOCS)} documents, {len(DOCS)} embedded" in done.stdout
    again = subprocess.run([exe, "reembed", "--model", NEW], env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    assert "nothing to do" in again.stdout


class _Slowed(HashingEmbedder):
    """The hashing model taking 50 ms per batch (a re-embedding that lasts while the writer writes); ``other``:
    another model of the same length (its vectors would fit the mapping: only the model id tells them apart)."""

    def __init__(self, *, other: bool) -> None:
        super().__init__(dimensions=64)
        self.other = other

    @property
    def model_id(self) -> str:
        return "hashing-64-other" if self.other else super().model_id

    async def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        await asyncio.sleep(0.05)
        return await super().embed_documents(texts)


@pytest.mark.parametrize(
    ("change", "delete_old"),
    [("model", True), ("model", False), ("analyzer", True)],
    ids=["model-delete_old", "model-keep_old", "analyzer-delete_old"],
)
async def test_a_reembed_while_a_writer_adds_updates_and_deletes_moves_the_alias_and_loses_nothing(
    settings: SearchSettings, es: AsyncElasticsearch, change: str, delete_old: bool
) -> None:
    """600 documents; a writer adds one every 10 ms through the alias, updates some and deletes others while
    the alias moves to a new version: the alias moves, and the new version holds exactly what the writer was
    told was written — every added id, the updated texts, none of the deleted. A move to another model refuses
    the old model's writes after it (ModelMismatch: never mixed, never acknowledged); a move with the same model
    (here: another analyzer) takes them."""
    base = [Document(id=f"b{i:04d}", title=f"Note {i}", text=f"report {i} on {TOPICS[i % 5]}") for i in range(600)]
    async with SearchClient.from_settings(settings, embedder=HashingEmbedder(dimensions=64)) as writer:
        await writer.ensure_index()
        assert (await writer.index_documents(base, refresh=True)).ok
        added: list[str] = []
        updated: dict[str, str] = {}
        deleted: list[str] = []
        refused: list[str] = []
        stop = asyncio.Event()

        async def write() -> None:
            n = 0
            while not stop.is_set():
                n += 1
                docs = [Document(id=f"w{n:05d}", text=f"written while the index moved, number {n}")]
                if n % 7 == 0:  # an update of a document the copy has (or has not yet) read
                    docs.append(Document(id=f"b{n % 600:04d}", text=f"updated during the move {n}"))
                try:
                    report = await writer.index_documents(docs)
                except ModelMismatch:
                    refused.append(docs[0].id)
                    await asyncio.sleep(0.01)
                    continue
                refused.extend(f.id for f in report.failed if f.reason == "model_mismatch")
                for doc in docs:
                    if doc.id in report.indexed:
                        if doc.id.startswith("w"):
                            added.append(doc.id)
                        else:
                            updated[doc.id] = doc.text
                if n % 11 == 0:
                    deleted.extend(await writer.documents.delete([f"b{(n * 13) % 600:04d}"]))
                await asyncio.sleep(0.01)

        task = asyncio.create_task(write())
        moving = settings.model_copy(
            update={"embed_batch_size": 16, **({"analyzer": "standard"} if change == "analyzer" else {})}
        )
        mover = SearchClient.from_settings(moving, embedder=_Slowed(other=change == "model"))
        async with mover:
            report = await mover.indices.reembed(delete_old=delete_old)
        written_before = len(added)
        await asyncio.sleep(0.3)  # writes after the move, through the alias
        stop.set()
        await task
    assert report.promoted, report.reason
    assert report.target == f"{settings.index}-000002"
    assert list((await es.indices.get_alias(name=settings.index)).body) == [report.target]
    assert (await es.indices.exists(index=report.source)).body is not delete_old
    await es.indices.refresh(index=report.target)
    held = await es.search(index=report.target, size=10_000, source=["text"], query={"match_all": {}})
    texts = {h["_id"]: h["_source"]["text"] for h in held.body["hits"]["hits"]}
    assert written_before > 20
    assert set(added) <= set(texts)  # every acknowledged write is in the new version
    assert not set(deleted) & set(texts)  # and every acknowledged delete
    for doc_id, text in updated.items():
        if doc_id not in deleted:
            assert texts[doc_id] == text
    assert len(texts) == 600 - len(set(deleted)) + len(added)
    if change == "model":
        assert refused  # the old model's writes after the move: refused, typed
        # (a refused update of a document the index had leaves that document as it was: only new ids count)
        assert not {i for i in refused if i.startswith("w")} & set(texts)
    else:
        assert not refused
        assert len(added) > written_before  # the writes went on after the move
    if not delete_old:
        blocks = (await es.indices.get_settings(index=report.source)).body[report.source]["settings"]["index"]
        assert str(blocks.get("blocks", {}).get("write", "false")) == "false"  # the block was lifted


async def test_a_reembed_carries_the_limits_raised_on_the_live_index_so_every_document_it_holds_moves(
    settings: SearchSettings, es: AsyncElasticsearch
) -> None:
    raised = {
        "index.mapping.total_fields.limit": 2_000,  # a record with many metadata keys (three fields each)
        "index.highlight.max_analyzed_offset": 5_000,
        "index.max_result_window": 20_000,
    }
    wide = Document(id="wide", text="a record with many keys", metadata={f"key{i}": "v" for i in range(400)})
    async with SearchClient.from_settings(settings, embedder=HashingEmbedder(dimensions=64)) as old:
        first = await old.ensure_index()
        await es.indices.put_settings(index=first, settings=raised)
        assert (await old.index_documents([wide, Document(id="plain", text="a plain note")], refresh=True)).ok
    async with SearchClient.from_settings(settings, embedder=HashingEmbedder(dimensions=32)) as new:
        report = await new.indices.reembed()
        assert report.promoted, report
        assert (report.documents, report.failed) == (2, [])
        moved = await new.documents.get("wide")
        assert moved is not None
        assert moved.metadata["key399"] == "v"
    assert report.target != first
    got = (await es.indices.get_settings(index=report.target, flat_settings=True)).body[report.target]["settings"]
    assert {key: got.get(key) for key in raised} == {key: str(value) for key, value in raised.items()}
