"""The plugin build of the local launcher, without a server (the integration tests run on its result)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from storage.local_es import LocalElasticsearchError
from storage.local_es._plugins import PLUGINS, SOURCES, _build


def test_a_java_runtime_without_javac_is_an_error_that_says_what_to_install(tmp_path: Path) -> None:
    jre = tmp_path / "jre"
    (jre / "bin").mkdir(parents=True)
    (jre / "bin" / "java").write_text("")
    with pytest.raises(LocalElasticsearchError, match=r"without `javac`.*openjdk-17-jdk-headless"):
        _build(PLUGINS[0], tmp_path / "home", "8.19.21", jre, tmp_path / "out")


def test_every_registered_component_names_a_class_of_the_sources() -> None:
    source = (SOURCES / "analysis" / "EnglishAnalysis.java").read_text()
    analysis = next(p for p in PLUGINS if p.classname is None)
    names = {name for _, entries in analysis.components for name, _ in entries}
    assert {"english", "porter_stem", "kstem", "stemmer", "snowball", "asciifolding"} <= names
    assert {"pattern_capture", "unique", "uax_url_email"} <= names  # what the .security index needs
    for _, entries in analysis.components:
        for name, cls in entries:
            simple = cls.rsplit("$", 1)[1]
            assert f'@NamedComponent("{name}")\n    public static final class {simple} ' in source
    json.dumps({kind: dict(entries) for kind, entries in analysis.components})  # serialisable as shipped
