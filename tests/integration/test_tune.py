"""Tuning the fusion from judged queries, against the real Elasticsearch: the report, the guard rails, the
setting stored with the index, and every client of the alias using it (call > settings > index > default).

The collection is built so that one leg is right and the other is noise: queries are a document's exact
title (BM25 finds it first), and the embedder maps every text to an unrelated pseudo-random unit vector.
Equal-weight fusion then lets the noise push the right document down; the tuner should see it."""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from embeddings import BaseEmbedder, Vector
from embeddings._base import Kind
from storage import Document, SearchClient, SearchSettings
from storage.evaluation import load_judgments, tune

WORDS = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
    "mike",
    "november",
    "oscar",
    "papa",
]


class NoiseEmbedder(BaseEmbedder):
    """A unit vector per text from its hash: kNN that knows nothing (a leg that should get no weight)."""

    def __init__(self) -> None:
        super().__init__(max_batch_size=64)

    @property
    def model_id(self) -> str:
        return "noise-32"

    @property
    def dimensions(self) -> int:
        return 32

    @property
    def normalized(self) -> bool:
        return True

    async def _embed_batch(self, texts: Sequence[str], kind: Kind) -> list[Vector]:
        out = []
        for text in texts:
            rng = random.Random(hashlib.sha256(text.encode()).digest())
            vector = [rng.gauss(0, 1) for _ in range(32)]
            norm = sum(x * x for x in vector) ** 0.5
            out.append([x / norm for x in vector])
        return out


def _collection(folder: Path, queries: int, *, extra_qrels: dict[str, str] | None = None) -> Path:
    """``queries`` judged queries (each the exact title of one of 4x as many documents)."""
    rng = random.Random(5)
    docs = [
        {"_id": f"d{i}", "title": " ".join(rng.sample(WORDS, 4)) + f" {i}", "text": " ".join(rng.choices(WORDS, k=30))}
        for i in range(queries * 4)
    ]
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    judged = docs[: queries * 4 : 4]
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": f"q{i}", "text": d["title"]}) + "\n" for i, d in enumerate(judged))
    )
    lines = ["query-id\tcorpus-id\tscore"] + [f"q{i}\t{d['_id']}\t1" for i, d in enumerate(judged)]
    lines += [f"{q}\t{d}\t1" for q, d in (extra_qrels or {}).items()]
    (folder / "qrels" / "test.tsv").write_text("\n".join(lines) + "\n")
    return folder


@pytest.fixture
async def noisy(settings: SearchSettings) -> AsyncIterator[SearchClient]:
    async with SearchClient.from_settings(settings, embedder=NoiseEmbedder()) as client:
        yield client


async def test_tuning_finds_the_better_setting_stores_it_and_every_client_then_uses_it(
    noisy: SearchClient, settings: SearchSettings, tmp_path: Path
) -> None:
    folder = _collection(tmp_path / "judged", 40)
    report = await tune(noisy, folder, apply=True)  # the index is empty: the corpus is indexed first
    assert report.queries == 40
    assert report.grid_size == 191
    assert report.bm25_ndcg > report.knn_ndcg + 0.5
    assert report.best.ndcg > report.current.ndcg
    assert report.cross_validated.gain > 0
    assert report.cross_validated.low > 0
    assert report.decision == "change"
    assert report.applied
    assert report.recommended is not None
    assert report.recommended["weights"]["knn"] < report.recommended["weights"]["bm25"]
    # A new client of the alias (no fusion settings of its own) uses the stored setting...
    async with SearchClient.from_settings(settings, embedder=NoiseEmbedder()) as other:
        res = await other.search(json.loads((folder / "queries.jsonl").read_text().splitlines()[0])["text"])
        assert res.fusion_sources == {"method": "index", "k": "index", "weights": "index", "window": "index"}
        assert res.fusion.weights == report.recommended["weights"]
        assert res.fusion.window == report.recommended["window"]
        health = await other.health()
        assert health.fusion_sources["weights"] == "index"
        # ...a call's arguments win over it...
        called = await other.search("alpha", weights={"knn": 1.0}, window=20)
        assert called.fusion_sources["weights"] == "call"
        assert called.fusion_sources["window"] == "call"
        assert called.fusion_sources["method"] == "index"
    # ...and so do explicit settings.
    explicit = settings.model_copy(update={"knn_weight": 1.0, "bm25_weight": 1.0})
    async with SearchClient.from_settings(explicit, embedder=NoiseEmbedder()) as configured:
        res = await configured.search("alpha")
        assert res.fusion_sources["weights"] == "settings"
        assert res.fusion.weights == {"bm25": 1.0, "knn": 1.0}
        assert res.fusion_sources["k"] == "index"
    # Tuning again: the stored setting is now the current one, and nothing better is found.
    again = await tune(noisy, load_judgments(folder))
    assert again.current_stored
    assert again.decision == "keep"


async def test_too_few_judged_queries_warn_and_are_never_applied(noisy: SearchClient, tmp_path: Path) -> None:
    report = await tune(noisy, _collection(tmp_path / "few", 12), apply=True)
    assert report.queries == 12
    assert report.decision == "keep"
    assert not report.applied
    assert any("at least 20 are needed" in w for w in report.warnings)
    assert "too few" in report.reason
    assert (await noisy.search("alpha")).fusion_sources["method"] == "default"


async def test_judged_documents_missing_from_the_index_are_counted(noisy: SearchClient, tmp_path: Path) -> None:
    folder = _collection(tmp_path / "gaps", 24, extra_qrels={"q0": "not-in-the-index", "q-orphan": "also-missing"})
    (folder / "queries.jsonl").write_text(
        (folder / "queries.jsonl").read_text() + json.dumps({"_id": "q-orphan", "text": "nothing"}) + "\n"
    )
    report = await tune(noisy, folder)
    assert report.judged_documents == 26
    assert report.judged_documents_missing == 2
    assert report.queries_left_out == 1  # q-orphan: none of its judged documents is in the index
    assert report.queries == 24
    assert any("2 judged documents are not in the index" in w for w in report.warnings)


async def test_tuning_respects_the_tenant(settings: SearchSettings, tmp_path: Path) -> None:
    folder = _collection(tmp_path / "tenant", 20)
    tenanted = settings.model_copy(update={"multi_tenant": True})
    async with SearchClient.from_settings(tenanted, embedder=NoiseEmbedder()) as client:
        await client.ensure_index()
        records = [json.loads(line) for line in (folder / "corpus.jsonl").read_text().splitlines()]
        mine = [Document(id=r["_id"], title=r["title"], text=r["text"]) for r in records[: len(records) // 2]]
        theirs = [Document(id=r["_id"], title=r["title"], text=r["text"]) for r in records[len(records) // 2 :]]
        assert (await client.index_documents(mine, tenant_id="acme", refresh=True)).ok
        assert (await client.index_documents(theirs, tenant_id="globex", refresh=True)).ok
        report = await tune(client, folder, tenant_id="acme")
    assert report.queries == 10  # the judged documents of the other tenant do not count as found
    assert report.judged_documents_missing == 10


def test_the_command_line_prints_the_table_and_the_decision(settings: SearchSettings, tmp_path: Path) -> None:
    folder = _collection(tmp_path / "cli", 12)
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "ES_URL": settings.url or "",
        "ES_INDEX": settings.index,
        "EMBEDDINGS_PROVIDER": "hashing",
        "COLUMNS": "220",
    }
    exe = str(Path(sys.executable).parent / "hybrid-search")
    done = subprocess.run([exe, "tune", str(folder)], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "tuned (chosen on the other folds)" in done.stdout
    assert "keep the current setting" in done.stdout
    as_json = subprocess.run([exe, "tune", str(folder), "--json"], env=env, capture_output=True, text=True, timeout=600)
    assert json.loads(as_json.stdout)["queries"] == 12
