"""Several local nodes forming one cluster, and ``url_or_local`` for scripts and benchmarks."""

from __future__ import annotations

import contextlib
import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from ._host import DEFAULT_HEAP, LocalElasticsearchError, _free_port, default_cache_dir, default_version
from ._node import LocalElasticsearch

__all__ = ["LocalCluster", "url_or_local"]


@dataclass
class LocalCluster:
    """``size`` nodes on 127.0.0.1 forming one cluster (all master-eligible data nodes), each a
    :class:`LocalElasticsearch` with its own ports, data and logs; nodes can be stopped, killed and
    restarted one at a time (they keep their ports)."""

    size: int = 3
    name: str = "cluster"
    version: str = field(default_factory=default_version)
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
        except LocalElasticsearchError as exc:
            detail = self.describe()
            self.stop()
            raise LocalElasticsearchError(f"cluster {self.name} did not form: {exc}\nall nodes:\n{detail}") from None
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
        raise LocalElasticsearchError(
            f"cluster {self.name} did not become green with {self.size} nodes within {timeout_s:.0f} s:\n"
            + self.describe()
        )

    def describe(self, lines: int = 8) -> str:
        """Each node: running or not, and its last log lines (what a cluster that does not form says)."""
        out = []
        for node in self.nodes:
            state = "running" if node.process is not None and node.process.poll() is None else "not running"
            out.append(f"-- node {node.name} ({state}, http {node.http_port}):\n{node.log_tail(lines)}")
        return "\n".join(out)

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
