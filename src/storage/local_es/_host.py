"""The machine side of the launcher: JDKs, free ports, the unprivileged user, process groups."""

from __future__ import annotations

import contextlib
import ctypes
import importlib.metadata
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

logger = logging.getLogger("storage.local_es")

#: The newest 8.x and 9.x integ-test distributions on Maven Central when this was written (CI tests both;
#: 9.4.0 and later were not published as integ-test-zip).
VERSION_8 = "8.19.21"
VERSION_9 = "9.3.8"
#: Enough for tests and the demo; the machine has 2 cores and is shared with the embedding model.
DEFAULT_HEAP = "512m"
#: A cold JVM plus a first cluster-state write takes ~15-25 s on 2 cores; leave generous headroom.
DEFAULT_START_TIMEOUT_S = 180.0
#: Elasticsearch flushes and closes its shards on SIGTERM; a few seconds is normal.
DEFAULT_STOP_TIMEOUT_S = 30.0
_MAVEN_DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.6.1"
_ARTIFACT = "org.elasticsearch.distribution.integ-test-zip:elasticsearch:{version}:zip"
_PR_SET_PDEATHSIG = 1
#: Elasticsearch refuses to run as root; when started by root, the launcher runs it as this system user.
SERVICE_USER = "hybrid-es"


def default_version() -> str:
    """``ES_VERSION`` if set; else the server the installed Python client talks to: a 9.x client sends
    ``compatible-with=9``, which 8.x servers refuse, so it gets :data:`VERSION_9`; an 8.x client gets
    :data:`VERSION_8` (it also talks to 9.x servers, through REST compatibility)."""
    explicit = os.environ.get("ES_VERSION")
    if explicit:
        return explicit
    client = importlib.metadata.version("elasticsearch")
    return VERSION_9 if int(client.split(".", 1)[0]) >= 9 else VERSION_8


class LocalElasticsearchError(RuntimeError):
    """The local Elasticsearch could not be fetched, started or stopped. The message says what to do."""


def default_cache_dir() -> Path:
    """``$ES_LOCAL_CACHE`` if set; else the user's cache folder (``~/.cache/hybrid-search/elasticsearch`` on
    Linux: one download for every project and directory). As root, ``/var/cache/hybrid-search/elasticsearch``:
    Elasticsearch then runs as an unprivileged user, who must be able to reach it (``/root`` is private)."""
    env = os.environ.get("ES_LOCAL_CACHE")
    if env:
        return Path(env)
    if os.geteuid() == 0:
        return Path("/var/cache/hybrid-search/elasticsearch")
    from platformdirs import user_cache_path

    return Path(user_cache_path("hybrid-search", appauthor=False)) / "elasticsearch"


def unreachable_by(user: str, *paths: Path) -> Path | None:
    """The first directory on the way to ``paths`` that ``user`` cannot enter (no search permission for it,
    as owner or as anyone else), or None when every path can be reached."""
    import pwd

    uid = pwd.getpwnam(user).pw_uid
    for path in paths:
        for directory in reversed(path.resolve().parents):
            mode, owner = directory.stat().st_mode, directory.stat().st_uid
            if not (mode & (0o100 if owner == uid else 0o001)):
                return directory
    return None


def required_java_major(version: str) -> int:
    """Elasticsearch 8.x runs on Java 17+, 9.x on Java 21+."""
    major = int(version.split(".", 1)[0])
    if major < 8:
        raise LocalElasticsearchError(f"Elasticsearch {version} is not supported; use 8.x or 9.x")
    return 17 if major == 8 else 21


def _java_major(java_home: Path) -> int | None:
    release = java_home / "release"
    if not (java_home / "bin" / "java").exists() or not release.exists():
        return None
    match = re.search(r'^JAVA_VERSION="(\d+)', release.read_text(errors="replace"), re.MULTILINE)
    return int(match.group(1)) if match else None


def find_java_home(version: str, search_root: Path = Path("/usr/lib/jvm")) -> Path:
    """A JDK that can run this Elasticsearch version: ``ES_JAVA_HOME`` if it fits, else the oldest fitting
    JDK under ``search_root`` (the oldest supported major is what Elasticsearch's own CI covers most)."""
    need = required_java_major(version)
    env = os.environ.get("ES_JAVA_HOME")
    if env:
        major = _java_major(Path(env))
        if major is None or major < need:
            raise LocalElasticsearchError(
                f"ES_JAVA_HOME={env} is Java {major}; Elasticsearch {version} needs Java {need}+"
            )
        return Path(env)
    candidates: list[tuple[int, str, Path]] = []
    if search_root.is_dir():
        for home in sorted(search_root.iterdir()):
            if home.is_symlink():
                continue  # Debian keeps aliases such as java-1.17.0-openjdk-amd64 -> java-17-openjdk-amd64
            major = _java_major(home)
            if major is not None and major >= need:
                candidates.append((major, home.name, home))
    if not candidates:
        raise LocalElasticsearchError(
            f"No JDK {need}+ found under {search_root} for Elasticsearch {version}. "
            f"Install one (e.g. `apt-get install openjdk-{need}-jdk-headless`) or set ES_JAVA_HOME."
        )
    return min(candidates)[2]


def _port_free(port: int) -> bool:
    """Nothing listens on ``port`` (a port in TIME_WAIT after a stop counts as free, as it does for the JVM,
    which binds with SO_REUSEADDR)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ensure_service_user() -> str:
    """Create the unprivileged system user Elasticsearch runs as when we are root (idempotent)."""
    import pwd

    try:
        pwd.getpwnam(SERVICE_USER)
    except KeyError:
        useradd = shutil.which("useradd") or "/usr/sbin/useradd"
        done = subprocess.run(
            [useradd, "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", SERVICE_USER],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode not in (0, 9):  # 9: created meanwhile by another process
            raise LocalElasticsearchError(
                f"Elasticsearch cannot run as root and `useradd {SERVICE_USER}` failed: {done.stderr.strip()}. "
                "Run as a normal user or set ES_URL."
            ) from None
    return SERVICE_USER


def _chown_tree(root: Path, user: str) -> None:
    shutil.chown(root, user, user)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in (*dirnames, *filenames):
            with contextlib.suppress(FileNotFoundError):
                os.chown(Path(dirpath) / name, *_uid_gid(user), follow_symlinks=False)


def _uid_gid(user: str) -> tuple[int, int]:
    import pwd

    entry = pwd.getpwnam(user)
    return entry.pw_uid, entry.pw_gid


def _set_parent_death_signal() -> None:
    """Runs in the child between fork and exec: SIGTERM it when the parent thread dies (Linux only)."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _stop_group(pgid: int, timeout_s: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None:
            proc.poll()  # reap the launcher so the group can empty
        if not _group_alive(pgid):
            return
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    if proc is not None:
        proc.wait()
