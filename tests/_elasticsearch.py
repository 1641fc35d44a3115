"""Where the tests' Elasticsearch comes from: ES_URL, then Docker (testcontainers), then the local launcher."""

from __future__ import annotations

import os
import socket
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from storage.local_es import LocalElasticsearch, LocalElasticsearchError, default_version

DOCKER_IMAGE = "docker.elastic.co/elasticsearch/elasticsearch"


@dataclass(frozen=True)
class ElasticsearchUnderTest:
    url: str
    how: str  # "ES_URL", "docker", "local"
    version: str
    pid: int | None = None


def _docker_answers() -> bool:
    """Does a Docker engine answer ``GET /_ping``? (A raw probe: the docker SDK leaks a socket on failure.)"""
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    parsed = urllib.parse.urlparse(host)
    try:
        if parsed.scheme == "unix":
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            address: str | tuple[str, int] = parsed.path
        elif parsed.scheme in ("tcp", "http"):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            address = (parsed.hostname or "127.0.0.1", parsed.port or 2375)
        else:
            return False
        with sock:
            sock.settimeout(3)
            sock.connect(address)
            sock.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
            return b" 200 " in sock.recv(1024)
    except OSError:
        return False


@contextmanager
def provide_elasticsearch() -> Iterator[ElasticsearchUnderTest]:
    """Yield a running Elasticsearch; stop whatever was started here, even on failure or interrupt."""
    version = default_version()
    if os.environ.get("ES_URL"):
        yield ElasticsearchUnderTest(os.environ["ES_URL"], "ES_URL", version="(external)")
        return
    if os.environ.get("ES_USE_DOCKER", "1") != "0" and _docker_answers():
        from testcontainers.community.elasticsearch import ElasticSearchContainer

        container = ElasticSearchContainer(f"{DOCKER_IMAGE}:{version}", mem_limit="1g")
        container.with_env("ES_JAVA_OPTS", "-Xms512m -Xmx512m")
        with container:
            yield ElasticsearchUnderTest(container.get_url(), "docker", version)
        return
    node = LocalElasticsearch(version=version, name=f"pytest-{os.getpid()}", ephemeral=True)
    try:
        url = node.start()
    except LocalElasticsearchError as exc:
        raise RuntimeError(
            f"no Elasticsearch for the integration tests: ES_URL is not set, no Docker engine answers, and the "
            f"local launcher failed: {exc}"
        ) from exc
    try:
        yield ElasticsearchUnderTest(url, "local", version, pid=node.pid)
    finally:
        node.stop()
