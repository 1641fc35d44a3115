"""The public API as tools see it: coroutine methods that are coroutine functions, parameters that
``inspect``, ``help()`` and ``create_autospec`` can read, each operation's keywords in step with its request
value object, a small root namespace, and a snapshot of every public name and signature — so that a rename is
a decision (update ``tests/unit/public_api.txt`` with ``UPDATE_API_SNAPSHOT=1``, and say it in the change log)."""

from __future__ import annotations

import dataclasses
import inspect
import os
import typing
from pathlib import Path
from unittest import mock

import pytest

import embeddings
import storage
import storage.filters
import storage.fusion
import storage.types
from storage import SearchClient
from storage._admin import Documents, Indices
from storage.types import AnswerRequest, IngestRequest, PageRequest, SearchRequest

SNAPSHOT = Path(__file__).with_name("public_api.txt")
PUBLIC_MODULES = [storage, storage.filters, storage.types, storage.fusion, embeddings]
ASYNC_METHODS = [
    "ensure_index",
    "health",
    "index_documents",
    "search",
    "leg_rankings",
    "search_tool",
    "answer",
    "search_page",
    "close_cursor",
    "enable_telemetry",
    "aclose",
]


@pytest.mark.parametrize("name", ASYNC_METHODS)
def test_every_async_method_is_a_coroutine_function(name: str) -> None:
    assert inspect.iscoroutinefunction(getattr(SearchClient, name))


@pytest.mark.parametrize("namespace", [Indices, Documents])
def test_the_namespaces_methods_are_coroutine_functions(namespace: type) -> None:
    public = [n for n in vars(namespace) if not n.startswith("_")]
    assert public
    assert all(inspect.iscoroutinefunction(getattr(namespace, n)) for n in public)


async def test_an_autospec_mock_of_the_client_is_awaitable_and_checks_its_arguments() -> None:
    client = mock.create_autospec(SearchClient, instance=True)
    await client.search("q", limit=5)
    client.search.assert_awaited_once_with("q", limit=5)
    with pytest.raises(TypeError):
        await client.search("q", lmit=5)  # a misspelt keyword is refused by the spec
    await client.index_documents([], refresh=True)


@pytest.mark.parametrize(
    ("method", "request_type"),
    [
        ("search", SearchRequest),
        ("search_page", PageRequest),
        ("answer", AnswerRequest),
        ("answer_stream", AnswerRequest),
        ("index_documents", IngestRequest),
    ],
)
def test_each_operation_takes_exactly_its_request_types_keywords(method: str, request_type: type) -> None:
    """The method builds its request from its own parameters: names, defaults and order must agree."""
    params = list(inspect.signature(getattr(SearchClient, method)).parameters.values())[1:]
    fields = [f for f in dataclasses.fields(request_type) if f.name != "_"]
    assert [p.name for p in params] == [f.name for f in fields]
    for p, f in zip(params, fields, strict=True):
        default = f.default if f.default is not dataclasses.MISSING else inspect.Parameter.empty
        assert p.default == default, p.name
    assert all(p.kind == inspect.Parameter.KEYWORD_ONLY for p in params[1:])


def test_walk_takes_what_search_page_takes_but_the_cursor() -> None:
    walk = list(inspect.signature(SearchClient.walk).parameters)
    page = [p for p in inspect.signature(SearchClient.search_page).parameters if p != "cursor"]
    assert walk == page


def test_help_shows_every_parameter() -> None:
    text = inspect.getdoc(SearchClient.search) or ""
    signature = str(inspect.signature(SearchClient.search))
    for name in ("mode", "filters", "limit", "offset", "tenant_id", "rerank", "facets", "diversity"):
        assert f"{name}:" in signature
        assert name in text


def test_a_request_value_object_is_sent_again_with_its_arguments() -> None:
    request = SearchRequest("q", limit=3, filters={"ticker": "AAPL"})
    assert SearchRequest(**request.arguments()) == request


def test_the_root_namespace_stays_small_and_holds_nothing_of_tenacity_or_pybreaker() -> None:
    assert len(storage.__all__) <= 45
    for module in PUBLIC_MODULES:
        for name in module.__all__:  # type: ignore[attr-defined]
            origin = getattr(getattr(module, name), "__module__", "") or ""
            assert not origin.startswith(("pybreaker", "tenacity")), name


def _describe(obj: object) -> str:
    if inspect.isclass(obj):
        if issubclass(obj, BaseException):
            return f"class({', '.join(b.__name__ for b in obj.__bases__)})"
        members = []
        for name, member in sorted(vars(obj).items()):
            if name.startswith("_") and name != "__init__":
                continue
            if inspect.isfunction(member):
                members.append(f"    {name}{inspect.signature(member)}")
            elif isinstance(member, classmethod | staticmethod):
                members.append(f"    {name}{inspect.signature(member.__func__)}")
            elif isinstance(member, property):
                members.append(f"    {name} (property)")
        fields = getattr(obj, "model_fields", None) or {
            f.name: f for f in (dataclasses.fields(obj) if dataclasses.is_dataclass(obj) else ())
        }
        if fields:
            members.append(f"    fields: {', '.join(n for n in fields if n != '_')}")
        return "class\n" + "\n".join(members)
    if inspect.isfunction(obj):
        return f"function{inspect.signature(obj)}"
    return f"{type(obj).__name__}"


def _snapshot() -> str:
    lines = []
    for module in PUBLIC_MODULES:
        for name in sorted(module.__all__):  # type: ignore[attr-defined]
            obj = getattr(module, name)
            if typing.get_origin(obj) is not None or type(obj).__name__ in ("_LiteralGenericAlias", "UnionType"):
                lines.append(f"{module.__name__}.{name}: type alias")
                continue
            lines.append(f"{module.__name__}.{name}: {_describe(obj)}")
    for namespace in (Indices, Documents):
        lines.append(f"SearchClient.{namespace.__name__.lower()}: {_describe(namespace)}")
    return "\n".join(lines) + "\n"


def test_the_public_api_matches_its_snapshot() -> None:
    """Names and signatures of everything public. A change here is a decision: run with
    UPDATE_API_SNAPSHOT=1 to accept it, and list it in CHANGELOG.md."""
    now = _snapshot()
    if os.environ.get("UPDATE_API_SNAPSHOT"):
        SNAPSHOT.write_text(now)
    assert now == SNAPSHOT.read_text(), "the public API changed: see the diff, then UPDATE_API_SNAPSHOT=1"
