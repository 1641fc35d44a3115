"""A second, secured local Elasticsearch: TLS with certificates from the distribution's own certutil, a
file-realm user whose role is limited to the project's indices, and the failures that must be typed and
secret-free."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import ssl
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
from elasticsearch import AsyncElasticsearch

from embeddings import HashingEmbedder
from storage import (
    AccessDenied,
    AuthenticationFailed,
    ConfigurationError,
    Document,
    SearchClient,
    SearchError,
    SearchSettings,
    TLSFailed,
)
from storage.local_es import LocalElasticsearch

APP_USER, APP_PASSWORD = "hybrid-app", "app-" + uuid.uuid4().hex
#: What the application's credentials need (documented in the README): its own indices only.
APP_ROLE = {
    "indices": [
        {
            "names": ["sec-*"],
            "privileges": ["read", "write", "create_index", "view_index_metadata", "maintenance", "manage"],
        }
    ]
}
DOCS = [Document(id=f"s{i}", text=f"secured revenue note {i}") for i in range(30)]


@pytest.fixture(scope="module")
def secured() -> Iterator[LocalElasticsearch]:
    node = LocalElasticsearch(
        name=f"secured-{uuid.uuid4().hex[:6]}",
        ephemeral=True,
        security=True,
        users={APP_USER: (APP_PASSWORD, ("hybrid_app",))},
        roles={"hybrid_app": APP_ROLE},
    )
    node.start()
    try:
        yield node
    finally:
        node.stop()


def _client(node: LocalElasticsearch, **overrides: object) -> SearchClient:
    values: dict[str, object] = {
        "url": node.url,
        "index": "sec-docs",
        "ca_certs": str(node.ca_cert),
        "username": APP_USER,
        "password": APP_PASSWORD,
        "retry_attempts": 1,
    }
    values.update(overrides)
    settings = SearchSettings(**values)  # type: ignore[arg-type]
    return SearchClient.from_settings(settings, embedder=HashingEmbedder(dimensions=64))


@pytest.fixture
async def app(secured: LocalElasticsearch) -> AsyncIterator[SearchClient]:
    async with _client(secured) as c:
        yield c


async def test_search_ingest_and_paging_work_with_credentials_limited_to_the_project_index(
    app: SearchClient,
) -> None:
    await app.ensure_index()
    report = await app.index_documents(DOCS, refresh=True)
    assert report.ok
    res = await app.search("revenue note")
    assert res.hits
    assert not res.degraded
    walked = []
    async for page in app.walk("revenue", limit=10, window=10):
        walked += page.ids
    assert sorted(walked) == sorted(d.id for d in DOCS)
    assert await app.documents.count() == len(DOCS)
    health = await app.health()
    assert health.license in ("basic", "unknown")


async def test_an_index_outside_the_role_is_access_denied(app: SearchClient) -> None:
    with pytest.raises(AccessDenied) as info:
        await app.search("revenue", index="other-index")
    assert "403" in str(info.value)
    assert APP_PASSWORD not in str(info.value)


async def test_wrong_credentials_are_a_typed_error_without_the_secret(
    secured: LocalElasticsearch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    wrong_password = "wrong-" + uuid.uuid4().hex
    wrong_key = "d3Jvbmc6" + uuid.uuid4().hex
    errors: list[SearchError] = []
    for overrides in ({"password": wrong_password}, {"username": None, "password": None, "api_key": wrong_key}):
        async with _client(secured, **overrides) as c:
            with pytest.raises(AuthenticationFailed) as info:
                await c.search("revenue")
            errors.append(info.value)
            assert c.breakers["elasticsearch"].attempts == 2  # one per leg: a 401 is never retried
            assert c.breakers["elasticsearch"].state == "closed"
            assert wrong_password not in repr(c.settings)
    text = " ".join(f"{e!s} {e!r} {e.__cause__!s}" for e in errors) + caplog.text
    for secret in (wrong_password, wrong_key, APP_PASSWORD, secured.admin_password):
        assert secret not in text
    assert "ES_API_KEY" in str(errors[1])


async def test_plain_http_against_a_tls_port_is_a_typed_error(secured: LocalElasticsearch) -> None:
    with pytest.raises(ConfigurationError, match="https"):  # TLS settings on an http:// URL: caught early
        _client(secured, url=secured.url.replace("https://", "http://"))
    async with _client(secured, url=secured.url.replace("https://", "http://"), ca_certs=None) as c:
        with pytest.raises(SearchError) as info:
            await c.search("revenue", mode="bm25")
    assert APP_PASSWORD not in str(info.value)
    print(f"\nplain HTTP to the TLS port: {type(info.value).__name__}: {str(info.value)[:160]}")


async def test_an_untrusted_certificate_is_refused_and_a_pinned_one_accepted(secured: LocalElasticsearch) -> None:
    async with _client(secured, ca_certs=None) as c:  # the system store does not trust the local CA
        with pytest.raises(TLSFailed) as info:
            await c.search("revenue", mode="bm25")
    assert "ES_CA_CERTS" in str(info.value)
    assert c.breakers["elasticsearch"].attempts == 1  # not retried: it would fail the same way
    pem = (secured.ca_cert.parent.parent / "node" / "node.crt").read_text()
    fingerprint = hashlib.sha256(ssl.PEM_cert_to_DER_cert(pem)).hexdigest()
    async with _client(secured, ca_certs=None, ssl_assert_fingerprint=fingerprint) as c:
        await c.ensure_index()
        assert (await c.search("revenue", mode="bm25")).hits is not None
    async with _client(secured, ca_certs=None, ssl_assert_fingerprint="00" * 32) as c:
        with pytest.raises(TLSFailed):
            await c.search("revenue", mode="bm25")


# -- API keys (the local node has the analysis plugin: the .security index can be created) -----------------
async def _admin(node: LocalElasticsearch) -> AsyncElasticsearch:
    return AsyncElasticsearch(
        node.url, ca_certs=str(node.ca_cert), basic_auth=(node.admin_user, node.admin_password), request_timeout=30
    )


async def _api_key(node: LocalElasticsearch, role: dict[str, object], **extra: object) -> tuple[str, str]:
    """(id, encoded) of a new key whose privileges are ``role`` (a key can never exceed its creator's)."""
    admin = await _admin(node)
    try:
        created = await admin.security.create_api_key(
            name=f"hybrid-{uuid.uuid4().hex[:6]}", role_descriptors={"app": role}, **extra
        )
    finally:
        await admin.close()
    return created["id"], created["encoded"]


async def test_an_api_key_limited_to_the_project_indices_indexes_and_searches_through_es_api_key(
    secured: LocalElasticsearch, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _, encoded = await _api_key(secured, APP_ROLE)
    caplog.set_level(logging.DEBUG)  # from here on: the library's calls only (key creation logs the key)
    monkeypatch.setenv("ES_API_KEY", encoded)
    settings = SearchSettings(url=secured.url, index="sec-keyed", ca_certs=str(secured.ca_cert))
    assert settings.api_key is not None
    assert encoded not in repr(settings)
    async with SearchClient.from_settings(settings, embedder=HashingEmbedder(dimensions=64)) as c:
        await c.ensure_index()
        report = await c.index_documents(DOCS[:10], refresh=True)
        assert report.ok
        assert len(report.indexed) == 10
        res = await c.search("revenue note")
        assert res.hits
        assert not res.degraded
        with pytest.raises(AccessDenied):  # the key's role names sec-* only
            await c.search("revenue", index="other-index")
    assert encoded not in caplog.text


async def test_expired_and_invalidated_api_keys_are_authentication_failed_without_retry_or_secret(
    secured: LocalElasticsearch, caplog: pytest.LogCaptureFixture
) -> None:
    _, expiring = await _api_key(secured, APP_ROLE, expiration="1s")
    revoked_id, revoked = await _api_key(secured, APP_ROLE)
    admin = await _admin(secured)
    try:
        await admin.security.invalidate_api_key(ids=[revoked_id])
    finally:
        await admin.close()
    await asyncio.sleep(1.5)
    caplog.set_level(logging.DEBUG)  # from here on: the library's calls only (key creation logs the key)
    errors: list[SearchError] = []
    for key in (expiring, revoked):
        async with _client(secured, username=None, password=None, api_key=key) as c:
            with pytest.raises(AuthenticationFailed) as info:
                await c.search("revenue")
            errors.append(info.value)
            assert c.breakers["elasticsearch"].attempts == 2  # one per leg: a 401 is never retried
            assert c.breakers["elasticsearch"].state == "closed"
            assert c.breakers["elasticsearch"].failures == 0  # the breaker never counts a 401
    text = " ".join(f"{e!s} {e!r} {e.__cause__!s}" for e in errors) + caplog.text
    for secret in (expiring, revoked):
        assert secret not in text
    print(f"\nexpired key: {errors[0]}\ninvalidated key: {errors[1]}")


async def test_an_api_key_without_the_index_privilege_is_access_denied(secured: LocalElasticsearch) -> None:
    _, encoded = await _api_key(secured, {"indices": [{"names": ["elsewhere-*"], "privileges": ["read"]}]})
    async with _client(secured, username=None, password=None, api_key=encoded) as c:
        with pytest.raises(AccessDenied) as info:
            await c.search("revenue", mode="bm25")
    assert encoded not in str(info.value)
    assert c.breakers["elasticsearch"].state == "closed"
