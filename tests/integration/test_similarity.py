"""A hit's similarity to the query: Elasticsearch's kNN score, comparable across queries, so a threshold means
the same for every query — also for the hits the kNN leg did not reach (``similarities=True``), and in the
framework stores, whose users threshold on it (issue 62: LlamaIndex's ``similarity_cutoff``, LangChain's
``score_threshold``). Against the real Elasticsearch, with and without passages."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores.types import VectorStoreQuery, VectorStoreQueryMode

from embeddings import HashingEmbedder
from storage import Document, InvalidQuery, SearchClient, SearchSettings
from storage.integrations.langchain import HybridSearchStore
from storage.integrations.llama_index import HybridSearchVectorStore

# The query's words are rare in the long reports (BM25 finds them first) and make up the short notes (whose
# vectors are nearest): a hybrid page of the first few of each holds hits only one leg found.
FILLER = [
    "ledger",
    "audit",
    "invoice",
    "payroll",
    "vendor",
    "contract",
    "pension",
    "treasury",
    "bond",
    "coupon",
    "equity",
    "margin",
]
REPORTS = [
    Document(id=f"report-{n}", text=" ".join(["copper", "smelter", *FILLER[n:], *FILLER[:n]]) * 2) for n in range(6)
]
NOTES = [Document(id=f"note-{n}", text=f"copper smelter outage {word}") for n, word in enumerate(FILLER[:6])]
QUERY = "copper smelter outage"


@pytest.fixture(params=[True, False], ids=["passages", "no-passages"])
async def similar(settings: SearchSettings, request: pytest.FixtureRequest) -> AsyncIterator[SearchClient]:
    updated = settings.model_copy(update={"passages": request.param})
    embedder = HashingEmbedder(dimensions=64, window_tokens=8)  # the reports are read in passages
    async with SearchClient.from_settings(updated, embedder=embedder) as c:
        await c.index_documents(REPORTS + NOTES, refresh=True)
        yield c


async def knn_scores(client: SearchClient) -> dict[str, float]:
    """Every document's kNN score for the query, from the kNN leg alone (all documents in its window)."""
    ranked = await client.leg_rankings(QUERY, mode="knn", window=50)
    return {h.id: h.score for h in ranked["knn"]}


async def test_every_shown_hit_gets_the_similarity_the_knn_leg_would_give_it(similar: SearchClient) -> None:
    expected = await knn_scores(similar)
    response = await similar.search(QUERY, window=4, limit=4, similarities=True)
    unreached = [h for h in response.hits if "knn" not in h.ranks]
    assert unreached, "the page should hold hits the kNN leg did not return"
    for hit in response.hits:
        assert hit.similarity == pytest.approx(expected[hit.id], abs=1e-4), hit.id
        assert 0.0 <= hit.similarity <= 1.0


async def test_without_asking_only_the_knn_legs_hits_have_a_similarity(similar: SearchClient) -> None:
    expected = await knn_scores(similar)
    response = await similar.search(QUERY, window=4, limit=4)
    for hit in response.hits:
        if "knn" in hit.ranks:
            assert hit.similarity == pytest.approx(expected[hit.id], abs=1e-4)
        else:
            assert hit.similarity is None
    bm25 = await similar.search(QUERY, mode="bm25", limit=4)
    assert all(h.similarity is None for h in bm25.hits)
    with pytest.raises(InvalidQuery, match="similarities needs the kNN leg"):
        await similar.search(QUERY, mode="bm25", similarities=True)


def test_langchain_relevance_scores_are_similarities_not_shares_of_the_first(settings: SearchSettings) -> None:
    """As the Elasticsearch store gives them: the kNN score, so ``score_threshold`` keeps what is similar (it
    gave 1.0 to whatever ranked first and 0.917 to the second before, however far)."""
    store = HybridSearchStore(
        index_name=settings.index, es_url=settings.url, embedding=DeterministicFakeEmbedding(size=16)
    )
    try:
        docs = REPORTS + NOTES
        store.add_texts([d.text for d in docs], ids=[d.id for d in docs])
        exact = {
            str(d.id): s
            for d, s in store.similarity_search_with_relevance_scores(QUERY, k=len(docs), mode="knn", window=50)
        }
        assert len(exact) == len(docs)
        hybrid = store.similarity_search_with_relevance_scores(QUERY, k=4, window=4)
        assert len(hybrid) == 4
        for doc, score in hybrid:
            assert score == pytest.approx(exact[str(doc.id)], abs=1e-4), doc.id
        threshold = sorted(exact.values())[len(exact) // 2]
        kept = store.similarity_search_with_relevance_scores(QUERY, k=len(docs), window=50, score_threshold=threshold)
        assert {str(d.id) for d, _ in kept} == {i for i, s in exact.items() if s >= threshold}
    finally:
        store.close()


async def test_llama_index_similarities_are_the_knn_score_in_every_mode(settings: SearchSettings) -> None:
    """``SimilarityPostprocessor(similarity_cutoff=0.5)`` dropped every node before (the fused score, 0.09)."""
    embedder = HashingEmbedder(dimensions=64)
    wide = HybridSearchVectorStore(index_name=settings.index, es_url=settings.url, embedder=embedder, window=50)
    narrow = HybridSearchVectorStore(index_name=settings.index, es_url=settings.url, embedder=embedder, window=4)
    try:
        await wide.async_add([TextNode(id_=d.id, text=d.text) for d in REPORTS + NOTES])
        knn = await wide.aquery(VectorStoreQuery(query_str=QUERY, similarity_top_k=12))  # default mode: kNN
        exact = dict(zip(knn.ids or [], knn.similarities or [], strict=True))
        assert len(exact) == 12
        assert max(exact.values()) > 0.5
        query = VectorStoreQuery(query_str=QUERY, similarity_top_k=4, mode=VectorStoreQueryMode.HYBRID)
        hybrid = await narrow.aquery(query)
        assert hybrid.ids
        assert len(hybrid.ids) == 4
        for doc_id, similarity in zip(hybrid.ids, hybrid.similarities or [], strict=True):
            assert similarity == pytest.approx(exact[doc_id], abs=1e-4), doc_id
    finally:
        await wide.aclose()
        await narrow.aclose()
