"""Long documents that say one thing throughout are read head first; reports that join many topics by the
better of head and best passage — decided per index from what its writes measured, against the real
Elasticsearch (storage.passages.agreement)."""

from __future__ import annotations

import random

import pytest
from elasticsearch import AsyncElasticsearch

from embeddings import HashingEmbedder
from storage import Document, SearchClient, SearchSettings
from storage.passages import AGREEMENT_MIN_DOCUMENTS, AGREEMENT_THRESHOLD

pytestmark = pytest.mark.smoke

WINDOW = 40  # the test embedder's window, in words: a document of 200 words is long
MANY = AGREEMENT_MIN_DOCUMENTS  # (fewer long documents decide nothing)


def _sentences(topic: int, n: int, rng: random.Random) -> list[str]:
    """``n`` sentences of one topic: words of its own vocabulary (no two topics share a word)."""
    words = [f"t{topic}w{j}" for j in range(12)]
    return [" ".join(rng.choices(words, k=10)) + "." for _ in range(n)]


def _one_topic(n: int) -> list[Document]:
    rng = random.Random(1)
    return [Document(id=f"manual-{i}", title=f"manual {i}", text=" ".join(_sentences(i, 30, rng))) for i in range(n)]


def _joined(n: int) -> list[Document]:
    rng = random.Random(2)
    docs = []
    for i in range(n):
        sections = [" ".join(_sentences(10 * i + s, 3, rng)) for s in range(10)]
        docs.append(Document(id=f"report-{i}", title=f"report {i}", text="\n\n".join(sections)))
    return docs


async def _indexed(settings: SearchSettings, name: str, docs: list[Document]) -> SearchClient:
    s = settings.model_copy(update={"index": f"{settings.index}-{name}", "passage_tokens": 24, "passage_overlap": 6})
    client = SearchClient.from_settings(s, embedder=HashingEmbedder(dimensions=256, window_tokens=WINDOW))
    await client.__aenter__()
    await client.ensure_index()
    report = await client.index_documents(docs, refresh=True)
    assert report.ok, report.failed
    return client


async def test_an_index_of_one_topic_documents_is_read_head_first_and_one_of_joined_reports_is_not(
    settings: SearchSettings, es: AsyncElasticsearch
) -> None:
    manuals = await _indexed(settings, "manuals", _one_topic(MANY))
    reports = await _indexed(settings, "reports", _joined(MANY))
    try:
        stored = (await es.search(index=manuals.index, size=MANY, source=["passage_agreement"])).body["hits"]["hits"]
        assert all(
            h["_source"]["passage_agreement"] > AGREEMENT_THRESHOLD for h in stored
        )  # each long document's, recorded
        assert len(stored) == MANY
        one_topic = (await manuals.health()).index
        assert one_topic.searches_passages
        assert one_topic.passage_agreement is not None
        assert one_topic.passage_agreement >= AGREEMENT_THRESHOLD
        assert one_topic.long_documents_head_first
        many = (await reports.health()).index
        assert many.searches_passages
        assert many.passage_agreement is not None
        assert many.passage_agreement < 0.3
        assert not many.long_documents_head_first
        # A section deep in a joined report is found by its passage, as before.
        needle = _joined(MANY)[3].text.split("\n\n")[7]
        found = await reports.search(needle, mode="knn", limit=1)
        assert found.ids == ["report-3"]
        assert found.hits[0].passages
        # Head first still finds a passage that beats every head by a margin, and shows it.
        manual = _one_topic(MANY)[5]
        late = manual.text[len(manual.text) * 3 // 4 :]
        hit = (await manuals.search(late, mode="knn", limit=1)).hits[0]
        assert hit.id == "manual-5"
        best = next(p for p in hit.passages if p.leg == "knn")
        assert best.score is not None
        assert hit.similarity is not None
        assert hit.similarity >= best.score  # its own similarity, not the weight the leg ranked it by
        assert "passage_agreement" not in hit.source  # the index's figure, not the caller's document
        assert hit.document == await manuals.documents.get("manual-5")  # the caller's document, as indexed
    finally:
        for client in (manuals, reports):
            await client.indices.delete()
            await client.aclose()
