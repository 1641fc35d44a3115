"""Tenant isolation that cannot be skipped, and hostile input, against the real Elasticsearch."""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import AsyncIterator
from typing import Any, ClassVar

import pytest
from elastic_transport import AiohttpHttpNode
from elasticsearch import AsyncElasticsearch, BadRequestError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from embeddings import HashingEmbedder, OpenAIEmbedder
from storage import Document, InvalidDocument, InvalidQuery, SearchClient, SearchSettings
from storage._fusion.methods import fused_list
from storage._types.models import KEYWORD_MAX_BYTES
from storage.types import ResiliencePolicy

TENANTS = [f"tenant-{i}" for i in range(5)]
VOCAB = ["revenue", "guidance", "cloud", "margin", "growth", "outlook", "demand", "supply", "chip", "china", "quarter"]


@pytest.fixture
async def tenanted(settings: SearchSettings) -> AsyncIterator[SearchClient]:
    s = settings.model_copy(update={"multi_tenant": True})
    async with SearchClient.from_settings(s, embedder=HashingEmbedder(dimensions=64)) as c:
        await c.ensure_index()
        rng = random.Random(7)
        for tenant in TENANTS:
            docs = [
                Document(
                    id=f"{tenant}-{i}", title=" ".join(rng.sample(VOCAB, 3)), text=" ".join(rng.choices(VOCAB, k=12))
                )
                for i in range(40)
            ]
            report = await c.index_documents(docs, tenant_id=tenant, refresh=True)
            assert report.ok
        yield c


def _assert_own(hits: list[object], tenant: str) -> int:
    for h in hits:
        assert h.source["tenant_id"] == tenant, (h.id, tenant)  # type: ignore[attr-defined]
    return len(hits)


async def test_no_search_path_ever_returns_another_tenants_document(
    tenanted: SearchClient, settings: SearchSettings
) -> None:
    rng = random.Random(11)
    seen = 0
    dead = OpenAIEmbedder(model="m", dimensions=64, base_url="http://127.0.0.1:9/v1", api_key="k", timeout_s=1)
    policy = ResiliencePolicy(attempts=1, fail_max=1000)
    s = settings.model_copy(update={"multi_tenant": True})
    async with SearchClient(
        tenanted.elasticsearch, dead, s, owns_clients=False, policies={"embeddings": policy}
    ) as degraded:
        for _ in range(25):
            tenant = rng.choice(TENANTS)
            query = " ".join(rng.sample(VOCAB, rng.randint(1, 4)))
            for mode in ("bm25", "knn", "hybrid"):
                for trip in ("parallel", "msearch"):
                    res = await tenanted.search(query, mode=mode, tenant_id=tenant, round_trip=trip, limit=20)  # type: ignore[arg-type]
                    seen += _assert_own(res.hits, tenant)
            res = await degraded.search(query, tenant_id=tenant, limit=20)
            assert res.degraded
            seen += _assert_own(res.hits, tenant)
            res = await tenanted.search(query + " qzx", mode="bm25", tenant_id=tenant, recover=True, scopes=[{}])
            seen += _assert_own(res.hits, tenant)
            cursor = None
            walked: list[str] = []
            while True:
                page = await tenanted.search_page(query, cursor=cursor, tenant_id=tenant, limit=15, window=10)
                seen += _assert_own(page.hits, tenant)
                walked += page.ids
                cursor = page.next_cursor
                if cursor is None:
                    break
            assert len(walked) == len(set(walked))
    await dead.aclose()
    assert seen > 1000
    print(f"\ntenancy: {seen} hits checked across modes, msearch, degraded, recovery and paging; 0 foreign")


async def test_a_multi_tenant_client_refuses_anything_without_a_tenant(tenanted: SearchClient) -> None:
    with pytest.raises(InvalidQuery, match="multi-tenant"):
        await tenanted.search("revenue")
    with pytest.raises(InvalidQuery, match="multi-tenant"):
        await tenanted.search_page("revenue")
    with pytest.raises(InvalidQuery, match="multi-tenant"):
        await tenanted.documents.count()
    with pytest.raises(InvalidQuery, match="multi-tenant"):
        await tenanted.documents.get("tenant-0-1")
    with pytest.raises(InvalidDocument, match="no tenant_id"):
        await tenanted.index_documents([Document(id="x", text="y")], on_invalid="raise")
    with pytest.raises(InvalidDocument, match="belongs to tenant"):
        await tenanted.index_documents(
            [Document(id="x", text="y", tenant_id="tenant-1")], tenant_id="tenant-2", on_invalid="raise"
        )
    report = await tenanted.index_documents(
        [Document(id="x", text="y", tenant_id="tenant-1"), Document(id="z", text="y")], tenant_id="tenant-2"
    )
    assert report.indexed == ["z"]
    assert [(f.id, f.reason, f.position) for f in report.failed] == [("x", "invalid_document", 0)]
    assert "belongs to tenant" in report.failed[0].detail
    assert await tenanted.documents.get("tenant-0-1", tenant_id="tenant-1") is None
    own = await tenanted.documents.get("tenant-0-1", tenant_id="tenant-0")
    assert own is not None
    assert own.tenant_id == "tenant-0"
    assert await tenanted.documents.count(tenant_id="tenant-3") == 40
    page = await tenanted.search_page("revenue", tenant_id="tenant-0", limit=5)
    with pytest.raises(InvalidQuery, match="another search"):  # a cursor cannot switch tenants
        await tenanted.search_page("revenue", cursor=page.next_cursor, tenant_id="tenant-1", limit=5)


class _Recording(AiohttpHttpNode):
    """A real transport node that keeps every request's method, path and body."""

    seen: ClassVar[list[tuple[str, str, bytes]]] = []

    async def perform_request(self, method: str, target: str, body: bytes | None = None, **kw: Any) -> Any:  # type: ignore[override]
        _Recording.seen.append((method, target, body or b""))
        return await super().perform_request(method, target, body=body, **kw)


async def test_every_read_a_multi_tenant_client_sends_carries_the_tenant_filter(
    tenanted: SearchClient, settings: SearchSettings
) -> None:
    s = settings.model_copy(update={"multi_tenant": True})
    es = AsyncElasticsearch(settings.url, node_class=_Recording)
    _Recording.seen.clear()
    tenant = {"term": {"tenant_id": "tenant-2"}}
    async with SearchClient(es, HashingEmbedder(dimensions=64), s, owns_clients=False) as c:
        for trip in ("parallel", "msearch"):
            await c.search("revenue guidance", tenant_id="tenant-2", round_trip=trip, recover=True, scopes=[{}])  # type: ignore[arg-type]
        await c.search("qzxqzx", mode="bm25", tenant_id="tenant-2", recover=True)
        async for _ in c.walk("revenue", tenant_id="tenant-2", limit=30, window=10):
            pass
        await c.documents.count(tenant_id="tenant-2")
        await c.documents.exist(["tenant-1-1", "tenant-2-1"], tenant_id="tenant-2")
        await c.leg_rankings("revenue", tenant_id="tenant-2")
    await es.close()
    reads = [(t, b) for m, t, b in _Recording.seen if t.split("?")[0].endswith(("/_search", "/_count", "/_msearch"))]
    assert len(reads) >= 12  # the legs, fuzzy retries, scope tiers, fetches, pages, counts and lookups
    for target, body in reads:
        items = (
            [json.loads(line) for line in body.splitlines() if line.strip()] if b"\n" in body else [json.loads(body)]
        )
        for item in items:
            if "index" in item and len(item) <= 2 and "query" not in item and "knn" not in item:
                continue  # an _msearch header line
            filters = json.dumps(item)
            assert json.dumps(tenant) in filters, (target, item)


def test_a_scope_is_made_only_with_the_tenant_rule() -> None:
    from storage._dsl.tenancy import Scope, read_scope

    with pytest.raises(TypeError, match="read_scope"):
        Scope((), None, ())
    with pytest.raises(InvalidQuery, match="multi-tenant"):
        read_scope(None, None, what="search", multi_tenant=True)
    scope = read_scope({"ticker": "X"}, "t1", what="search", multi_tenant=True)
    assert {"term": {"tenant_id": "t1"}} in scope.clauses
    assert scope.widened({}).clauses == ({"term": {"tenant_id": "t1"}},)  # a wider tier keeps the tenant


def test_the_second_check_drops_results_of_another_tenant() -> None:
    from storage._dsl.tenancy import keep_tenant

    fused = fused_list({"bm25": (["a", "b"], [1.0, 0.5])})
    tenant_of = {"a": "t1", "b": "t2"}
    kept, dropped = keep_tenant(fused, tenant_of, "t1")
    assert [f.id for f in kept] == ["a"]
    assert dropped == 1


@pytest.mark.parametrize("index", ["*", "_all", "docs*", "-docs", "docs,*", "remote:docs", "Docs", "../x", ""])
async def test_index_names_are_validated(client: SearchClient, index: str) -> None:
    with pytest.raises(InvalidQuery):
        await client.search("x", index=index or ",")


def test_filter_fields_are_validated_and_scripts_impossible() -> None:
    from storage._dsl.filters import parse_filters

    for bad in ({"script": "1"}, {"query_string": "x"}, {"_source": "x"}, {"ticker": {"script": "x"}}):
        with pytest.raises(InvalidQuery):
            parse_filters(bad)


_HOSTILE = st.one_of(
    st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=300),
    st.text(alphabet=st.characters(codec=None, categories=["Cc", "Cs", "Zs", "Po", "Sm"]), max_size=60),
    st.lists(
        st.sampled_from(
            [
                '"',
                "(",
                ")",
                "*",
                "?",
                "~",
                "^2",
                "AND",
                "OR",
                "NOT",
                "-",
                "+",
                "\\",
                "/",
                ":",
                "{",
                "}",
                "[",
                "]",
                '{"query":',
                '"match_all"',
                "}}",
                "title:",
                "ticker:",
                "date:2024-13",
                "\x00",
                "\ud800",
                "\u202e",
                "script",
                "_source",
                "*:*",
                "a" * 300,
                "revenue",
            ]
        ),
        max_size=30,
    ).map(" ".join),
    st.integers(1000, 20000).map(lambda n: "revenue " * (n // 8)),
)


@settings(max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=_HOSTILE, choice=st.integers(0, 5))
async def test_any_query_text_gives_a_result_or_a_typed_validation_error(
    loaded_for_fuzz: SearchClient, text: str, choice: int
) -> None:
    mode = ("bm25", "hybrid", "knn", "bm25", "bm25", "hybrid")[choice]
    syntax = "boolean" if choice >= 4 else "plain"
    try:
        res = await loaded_for_fuzz.search(text, mode=mode, syntax=syntax, limit=5)  # type: ignore[arg-type]
    except InvalidQuery:
        return
    assert res.hits is not None
    assert not res.degraded, res.legs


async def test_a_keyword_value_over_the_servers_term_limit_is_refused_before_it_is_written(
    client: SearchClient, es: AsyncElasticsearch
) -> None:
    index = await client.ensure_index()
    at_limit = "é" * (KEYWORD_MAX_BYTES // 2)  # two bytes each: exactly the limit
    over = at_limit + "x"
    report = await client.index_documents(
        [
            {"id": "fits", "text": "a ticker as long as one can be", "ticker": at_limit},
            {"id": "over", "text": "a source one byte too long", "source": over},
        ],
        refresh=True,
    )
    assert report.indexed == ["fits"]
    (failed,) = report.failed
    assert (failed.id, failed.reason) == ("over", "invalid_document")
    assert "source is longer than Elasticsearch's 32,766-byte limit" in failed.detail
    assert (await client.search("ticker", mode="bm25", filters={"ticker": at_limit})).ids == ["fits"]
    # The bound is the server's own: written past the client, the byte more is refused by Elasticsearch.
    with pytest.raises(BadRequestError, match="source"):
        await es.index(index=index, id="raw", document={"text": "written raw", "source": over})


BROKEN = json.loads('"cut inside an emoji \\ud83d"')  # a lone surrogate: what a broken decode leaves


async def test_text_that_is_not_unicode_is_refused_by_name_and_never_opens_the_breaker(client: SearchClient) -> None:
    await client.ensure_index()
    report = await client.index_documents(
        [
            {"id": "fine", "text": "a fine note on revenue"},
            {"id": "broken-text", "text": BROKEN},
            {"id": "broken-meta", "text": "metadata", "metadata": {"tag": ["ok", BROKEN]}},
            {"id": "broken-payload", "text": "payload", "payload": {"deep": [{"x": BROKEN}]}},
        ],
        refresh=True,
    )
    assert report.indexed == ["fine"]
    assert {f.id: f.reason for f in report.failed} == dict.fromkeys(
        ("broken-text", "broken-meta", "broken-payload"), "invalid_document"
    )
    assert all("not valid Unicode" in f.detail for f in report.failed)
    calls = [
        lambda: client.search("revenue", filters={"ticker": BROKEN}),
        lambda: client.search("revenue", filters={"metadata.page": {"gte": BROKEN}}),
        lambda: client.search("revenue", tenant_id=BROKEN),
        lambda: client.documents.get(BROKEN),
        lambda: client.documents.get_many(["fine", BROKEN]),
        lambda: client.documents.exist([BROKEN]),
        lambda: client.documents.delete([BROKEN]),
        lambda: client.documents.count(tenant_id=BROKEN),
    ]
    for _ in range(2):  # more than the breaker's failure threshold (5) in all
        for call in calls:
            with pytest.raises(InvalidQuery, match="not valid Unicode"):
                await call()
    assert client.breakers["elasticsearch"].state == "closed"
    assert client.breakers["elasticsearch"].failures == 0
    assert (await client.search("revenue")).ids == ["fine"]


async def test_ids_given_as_one_string_or_empty_are_refused_by_name_and_nothing_is_deleted(
    client: SearchClient,
) -> None:
    # Iterated, delete("12") deleted documents "1" and "2" and kept "12"; an empty id failed as a dependency error.
    await client.ensure_index()
    await client.index_documents([Document(id=i, text="quarterly revenue") for i in ("1", "2", "12")], refresh=True)
    calls = [
        (lambda: client.documents.delete("12", refresh=True), "one string, not a list of ids"),
        (lambda: client.documents.exist("12"), "one string, not a list of ids"),
        (lambda: client.documents.get_many("12"), "one string, not a list of ids"),
        (lambda: client.documents.get(""), "non-empty string"),
        (lambda: client.documents.get_many(["1", ""]), "non-empty string"),
        (lambda: client.documents.delete([""]), "non-empty string"),
        (lambda: client.documents.exist([1]), "non-empty string"),  # type: ignore[list-item]
        (lambda: client.documents.explain("", "revenue"), "non-empty string"),
    ]
    for call, message in calls:
        with pytest.raises(InvalidQuery, match=message):
            await call()
    assert await client.documents.exist(["1", "2", "12"]) == {"1", "2", "12"}
    assert client.breakers["elasticsearch"].failures == 0


async def test_an_empty_index_name_is_refused_not_read_as_the_clients_alias(client: SearchClient) -> None:
    # index="" (an unset variable's value) searched, and wrote to, the client's own alias.
    await client.ensure_index()
    await client.index_documents([Document(id="kept", text="quarterly revenue")], refresh=True)
    calls = [
        lambda: client.search("revenue", index=""),
        lambda: client.search_page("revenue", index=" "),
        lambda: client.index_documents([Document(id="stray", text="x")], index=""),
    ]
    for call in calls:
        with pytest.raises(InvalidQuery, match="index must name an index or alias"):
            await call()
    assert await client.documents.exist(["kept", "stray"]) == {"kept"}
    assert (await client.search_tool("revenue", "hybrid", [])).ids == ["kept"]  # (the seed shape: [] is "none")


async def test_a_document_another_program_wrote_with_a_lone_surrogate_is_found_and_shown_in_every_mode(
    client: SearchClient, es: AsyncElasticsearch
) -> None:
    # JSON allows a lone surrogate escape (a JavaScript string cut inside an emoji is written so) and
    # Elasticsearch stores and returns it; orjson refuses to read it, which failed every search showing it.
    index = await client.ensure_index()
    await client.index_documents([Document(id="ours", text="quarterly revenue note")], refresh=True)
    body = b'{"title": "foreign \\udc00 title", "text": "quarterly revenue written by node \\ud83d cut"}'
    await es.perform_request(
        "PUT",
        f"/{index}/_doc/foreign",
        params={"refresh": "true"},
        body=body,
        headers={"content-type": "application/json", "accept": "application/json"},
    )
    for mode in ("bm25", "hybrid"):  # (it has no vector: the kNN leg cannot find it)
        res = await client.search("quarterly revenue", mode=mode, limit=5)
        assert set(res.ids) == {"ours", "foreign"}, mode
        foreign = next(h for h in res.hits if h.id == "foreign")
        assert foreign.title == "foreign \ufffd title", mode
        assert "\ufffd" in " ".join(foreign.highlights["text"]), mode
        assert not res.degraded, mode
    stored = await client.documents.get("foreign")
    assert stored is not None
    assert stored.text == "quarterly revenue written by node \ufffd cut"
    assert client.breakers["elasticsearch"].failures == 0


@pytest.fixture(scope="module")
async def loaded_for_fuzz(es_url: str) -> AsyncIterator[SearchClient]:
    s = SearchSettings(url=es_url, index=f"fuzz-hostile-input-{uuid.uuid4().hex[:8]}")
    async with SearchClient.from_settings(s, embedder=HashingEmbedder(dimensions=64)) as c:
        await c.indices.delete()
        await c.ensure_index()
        await c.index_documents(
            [Document(id=f"f{i}", text=f"revenue guidance {w}") for i, w in enumerate(VOCAB)], refresh=True
        )
        yield c
        await c.indices.delete()
