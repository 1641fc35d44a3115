"""The server matrix: the whole path on every supported server minor.

``./dev.sh test`` runs this (marker ``matrix``) against each server of ``ES_MATRIX`` in dev.sh with the 9.x
client, and against the floor with the 8.x client; the main passes run it against their own servers too.
A server below the floor is refused by name: tests/integration/test_faults.py (its ``GET /`` injected).
"""

from __future__ import annotations

import contextlib

import pytest
from elasticsearch import AsyncElasticsearch

from embeddings import HashingEmbedder
from storage import Document, SearchClient, SearchSettings
from storage._transport.compat import MINIMUM_SERVER, server_version

pytestmark = pytest.mark.matrix

WINDOW = 40
TAIL = " ".join(f"filler{i} words about the weather and nothing else" for i in range(40))
DOCS = [
    Document(id="aapl-1", title="Apple cuts guidance", text="Apple lowered its revenue guidance.", ticker="AAPL"),
    Document(id="aapl-2", title="Apple buyback", text="Apple announced a share buyback and revenue.", ticker="AAPL"),
    Document(id="msft-1", title="Microsoft cloud", text="Azure revenue grew thirty percent.", ticker="MSFT"),
    Document(
        id="long",
        title="Annual report",
        text=f"{TAIL} The Zorblax quantum widget drove revenue in the last section.",
        ticker="ZZZ",
    ),
]


def _embedder() -> HashingEmbedder:
    return HashingEmbedder(dimensions=256, window_tokens=WINDOW)


async def _version(es: AsyncElasticsearch) -> tuple[int, int]:
    found = server_version((await es.info()).body)
    assert found is not None
    return found


async def test_the_whole_path_works_on_this_server(settings: SearchSettings, es: AsyncElasticsearch) -> None:
    assert await _version(es) >= MINIMUM_SERVER
    tuned = settings.model_copy(update={"passage_tokens": 24, "passage_overlap": 6})
    async with SearchClient.from_settings(tuned, embedder=_embedder()) as client:
        await client.ensure_index()
        # Ingest with a partial failure: one bad document costs itself only.
        bad = {"id": "bad", "title": " ", "text": "  "}
        report = await client.index_documents([*DOCS, bad], tenant_id="acme", refresh=True)  # type: ignore[list-item]
        assert sorted(report.indexed) == sorted(d.id for d in DOCS)
        assert [f.id for f in report.failed] == ["bad"]
        await client.index_documents(
            [Document(id="other", title="Apple", text="Apple revenue guidance", ticker="AAPL")],
            tenant_id="globex",
            refresh=True,
        )
        # Hybrid with a filter and a tenant: only this tenant's documents, only the filtered ticker.
        res = await client.search("Apple revenue guidance", filters={"ticker": "AAPL"}, tenant_id="acme")
        assert not res.degraded
        assert set(res.ids) == {"aapl-1", "aapl-2"}
        # Vectors are kept out of _source where the server gives them back from doc values (8.17+); the
        # diversity stage reads them from wherever they are.
        mapping = next(iter((await es.indices.get_mapping(index=settings.index)).body.values()))["mappings"]
        excludes = mapping.get("_source", {}).get("excludes", [])
        assert ("embedding" in excludes) == ((await _version(es)) >= (8, 17))
        diverse = await client.search("Apple revenue guidance", diversity=0.5, tenant_id="acme")
        assert not diverse.degraded
        assert diverse.ids
        # kNN through a passage: the long document's last section.
        knn = await client.search("Zorblax quantum widget", mode="knn", tenant_id="acme", limit=2)
        assert knn.ids[0] == "long"
        assert "Zorblax" in knn.hits[0].passages[0].text
        # The deep walk (a point in time): every match once.
        seen: list[str] = []
        async with contextlib.aclosing(client.walk("revenue", limit=2, window=10, tenant_id="acme")) as pages:
            async for page in pages:
                seen.extend(page.ids)
        assert len(seen) == len(set(seen)) >= 4
        # A model change with no downtime: re-embedded, promoted, searchable.
        mover = settings.model_copy(update={"passage_tokens": 32, "passage_overlap": 8})
    async with SearchClient.from_settings(mover, embedder=_embedder()) as moved:
        result = await moved.indices.reembed(delete_old=True)
        assert result.promoted
        again = await moved.search("Apple revenue guidance", filters={"ticker": "AAPL"}, tenant_id="acme")
        assert set(again.ids) == {"aapl-1", "aapl-2"}
