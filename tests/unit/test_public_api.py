"""The public surface: what is exported, how errors nest, and what settings and documents accept."""

from __future__ import annotations

import pytest
from pydantic import SecretStr, ValidationError

import embeddings
import storage
from storage import (
    CircuitOpen,
    ConfigurationError,
    DependencyUnavailable,
    Document,
    ElasticsearchNotConfigured,
    SearchClient,
    SearchError,
    SearchSettings,
)


@pytest.mark.parametrize("module", [storage, embeddings])
def test_exports_are_sorted_and_importable(module: object) -> None:
    names = module.__all__  # type: ignore[attr-defined]
    assert names == sorted(names, key=lambda n: (not n.isupper(), n)) or names == sorted(names)
    for name in names:
        assert getattr(module, name) is not None


def test_every_error_is_a_search_error() -> None:
    for name in storage.__all__:
        obj = getattr(storage, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, SearchError), name
    assert issubclass(CircuitOpen, DependencyUnavailable)
    assert issubclass(ElasticsearchNotConfigured, ConfigurationError)


def test_missing_es_url_says_how_to_start_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ES_URL", raising=False)
    with pytest.raises(ElasticsearchNotConfigured, match=r"python -m storage\.local_es start"):
        SearchClient.from_settings(embedder=embeddings.HashingEmbedder())


def test_settings_read_the_environment_and_hide_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ES_URL", "http://a:9200, http://b:9200")
    monkeypatch.setenv("ES_INDEX", "filings")
    monkeypatch.setenv("ES_API_KEY", "s3cr3t")
    s = SearchSettings()
    assert s.hosts() == ["http://a:9200", "http://b:9200"]
    assert s.index == "filings"
    assert isinstance(s.api_key, SecretStr)
    assert "s3cr3t" not in repr(s)


def test_document_ids_are_explicit_or_derived_deterministically() -> None:
    a = Document(text="body", title="t")
    b = Document.model_validate({"text": "body", "title": "t"})
    assert a.id == b.id
    assert len(a.id) == 32
    assert Document(id="x", text="body").id == "x"
    assert Document(text="body", title="t", source="other").id != a.id


@pytest.mark.parametrize(
    "data",
    [
        {"text": ""},
        {"text": "  "},
        {"title": " \t", "text": "\n"},
        {"id": "x" * 513, "text": "t"},
        {"text": "t", "ticker": "T" * 32_767},
        {"text": "t", "source": "é" * 16_384},  # 32,768 bytes
        {"text": "cut \ud83d"},  # a lone surrogate: no request can carry it
        {"text": "t", "metadata": {"k": ["ok", "\udc00"]}},
        {"text": "t", "payload": {"deep": [{"x": "\ud800"}]}},
        {"text": "t", "unknown": 1},
        {"text": "t", "metadata": {"a.b": "x"}},
        {"text": "t", "published_at": "not a date"},
    ],
)
def test_invalid_documents_are_rejected(data: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        Document.model_validate(data)


def test_a_document_needs_a_title_or_a_text_and_embeds_what_it_has() -> None:
    assert Document(title="Only a title").embedding_text() == "Only a title"
    assert Document(text="Only a text").embedding_text() == "Only a text"
    assert Document(title="T", text="body").embedding_text() == "T\nbody"
    with pytest.raises(ValidationError, match="a title or a text"):
        Document(title=" ", text="")


def test_the_workbench_extra_installs_what_its_measure_and_tune_import() -> None:
    """``pip install 'hybrid-search-es[workbench]'`` alone: Measure and Tune run storage.evaluation, which needs
    the eval extra's packages (they failed with "evaluation needs the 'eval' extra": issue 63)."""
    import tomllib
    from pathlib import Path

    extras = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    names = {requirement.split(">")[0].split("=")[0].split("[")[0] for requirement in extras["workbench"]}
    assert {requirement.split(">")[0] for requirement in extras["eval"]} <= names


def test_a_stored_document_another_program_wrote_reads_back_as_stored_never_refused() -> None:
    from storage._types.models import stored_document

    blank = stored_document("x", {"title": "", "text": " ", "published_at": "not a date", "extra": 1})
    assert (blank.id, blank.title, blank.text, blank.published_at) == ("x", "", " ", "not a date")
    assert "extra" not in blank.model_dump(warnings=False)
    valid = stored_document("y", {"text": "fine", "published_at": "2024-05-01T00:00:00Z", "passages": []})
    assert valid == Document(id="y", text="fine", published_at="2024-05-01T00:00:00Z")


def test_a_hit_gives_its_stored_document_back_typed() -> None:
    from storage import SearchHit

    hit = SearchHit(
        id="a1",
        score=0.5,
        normalized_score=1.0,
        source={
            "title": "Apple",
            "text": "Revenue fell.",
            "ticker": "AAPL",
            "source": "q3.pdf",
            "published_at": "2024-05-01",
            "metadata": {"region": "eu"},
            "content_hash": "abc",
            "passages": [{"start": 0, "end": 5}],
        },
    )
    doc = hit.document
    assert isinstance(doc, Document)
    assert (doc.id, doc.title, doc.ticker, doc.source, doc.metadata) == (
        "a1",
        "Apple",
        "AAPL",
        "q3.pdf",
        {"region": "eu"},
    )
    assert doc.published_at is not None
    assert doc.published_at.isoformat().startswith("2024-05-01")


@pytest.mark.parametrize("ids", ["12", b"12", [""], ["a", 1], ["\ud800"], ["é" * 257]])
def test_ids_that_cannot_name_documents_are_refused_before_anything_is_sent(ids: object) -> None:
    from storage import InvalidQuery
    from storage._admin import id_list

    with pytest.raises(InvalidQuery):
        id_list(ids)  # type: ignore[arg-type]
    assert id_list(("1", "12")) == ["1", "12"]
