"""One Elasticsearch node run from the integ-test distribution (see the package docstring)."""

from __future__ import annotations

import atexit
import base64
import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from filelock import FileLock

from ._host import (
    _ARTIFACT,
    _MAVEN_DEPENDENCY_PLUGIN,
    DEFAULT_HEAP,
    DEFAULT_START_TIMEOUT_S,
    DEFAULT_STOP_TIMEOUT_S,
    LocalElasticsearchError,
    _chown_tree,
    _ensure_service_user,
    _free_port,
    _port_free,
    _set_parent_death_signal,
    _stop_group,
    default_cache_dir,
    default_version,
    find_java_home,
    logger,
    unreachable_by,
)
from ._plugins import install_plugins

__all__ = ["LocalElasticsearch"]


@dataclass
class LocalElasticsearch:
    """One single-node Elasticsearch run from the integ-test distribution.

    Use it as a context manager (``with LocalElasticsearch() as es: es.url``) or call ``start()`` and
    ``stop()``. ``start()`` must run on a thread that outlives the server (normally the main thread):
    the parent-death signal is tied to the thread that started the process.
    """

    #: Default: ``ES_VERSION``, else the server the installed Python client talks to (default_version()).
    version: str = field(default_factory=default_version)
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
    #: Build and install the English-analysis and ``GET /`` plugins (see ``_plugins``). False runs the bare
    #: minimal distribution (unpacked separately, so both can be used side by side).
    plugins: bool = True
    #: The HTTP port. None: the one this instance (``name``) used before, kept in its directory, so a
    #: restart keeps its URL; the first time, a free one.
    port: int | None = None

    process: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    _started_once: bool = field(default=False, init=False, repr=False)
    http_port: int | None = field(default=None, init=False)
    transport_port: int | None = field(default=None, init=False)

    # -- paths -------------------------------------------------------------------------------------------
    @property
    def zip_path(self) -> Path:
        return self.cache_dir / "downloads" / f"elasticsearch-{self.version}.zip"

    @property
    def home(self) -> Path:
        suffix = "" if self.plugins else "-minimal"
        return self.cache_dir / "dist" / f"elasticsearch-{self.version}{suffix}"

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
        """The node's own copy of the distribution's configuration. Nodes never share a writable config
        (Elasticsearch writes its keystore there at the first start: three nodes starting together on one
        shared ``config/`` raced for ``elasticsearch.keystore.tmp``)."""
        return self.instance_dir / "config"

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
        # Two processes starting nodes of one version at once would download into the same file and unpack
        # over each other (the second removing a home the first already runs from): one does it.
        self.zip_path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(self.zip_path.parent / f".{self.version}.lock"):
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
        if self.plugins:
            install_plugins(home, self.version, java_home, self.cache_dir / "plugins")
        if self.ephemeral and not self._started_once:
            # Left over by a run that died before stop(): old cluster state would keep a new cluster of the
            # same node names from forming. A restart (after kill or stop) keeps its data.
            shutil.rmtree(self.instance_dir, ignore_errors=True)
        self._started_once = True
        self._prepare_config(home)
        data = self.instance_dir / "data"
        logs = self.instance_dir / "logs"
        data.mkdir(parents=True, exist_ok=True)
        logs.mkdir(parents=True, exist_ok=True)
        # A restart keeps its ports (in this process, and across processes through the instance directory), so
        # clients configured with the URL reconnect by themselves.
        remembered = self._remembered_ports()
        self.http_port = self.port or self.http_port or remembered.get("http") or _free_port()
        self.transport_port = self.transport_port or remembered.get("transport") or _free_port()
        if not _port_free(self.http_port) and self.port is None:
            self.http_port = _free_port()  # taken by something else meanwhile
        (self.instance_dir / "ports.json").write_text(
            json.dumps({"http": self.http_port, "transport": self.transport_port})
        )
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
        env["ES_PATH_CONF"] = str(self.config_dir)
        run_as: str | None = None
        if os.geteuid() == 0:
            run_as = _ensure_service_user()
            if (blocked := unreachable_by(run_as, home / "bin", self.instance_dir)) is not None:
                raise LocalElasticsearchError(
                    f"Elasticsearch refuses to run as root, so it runs as the user {run_as!r}, who cannot enter "
                    f"{blocked} (mode {blocked.stat().st_mode & 0o777:o}): set ES_LOCAL_CACHE to a directory "
                    f"it can reach (e.g. /var/cache/hybrid-search/elasticsearch, the default for root), or "
                    f"`chmod o+x {blocked}`"
                )
            _chown_tree(self.instance_dir, run_as)  # data, logs and its config (keystore, jvm.options.d)
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

    def _remembered_ports(self) -> dict[str, int]:
        try:
            found = json.loads((self.instance_dir / "ports.json").read_text())
        except (OSError, ValueError):
            return {}
        return {k: int(v) for k, v in found.items() if k in ("http", "transport") and isinstance(v, int)}

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

    def _prepare_config(self, home: Path) -> None:
        """This node's config directory: a copy of the distribution's, made once (atomically: a crash while
        copying leaves no half-made directory); a keystore left half-written by a crashed start is removed."""
        config = self.config_dir
        if not (config / "elasticsearch.yml").exists():
            partial = self.instance_dir / f".config-partial-{os.getpid()}"
            shutil.rmtree(partial, ignore_errors=True)
            partial.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(home / "config", partial)
            shutil.rmtree(config, ignore_errors=True)
            partial.rename(config)
        with contextlib.suppress(FileNotFoundError):
            (config / "elasticsearch.keystore.tmp").unlink()
        # Before 8.13 the JVM's own logs (GC, fatal errors) go to ``logs/`` relative to the working directory,
        # the distribution's folder, which the node's user may not write: point them at this node's logs.
        options = config / "jvm.options"
        text = options.read_text()
        pinned = re.sub(r"(?<=[=:])logs/", f"{self.instance_dir / 'logs'}/", text)
        if pinned != text:
            options.write_text(pinned)

    def _prepare_security(self, home: Path, java_home: Path) -> None:
        """TLS certificates (elasticsearch-certutil) and a file-realm superuser (elasticsearch-users) in this
        node's config dir. Made once per instance; a restart reuses them."""
        config = self.config_dir
        env = {**os.environ, "ES_JAVA_HOME": str(java_home), "ES_PATH_CONF": str(config)}
        env.pop("JAVA_HOME", None)

        def tool(*args: str) -> None:
            done = subprocess.run([*args], env=env, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise LocalElasticsearchError(f"{Path(args[0]).name} failed: {(done.stdout + done.stderr)[-800:]}")

        if not (config / "certs" / "node" / "node.crt").exists():
            certs = config / "certs"
            shutil.rmtree(certs, ignore_errors=True)
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
                    f"Elasticsearch {self.version} (node {self.name}) exited with code {code} while starting. "
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
                    f"Elasticsearch {self.version} (node {self.name}) did not become ready within "
                    f"{self.start_timeout_s:.0f} s. Last log lines:\n{self.log_tail()}"
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
