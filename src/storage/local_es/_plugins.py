"""What the minimal distribution lacks, built from that distribution's own jars and installed into it.

The integ-test zip leaves out the analysis-common and rest-root modules, so out of the box it has no
``english`` analyzer (the BM25 leg would be unstemmed), no ``pattern_capture`` / ``unique`` /
``uax_url_email`` (the ``.security`` index needs them: without them API keys cannot be created) and no
``GET /`` (``info()``, ``ping()``, Haystack). Two small plugins, their Java sources next to this module,
bring those back:

- ``hybrid-search-analysis``: a *stable* analysis plugin (the plugin API Elasticsearch keeps compatible
  across versions) registering the ``english`` analyzer (Lucene's ``EnglishAnalyzer``, the same class as the
  built-in one) and the token filters / tokenizer listed in ``plugins/analysis/EnglishAnalysis.java``;
- ``hybrid-search-root``: a classic plugin answering ``GET /`` and ``HEAD /``, compiled for the exact version.

Both are compiled with the JDK that runs the server (it must be a JDK with ``javac``, not a JRE) against
``ES_HOME/lib/*.jar``, once per version and source change, and copied into ``ES_HOME/plugins`` (a plain copy
is what ``elasticsearch-plugin install`` ends with; the installer itself runs out of memory at its default
64 MB heap while it scans classes, which ``named_components.json`` spares it). A full Elasticsearch has all of
this built in and needs none of it.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

from ._host import LocalElasticsearchError, logger

SOURCES = Path(__file__).parent / "plugins"
_STAMP = "hybrid-search.sha256"
_ANALYSIS_API = {
    "analyzer": "org.elasticsearch.plugin.analysis.AnalyzerFactory",
    "filter": "org.elasticsearch.plugin.analysis.TokenFilterFactory",
    "tokenizer": "org.elasticsearch.plugin.analysis.TokenizerFactory",
}


@dataclass(frozen=True)
class _Plugin:
    name: str
    source_dir: str
    description: str
    #: Classic plugins name their entry class; stable ones list their components instead.
    classname: str | None = None
    #: Stable plugins: kind -> {component name -> binary class name}.
    components: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()


_ANALYSIS_CLASS = "org.hybridsearch.analysis.EnglishAnalysis$"
PLUGINS = (
    _Plugin(
        name="hybrid-search-analysis",
        source_dir="analysis",
        description="English analysis for the minimal distribution (analysis-common subset)",
        components=(
            ("analyzer", (("english", _ANALYSIS_CLASS + "English"),)),
            (
                "filter",
                (
                    ("porter_stem", _ANALYSIS_CLASS + "PorterStem"),
                    ("kstem", _ANALYSIS_CLASS + "KStem"),
                    ("stemmer", _ANALYSIS_CLASS + "Stemmer"),
                    ("snowball", _ANALYSIS_CLASS + "Snowball"),
                    ("asciifolding", _ANALYSIS_CLASS + "AsciiFolding"),
                    ("pattern_capture", _ANALYSIS_CLASS + "PatternCapture"),
                    ("unique", _ANALYSIS_CLASS + "Unique"),
                ),
            ),
            ("tokenizer", (("uax_url_email", _ANALYSIS_CLASS + "UaxUrlEmail"),)),
        ),
    ),
    _Plugin(
        name="hybrid-search-root",
        source_dir="root",
        description="GET / and HEAD / for the minimal distribution (rest-root subset)",
        classname="org.hybridsearch.root.RootPlugin",
    ),
)


def _java_release(version: str) -> str:
    return "17" if version.startswith("8.") else "21"


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".")[:2] if part.isdigit())


def _sources(plugin: _Plugin, version: str) -> list[Path]:
    """The plugin's Java sources for ``version``: those every version shares, and those of its newest
    ``api-<major.minor>`` folder not newer than the server (where an extension point changed signature)."""
    folder = SOURCES / plugin.source_dir
    since = {d: _release(d.name.removeprefix("api-")) for d in folder.glob("api-*") if d.is_dir()}
    newest = max((d for d in since if since[d] <= _release(version)), key=since.__getitem__, default=None)
    return sorted(folder.glob("*.java")) + (sorted(newest.glob("*.java")) if newest else [])


def _fingerprint(plugin: _Plugin, version: str) -> str:
    digest = hashlib.sha256(f"{version}\n{plugin}\n".encode())
    for path in _sources(plugin, version):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def install_plugins(home: Path, version: str, java_home: Path, build_root: Path) -> None:
    """Build (if the sources or version changed) and install the plugins into ``home/plugins``. Idempotent."""
    build_root.mkdir(parents=True, exist_ok=True)
    with FileLock(build_root / f".{version}.lock"):  # a cluster's nodes start together: one builds
        for plugin in PLUGINS:
            fingerprint = _fingerprint(plugin, version)
            target = home / "plugins" / plugin.name
            stamp = target / _STAMP
            if stamp.exists() and stamp.read_text().strip() == fingerprint:
                continue
            started = time.monotonic()
            built = _build(plugin, home, version, java_home, build_root / version / plugin.name)
            partial = home / "plugins" / f".partial-{plugin.name}"
            shutil.rmtree(partial, ignore_errors=True)
            shutil.copytree(built, partial)
            (partial / _STAMP).write_text(fingerprint + "\n")
            shutil.rmtree(target, ignore_errors=True)
            partial.rename(target)
            logger.info(
                "elasticsearch plugin built and installed",
                extra={"plugin": plugin.name, "es_version": version, "seconds": round(time.monotonic() - started, 1)},
            )


def _build(plugin: _Plugin, home: Path, version: str, java_home: Path, out: Path) -> Path:
    javac = java_home / "bin" / "javac"
    if not javac.exists():
        raise LocalElasticsearchError(
            f"{java_home} is a Java runtime without `javac`; the local Elasticsearch compiles two small plugins "
            f"(English analysis, GET /) from the distribution's own jars. Install a JDK "
            f"(e.g. `apt-get install openjdk-{_java_release(version)}-jdk-headless`) or point ES_JAVA_HOME at one."
        )
    shutil.rmtree(out, ignore_errors=True)
    classes = out.parent / f"{plugin.name}-classes"
    shutil.rmtree(classes, ignore_errors=True)
    classes.mkdir(parents=True)
    sources = [str(p) for p in _sources(plugin, version)]
    cmd = [
        str(javac),
        "--release",
        _java_release(version),
        "-nowarn",
        "-encoding",
        "UTF-8",
        "-cp",
        str(home / "lib" / "*"),
        "-d",
        str(classes),
        *sources,
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise LocalElasticsearchError(
            f"compiling the {plugin.name} plugin for Elasticsearch {version} failed:\n{done.stderr[-2000:]}"
        )
    out.mkdir(parents=True)
    with zipfile.ZipFile(out / f"{plugin.name}.jar", "w", zipfile.ZIP_DEFLATED) as jar:
        jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\nCreated-By: hybrid-search-es\r\n\r\n")
        for path in sorted(classes.rglob("*.class")):
            jar.write(path, path.relative_to(classes).as_posix())
    shutil.rmtree(classes, ignore_errors=True)
    descriptor = {
        "description": plugin.description,
        "version": version,
        "name": plugin.name,
        "java.version": _java_release(version),
        "elasticsearch.version": version,
    }
    if plugin.classname is None:
        (out / "stable-plugin-descriptor.properties").write_text(_properties(descriptor))
        named = {_ANALYSIS_API[kind]: dict(entries) for kind, entries in plugin.components}
        (out / "named_components.json").write_text(json.dumps(named, indent=2) + "\n")
    else:
        descriptor["classname"] = plugin.classname
        (out / "plugin-descriptor.properties").write_text(_properties(descriptor))
    return out


def _properties(values: dict[str, str]) -> str:
    return "".join(f"{key}={value}\n" for key, value in values.items())
