"""The persistent embedding cache: a re-run never re-embeds, a different model never reuses vectors."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from embeddings import CachedEmbedder, HashingEmbedder, Vector


class Counting(HashingEmbedder):
    def __init__(self, dimensions: int) -> None:
        super().__init__(dimensions=dimensions)
        self.documents_embedded = 0

    async def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        self.documents_embedded += len(texts)
        return await super().embed_documents(texts)


async def test_a_second_run_reads_every_vector_from_disk(tmp_path: Path) -> None:
    texts = [f"document {i}" for i in range(20)]
    first = CachedEmbedder(Counting(32), tmp_path)
    vectors = await first.embed_documents(texts)
    await first.aclose()
    inner = Counting(32)
    second = CachedEmbedder(inner, tmp_path)
    again = await second.embed_documents([*texts[:10], "a new one", *texts[10:]])
    await second.aclose()
    assert inner.documents_embedded == 1  # only the new text
    assert (second.hits, second.misses) == (20, 1)
    assert [round(x, 5) for x in again[0]] == [round(x, 5) for x in vectors[0]]  # float32 round trip
    assert len(again) == 21


async def test_another_model_or_kind_never_reuses_a_vector(tmp_path: Path) -> None:
    a = CachedEmbedder(Counting(32), tmp_path)
    await a.embed_documents(["same text"])
    await a.embed_query("same text")
    await a.aclose()
    other = Counting(16)  # another model id (hashing-16)
    b = CachedEmbedder(other, tmp_path)
    assert len((await b.embed_documents(["same text"]))[0]) == 16
    assert b.misses == 1
    assert a.misses == 2  # document and query are separate entries
    await b.aclose()
