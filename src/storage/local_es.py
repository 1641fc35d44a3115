"""A real Elasticsearch on 127.0.0.1 without Docker: fetched from Maven Central, run as a local process.

This is how development machines and CI get a real server. It:

1. fetches ``org.elasticsearch.distribution.integ-test-zip:elasticsearch:<version>:zip`` with the ordinary
   Maven client (``mvn dependency:copy``) into a cache directory, reused when present;
2. unpacks it (keeping the executable bits);
3. picks a JDK from ``ES_JAVA_HOME`` or ``/usr/lib/jvm`` that fits the version (8.x: Java 17+,
   9.x: Java 21+), preferring the oldest that fits (the best-tested one);
4. starts it bound to 127.0.0.1 on free ports with a small heap, ``discovery.type=single-node`` and
   security off, and waits until the cluster is yellow or green;
5. stops it with SIGTERM to its process group, then SIGKILL after a grace period.

No orphan JVMs: the launcher process group is stopped on exit, on exceptions, on SIGINT/SIGTERM (via the
context manager / ``atexit``), and, if the Python process dies hard, the kernel sends the Elasticsearch
launcher SIGTERM (``PR_SET_PDEATHSIG``); the server JVM exits when its launcher's pipe closes.

Command line::

    python -m storage.local_es run      # start, print the URL, wait for Ctrl-C, stop
    python -m storage.local_es start    # start in the background, print the URL and PID
    python -m storage.local_es stop     # stop the one started by `start`
    python -m storage.local_es fetch    # only download and unpack
"""

from __future__ import annotations

import argparse
import atexit
import base64
import contextlib
import ctypes
import json
import logging
import os
import re
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

__all__ = [
    "DEFAULT_VERSION",
    "LocalCluster",
    "LocalElasticsearch",
    "LocalElasticsearchError",
    "default_cache_dir",
    "find_java_home",
    "url_or_local",
]

logger = logging.getLogger("storage.local_es")

#: The newest 8.x integ-test distribution on Maven Central when this was written (8.19.x is what CI tests).
DEFAULT_VERSION = "8.19.21"
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


class LocalElasticsearchError(RuntimeError):
    """The local Elasticsearch could not be fetched, started or stopped. The message says what to do."""


def default_cache_dir() -> Path:
    """``$ES_LOCAL_CACHE`` if set, else ``./.cache/elasticsearch`` under the current directory."""
    env = os.environ.get("ES_LOCAL_CACHE")
    return Path(env) if env else Path.cwd() / ".cache" / "elasticsearch"


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


@dataclass
class LocalElasticsearch:
    """One single-node Elasticsearch run from the integ-test distribution.

    Use it as a context manager (``with LocalElasticsearch() as es: es.url``) or call ``start()`` and
    ``stop()``. ``start()`` must run on a thread that outlives the server (normally the main thread):
    the parent-death signal is tied to the thread that started the process.
    """

    version: str = DEFAULT_VERSION
    cache_dir: Path = field(default_factory=default_cache_dir)
    heap: str = DEFAULT_HEAP
    start_timeout_s: float = DEFAULT_START_TIMEOUT_S
    stop_timeout_s: float = DEFAULT_STOP_TIMEOUT_S
    settings: dict[str, str] = field(default_factory=dict)
    name: str = "default"
    #: Delete the instance directory (data, logs) on stop: for test runs that must leave nothing behind.
    ephemeral: bool = False
    #: SIGTERM the server when the starting thread dies (False only for the detached `start` command).
    die_with_parent: bool = True
    #: Security on: TLS on HTTP with certificates made by the distribution's own ``elasticsearch-certutil``,
    #: and a superuser ``admin_user`` in the file realm. ``url`` is then https; clients need ``ca_cert``.
    security: bool = False
    admin_user: str = "hybrid-admin"
    admin_password: str = field(default_factory=lambda: secrets.token_urlsafe(18), repr=False)
    #: ``security=True``: more file-realm users, name -> (password, roles), and file-based roles
    #: (``roles.yml``), name -> role descriptor (e.g. index privileges limited to one index pattern).
    users: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict, repr=False)
    roles: dict[str, dict[str, object]] = field(default_factory=dict)
    #: False for a node of a multi-node cluster (``settings`` then carry the discovery settings).
    single_node: bool = True

    process: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    http_port: int | None = field(default=None, init=False)
    transport_port: int | None = field(default=None, init=False)

    # -- paths -------------------------------------------------------------------------------------------
    @property
    def zip_path(self) -> Path:
        return self.cache_dir / "downloads" / f"elasticsearch-{self.version}.zip"

    @property
    def home(self) -> Path:
        return self.cache_dir / "dist" / f"elasticsearch-{self.version}"

    @property
    def instance_dir(self) -> Path:
        return self.cache_dir / "instances" / f"{self.version}-{self.name}"

    @property
    def url(self) -> str:
        if self.http_port is None:
            raise LocalElasticsearchError("Elasticsearch is not started")
        return f"{'https' if self.security else 'http'}://127.0.0.1:{self.http_port}"

    @property
    def config_dir(self) -> Path:
        """The node's configuration: the distribution's own, or a per-instance copy when secured."""
        return self.instance_dir / "config" if self.security else self.home / "config"

    @property
    def ca_cert(self) -> Path:
        """The CA certificate that signed the HTTP certificate (``security=True`` only)."""
        return self.instance_dir / "config" / "certs" / "ca" / "ca.crt"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    # -- fetch -------------------------------------------------------------------------------------------
    def fetch(self) -> Path:
        """Download (if not cached) and unpack (if not unpacked) the distribution; return its home."""
        if (self.home / "bin" / "elasticsearch").exists():
            return self.home
        if not self.zip_path.exists():
            self._download()
        self._unpack()
        return self.home

    def _download(self) -> None:
        mvn = shutil.which("mvn")
        if mvn is None:
            raise LocalElasticsearchError(
                "Maven (`mvn`) is needed to fetch Elasticsearch: `apt-get install maven`, "
                "or set ES_URL to a running Elasticsearch."
            )
        self.zip_path.parent.mkdir(parents=True, exist_ok=True)
        cmd = [
            mvn,
            "-B",
            "-q",
            f"{_MAVEN_DEPENDENCY_PLUGIN}:copy",
            f"-Dartifact={_ARTIFACT.format(version=self.version)}",
            f"-DoutputDirectory={self.zip_path.parent}",
        ]
        logger.info("fetching elasticsearch", extra={"es_version": self.version})
        done = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=self.cache_dir)
        if done.returncode != 0 or not self.zip_path.exists():
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
            raise LocalElasticsearchError(
                f"mvn could not fetch {_ARTIFACT.format(version=self.version)} "
                f"(exit {done.returncode}). Is the version published? Output:\n{tail}"
            )

    def _unpack(self) -> None:
        target = self.home.parent
        target.mkdir(parents=True, exist_ok=True)
        partial = target / f".partial-{self.version}-{os.getpid()}"
        shutil.rmtree(partial, ignore_errors=True)
        with zipfile.ZipFile(self.zip_path) as archive:
            for info in archive.infolist():
                path = Path(archive.extract(info, partial))
                mode = (info.external_attr >> 16) & 0o777
                if mode and not info.is_dir():
                    path.chmod(mode)
        unpacked = partial / f"elasticsearch-{self.version}"
        if not (unpacked / "bin" / "elasticsearch").exists():
            raise LocalElasticsearchError(f"{self.zip_path} does not contain elasticsearch-{self.version}/")
        shutil.rmtree(self.home, ignore_errors=True)
        unpacked.rename(self.home)
        shutil.rmtree(partial, ignore_errors=True)

    # -- lifecycle ---------------------------------------------------------------------------------------
    def start(self, *, wait: bool = True) -> str:
        """Fetch if needed, start, wait until yellow/green; return the URL. Idempotent while running.

        ``wait=False`` returns once the process is spawned (the nodes of a new cluster must all be up
        before any is ready); :meth:`wait_ready` then waits.
        """
        if self.process is not None and self.process.poll() is None:
            return self.url
        home = self.fetch()
        java_home = find_java_home(self.version)
        data = self.instance_dir / "data"
        logs = self.instance_dir / "logs"
        data.mkdir(parents=True, exist_ok=True)
        logs.mkdir(parents=True, exist_ok=True)
        # A restart keeps its ports, so clients configured with the URL reconnect by themselves.
        self.http_port = self.http_port or _free_port()
        self.transport_port = self.transport_port or _free_port()
        es_settings = {
            "cluster.name": f"hybrid-search-local-{self.name}",
            "node.name": f"local-{self.name}",
            "network.host": "127.0.0.1",
            "http.port": str(self.http_port),
            "transport.port": str(self.transport_port),
            "xpack.security.enabled": "false",
            "path.data": str(data),
            "path.logs": str(logs),
            # Developer machines are often nearly full; the watermarks would make new indices red.
            "cluster.routing.allocation.disk.threshold_enabled": "false",
        }
        if self.single_node:
            es_settings["discovery.type"] = "single-node"
        if self.security:
            self._prepare_security(home, java_home)
            es_settings |= {
                "xpack.security.enabled": "true",
                "xpack.security.http.ssl.enabled": "true",
                "xpack.security.http.ssl.key": "certs/node/node.key",
                "xpack.security.http.ssl.certificate": "certs/node/node.crt",
                "xpack.security.http.ssl.certificate_authorities": "certs/ca/ca.crt",
            }
        es_settings |= self.settings
        cmd = [str(home / "bin" / "elasticsearch"), *(f"-E{k}={v}" for k, v in es_settings.items())]
        env = {
            **os.environ,
            "ES_JAVA_HOME": str(java_home),
            "ES_JAVA_OPTS": f"-Xms{self.heap} -Xmx{self.heap} {os.environ.get('ES_LOCAL_JAVA_OPTS', '')}",
        }
        env.pop("JAVA_HOME", None)
        if self.security:
            env["ES_PATH_CONF"] = str(self.config_dir)
        run_as: str | None = None
        if os.geteuid() == 0:
            run_as = _ensure_service_user()
            _chown_tree(self.instance_dir, run_as)
            _chown_tree(home / "config", run_as)  # it writes a keystore and jvm.options.d there
            env["HOME"] = str(self.instance_dir)
        out = (logs / "console.log").open("ab")
        started = time.monotonic()
        try:
            self.process = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # its own process group: stop() signals the launcher and the JVM
                user=run_as,
                group=run_as,
                extra_groups=[] if run_as else None,
                preexec_fn=_set_parent_death_signal if self.die_with_parent else None,
            )
        finally:
            out.close()
        atexit.register(self.stop)
        (self.instance_dir / "pid").write_text(str(self.process.pid))
        self._started_at = started
        if wait:
            self.wait_ready()
        return self.url

    def wait_ready(self) -> str:
        """Wait until the node answers with a yellow or green cluster (see ``start(wait=False)``)."""
        started = getattr(self, "_started_at", time.monotonic())
        try:
            self._wait_ready(started)
        except BaseException:
            self.stop()
            raise
        assert self.process is not None
        (self.instance_dir / "url").write_text(self.url)
        logger.info(
            "elasticsearch started",
            extra={
                "es_version": self.version,
                "url": self.url,
                "pid": self.process.pid,
                "start_seconds": round(time.monotonic() - started, 1),
            },
        )
        return self.url

    def _prepare_security(self, home: Path, java_home: Path) -> None:
        """A per-instance config dir with TLS certificates (elasticsearch-certutil) and a file-realm superuser
        (elasticsearch-users). Made once per instance; a restart reuses it."""
        config = self.instance_dir / "config"
        env = {**os.environ, "ES_JAVA_HOME": str(java_home), "ES_PATH_CONF": str(config)}
        env.pop("JAVA_HOME", None)

        def tool(*args: str) -> None:
            done = subprocess.run([*args], env=env, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise LocalElasticsearchError(f"{Path(args[0]).name} failed: {(done.stdout + done.stderr)[-800:]}")

        if not (config / "certs" / "node" / "node.crt").exists():
            shutil.rmtree(config, ignore_errors=True)
            shutil.copytree(home / "config", config)
            certs = config / "certs"
            certs.mkdir()
            certutil = str(home / "bin" / "elasticsearch-certutil")
            tool(certutil, "ca", "--pem", "--silent", "--out", str(certs / "ca.zip"))
            with zipfile.ZipFile(certs / "ca.zip") as archive:
                archive.extractall(certs)
            tool(
                certutil, "cert", "--pem", "--silent", "--name", "node", "--ip", "127.0.0.1", "--dns", "localhost",
                "--ca-cert", str(certs / "ca" / "ca.crt"), "--ca-key", str(certs / "ca" / "ca.key"),
                "--out", str(certs / "node.zip"),
            )  # fmt: skip
            with zipfile.ZipFile(certs / "node.zip") as archive:
                archive.extractall(certs)
        # JSON is YAML: file-based roles, read by the node at start (and reloaded when the file changes).
        (config / "roles.yml").write_text("".join(f"{json.dumps(n)}: {json.dumps(r)}\n" for n, r in self.roles.items()))
        users = str(home / "bin" / "elasticsearch-users")
        accounts = {self.admin_user: (self.admin_password, ("superuser",)), **self.users}
        for user, (password, roles) in accounts.items():
            with contextlib.suppress(LocalElasticsearchError):  # a restart: the user exists already
                tool(users, "userdel", user)
            tool(users, "useradd", user, "-p", password, "-r", ",".join(roles))

    def _wait_ready(self, started: float) -> None:
        assert self.process is not None
        health = f"{self.url}/_cluster/health?wait_for_status=yellow&timeout=1s"
        context: ssl.SSLContext | None = None
        headers: dict[str, str] = {}
        if self.security:
            context = ssl.create_default_context(cafile=str(self.ca_cert))
            token = base64.b64encode(f"{self.admin_user}:{self.admin_password}".encode()).decode()
            headers["Authorization"] = f"Basic {token}"
        while True:
            code = self.process.poll()
            if code is not None:
                raise LocalElasticsearchError(
                    f"Elasticsearch {self.version} exited with code {code} while starting. "
                    f"Last log lines:\n{self.log_tail()}"
                )
            try:
                request = urllib.request.Request(health, headers=headers)
                with urllib.request.urlopen(request, timeout=5, context=context) as resp:
                    if json.load(resp).get("status") in ("yellow", "green"):
                        return
            except (urllib.error.URLError, OSError, ValueError):
                pass
            if time.monotonic() - started > self.start_timeout_s:
                raise LocalElasticsearchError(
                    f"Elasticsearch {self.version} did not become ready within {self.start_timeout_s:.0f} s. "
                    f"Last log lines:\n{self.log_tail()}"
                )
            time.sleep(0.5)

    def log_tail(self, lines: int = 30) -> str:
        console = self.instance_dir / "logs" / "console.log"
        if not console.exists():
            return "(no console log)"
        return "\n".join(console.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        """SIGTERM the process group, wait, then SIGKILL it. Safe to call twice."""
        proc = self.process
        if proc is None:
            return
        self.process = None
        with contextlib.suppress(Exception):
            atexit.unregister(self.stop)
        _stop_group(proc.pid, self.stop_timeout_s, proc)
        with contextlib.suppress(FileNotFoundError):
            (self.instance_dir / "pid").unlink()
        with contextlib.suppress(FileNotFoundError):
            (self.instance_dir / "url").unlink()
        if self.ephemeral:
            shutil.rmtree(self.instance_dir, ignore_errors=True)

    def kill(self) -> None:
        """SIGKILL the whole process group at once (a crash, for fault tests); ``start()`` can follow."""
        proc = self.process
        if proc is None:
            return
        self.process = None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def __enter__(self) -> LocalElasticsearch:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


@dataclass
class LocalCluster:
    """``size`` nodes on 127.0.0.1 forming one cluster (all master-eligible data nodes), each a
    :class:`LocalElasticsearch` with its own ports, data and logs; nodes can be stopped, killed and
    restarted one at a time (they keep their ports)."""

    size: int = 3
    name: str = "cluster"
    version: str = DEFAULT_VERSION
    heap: str = "384m"
    cache_dir: Path = field(default_factory=default_cache_dir)
    ephemeral: bool = True
    nodes: list[LocalElasticsearch] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        transport = [_free_port() for _ in range(self.size)]
        names = [f"{self.name}-n{i}" for i in range(self.size)]
        for i in range(self.size):
            node = LocalElasticsearch(
                version=self.version,
                cache_dir=self.cache_dir,
                heap=self.heap,
                name=names[i],
                ephemeral=self.ephemeral,
                single_node=False,
                settings={
                    "cluster.name": f"hybrid-search-{self.name}",
                    "node.name": names[i],
                    "discovery.seed_hosts": ",".join(f"127.0.0.1:{p}" for p in transport),
                    "cluster.initial_master_nodes": ",".join(names),
                },
            )
            node.http_port, node.transport_port = _free_port(), transport[i]
            self.nodes.append(node)

    @property
    def urls(self) -> list[str]:
        return [n.url for n in self.nodes]

    def start(self) -> list[str]:
        """Spawn every node, then wait until each answers (the cluster needs a quorum to be ready)."""
        try:
            for node in self.nodes:
                node.start(wait=False)
            for node in self.nodes:
                node.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self.urls

    def wait_green(self, timeout_s: float = 120.0) -> None:
        """Wait until every node is in and every shard is allocated (replicas included)."""
        deadline = time.monotonic() + timeout_s
        url = next(n.url for n in self.nodes if n.process is not None)
        query = f"{url}/_cluster/health?wait_for_status=green&wait_for_nodes={self.size}&timeout=5s"
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(query, timeout=10) as resp:
                    body = json.load(resp)
                    if body.get("status") == "green" and body.get("number_of_nodes") == self.size:
                        return
            except (urllib.error.URLError, OSError, ValueError):
                pass
            time.sleep(0.5)
        raise LocalElasticsearchError(f"cluster {self.name} did not become green with {self.size} nodes")

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def __enter__(self) -> LocalCluster:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


@contextlib.contextmanager
def url_or_local(name: str, *, heap: str = DEFAULT_HEAP) -> Iterator[str]:
    """``ES_URL`` if set, else a throwaway local node (stopped on exit): for scripts and benchmarks."""
    url = os.environ.get("ES_URL")
    if url:
        yield url
        return
    with LocalElasticsearch(name=f"{name}-{os.getpid()}", ephemeral=True, heap=heap) as node:
        yield node.url


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


# -- command line -----------------------------------------------------------------------------------------
def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m storage.local_es", description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["run", "start", "stop", "fetch"])
    parser.add_argument("--version", default=os.environ.get("ES_VERSION", DEFAULT_VERSION))
    parser.add_argument("--cache-dir", type=Path, default=default_cache_dir())
    parser.add_argument("--heap", default=DEFAULT_HEAP)
    parser.add_argument("--name", default="cli", help="instance name (data and logs live per name)")
    parser.add_argument("--ephemeral", action="store_true", help="delete the instance's data and logs on stop")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    node = LocalElasticsearch(
        version=args.version,
        cache_dir=args.cache_dir,
        heap=args.heap,
        name=args.name,
        ephemeral=args.ephemeral,
        die_with_parent=args.command != "start",
    )
    try:
        if args.command == "fetch":
            started = time.monotonic()
            print(node.fetch(), f"({time.monotonic() - started:.1f} s)")
        elif args.command == "stop":
            pid_file = node.instance_dir / "pid"
            if not pid_file.exists():
                print("no local Elasticsearch started by `start` is running")
                return 0
            _stop_group(int(pid_file.read_text()), DEFAULT_STOP_TIMEOUT_S)
            pid_file.unlink(missing_ok=True)
            (node.instance_dir / "url").unlink(missing_ok=True)
            print("stopped")
        elif args.command == "start":
            url = node.start()
            atexit.unregister(node.stop)  # leave it running; `stop` ends it
            node.process = None
            print(f"ES_URL={url}  (pid file: {node.instance_dir / 'pid'}; stop with `python -m storage.local_es stop`)")
        else:
            url = node.start()
            print(f"Elasticsearch {args.version} is running at {url} (pid {node.pid}) - Ctrl-C stops it", flush=True)
            with contextlib.suppress(KeyboardInterrupt):
                signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
                while node.process is not None and node.process.poll() is None:
                    time.sleep(1)
            node.stop()
    except LocalElasticsearchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
