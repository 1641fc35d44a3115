"""The client against a real three-node Elasticsearch cluster (local processes): a rolling restart under load
whose first node is killed rather than stopped, a hung node, and a client that can reach only one of its hosts.

Each test prints its figures: searches attempted/failed, p95 latency before/during/after, documents
submitted/acknowledged/found.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field

import pytest

from embeddings import HashingEmbedder
from storage import Document, SearchClient, SearchError, SearchSettings
from storage.local_es import LocalCluster, LocalElasticsearch

from .._faultproxy import FaultProxy

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    c = LocalCluster(size=3, name=f"c{int(time.time()) % 100000}")
    started = time.perf_counter()
    c.start()
    c.wait_green()
    print(f"\nthree-node cluster green after {time.perf_counter() - started:.1f} s: {c.urls}")
    try:
        yield c
    finally:
        c.stop()


def _settings(urls: list[str], index: str, **extra: object) -> SearchSettings:
    return SearchSettings(url=",".join(urls), index=index, number_of_shards=2, **extra)  # type: ignore[arg-type]


@pytest.fixture
async def loaded(cluster: LocalCluster) -> AsyncIterator[SearchClient]:
    index = f"cl-{int(time.time() * 1000) % 10**9}"
    async with SearchClient.from_settings(_settings(cluster.urls, index), embedder=HashingEmbedder()) as c:
        await c.ensure_index()
        docs = [Document(id=f"base-{i}", text=f"cluster revenue note {i} " + "word " * (i % 5)) for i in range(200)]
        assert (await c.index_documents(docs, refresh=True)).ok
        cluster.wait_green()
        yield c
        await c.indices.delete()


@dataclass
class Load:
    """Continuous hybrid searches and ingest; outcomes recorded per phase."""

    client: SearchClient
    phase: str = "before"
    latencies: dict[str, list[float]] = field(default_factory=dict)
    failures: dict[str, list[str]] = field(default_factory=dict)
    submitted: list[str] = field(default_factory=list)
    acknowledged: list[str] = field(default_factory=list)
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    progress: asyncio.Condition = field(default_factory=asyncio.Condition)
    #: What ended the searches, when something did (a bug or a hang's cancellation): raised by ``searched``.
    ended: BaseException | None = None

    async def searches(self) -> None:
        try:
            await self._searches()
        except BaseException as exc:
            self.ended = exc
            async with self.progress:
                self.progress.notify_all()
            raise

    async def _searches(self) -> None:
        n = 0
        while not self.stop.is_set():
            n += 1
            phase = self.phase
            t0 = time.perf_counter()
            try:
                res = await self.client.search(f"revenue note {n % 50}", limit=10)
                if not res.hits:  # (a failure of its phase, not an end of the load: a wait would never end)
                    self.failures.setdefault(phase, []).append("no hits")
                if res.degraded:
                    self.failures.setdefault(phase, []).append(f"degraded:{res.degradation.reason}")
            except SearchError as exc:
                self.failures.setdefault(phase, []).append(type(exc).__name__)
            self.latencies.setdefault(phase, []).append((time.perf_counter() - t0) * 1000)
            async with self.progress:
                self.progress.notify_all()

    async def searched(self, n: int) -> None:
        """Until the current phase has had ``n`` searches (and a write or two meanwhile); an error that ended
        the searches (anything but a typed search error, which is counted) is raised here, never waited on."""
        phase = self.phase
        try:
            async with asyncio.timeout(STALLED_S), self.progress:
                await self.progress.wait_for(lambda: len(self.latencies.get(phase, [])) >= n or self.ended is not None)
        except TimeoutError:
            raise AssertionError(f"the searches stalled in phase {phase!r}: {self.report()}") from None
        if self.ended is not None:
            raise self.ended

    async def ingest(self) -> None:
        batch = 0
        while not self.stop.is_set():
            docs = [Document(id=f"live-{batch}-{i}", text=f"live revenue note {batch} {i}") for i in range(10)]
            self.submitted += [d.id for d in docs]
            try:
                report = await self.client.index_documents(docs)
                self.acknowledged += report.indexed
            except SearchError:
                pass
            batch += 1
            await asyncio.sleep(0.05)

    def report(self) -> str:
        parts = []
        for phase, lat in self.latencies.items():
            p95 = statistics.quantiles(lat, n=20)[-1] if len(lat) >= 2 else lat[0]
            parts.append(f"{phase}: {len(lat)} searches, {len(self.failures.get(phase, []))} failed, p95 {p95:.0f} ms")
        return "; ".join(parts)


#: Searches in each phase before it changes: enough to see the cluster's state, not a fixed time.
PHASE_SEARCHES = 40
#: A phase whose searches make no progress for this long has stalled (a guard that names the phase, not a wait).
STALLED_S = 300.0


async def _under_load(client: SearchClient, disrupt: Callable[[Load], Awaitable[None]]) -> Load:
    load = Load(client)
    tasks = [asyncio.create_task(load.searches()), asyncio.create_task(load.ingest())]
    await load.searched(PHASE_SEARCHES)
    await disrupt(load)
    load.phase = "after"
    await load.searched(PHASE_SEARCHES)
    load.stop.set()
    await asyncio.gather(*tasks)
    return load


def _elected_master(cluster: LocalCluster) -> LocalElasticsearch:
    with urllib.request.urlopen(f"{cluster.urls[0]}/_nodes/_master/http", timeout=10) as resp:
        (info,) = json.load(resp)["nodes"].values()
    port = int(info["http"]["publish_address"].rpartition(":")[2])
    return next(node for node in cluster.nodes if node.http_port == port)


async def _found(client: SearchClient, ids: list[str]) -> int:
    await client.indices.refresh()
    total = 0
    for start in range(0, len(ids), 500):
        total += await client.documents.count(filters={"id": ids[start : start + 500]})
    return total


async def test_a_rolling_restart_whose_first_node_is_killed_loses_no_acknowledged_document(
    cluster: LocalCluster, loaded: SearchClient
) -> None:
    """Under continuous searches and writes: one node killed (SIGKILL) and, while it is down, searches go on
    against the two left; it is restarted, then the elected master is restarted (the step of a rolling restart
    that makes the others elect a new master; restarting the third node too added a minute and nothing the
    killed one's restart does not cover). Every acknowledged document is found afterwards; searches fail only
    while a node is down (at most one in ten while the killed one is) and never after; the breaker stays
    closed (the cluster was never down)."""
    victim = cluster.nodes[2]

    async def kill_then_roll(load: Load) -> None:
        load.phase = "killed"
        victim.kill()
        await load.searched(PHASE_SEARCHES)  # searches go on against the two nodes left
        await asyncio.to_thread(victim.start)
        await asyncio.to_thread(cluster.wait_green)
        load.phase = "rolling"
        master = await asyncio.to_thread(_elected_master, cluster)
        await asyncio.to_thread(master.stop)
        await asyncio.to_thread(master.start)
        await asyncio.to_thread(cluster.wait_green)

    load = await _under_load(loaded, kill_then_roll)
    found = await _found(loaded, load.acknowledged)
    print(
        f"\nnode killed, then a rolling restart: {load.report()}; documents submitted {len(load.submitted)}, "
        f"acknowledged {len(load.acknowledged)}, found {found}"
    )
    assert found == len(load.acknowledged)  # zero acknowledged documents lost
    assert not load.failures.get("before")
    assert not load.failures.get("after")
    assert len(load.failures.get("killed", [])) <= len(load.latencies["killed"]) // 10
    assert loaded.breakers["elasticsearch"].state == "closed"


async def test_a_client_reaching_only_one_of_three_hosts_still_works(cluster: LocalCluster) -> None:
    proxies = []
    for node in cluster.nodes:
        parsed = urllib.parse.urlparse(node.url)
        proxies.append(await FaultProxy(parsed.hostname or "127.0.0.1", parsed.port or 9200).start())
    try:
        await proxies[0].set_mode("refuse")
        await proxies[1].set_mode("blackhole")
        index = f"one-{int(time.time() * 1000) % 10**9}"
        settings = _settings([p.url for p in proxies], index, request_timeout_s=1.0, leg_timeout_s=10, bulk_timeout_s=8)
        async with SearchClient.from_settings(settings, embedder=HashingEmbedder()) as c:
            await c.ensure_index()
            # A bulk that lands on the hung node costs half its budget, then goes to the node that answers.
            written = await c.index_documents([Document(id="x", text="only one host")], refresh=True)
            assert written.ok
            assert written.seconds < settings.bulk_timeout_s
            for _ in range(20):
                assert (await c.search("host")).ids == ["x"]
            assert c.breakers["elasticsearch"].state == "closed"
            await c.indices.delete()
        # Sniffing from the one reachable host discovers the others (their real addresses).
        sniffing = _settings([proxies[2].url], index, sniff_on_start=True)
        async with SearchClient.from_settings(sniffing, embedder=HashingEmbedder()) as c:
            await c.health()
            hosts = {n.config.port for n in c.elasticsearch.transport.node_pool.all()}
            assert {urllib.parse.urlparse(u).port for u in cluster.urls} <= hosts
    finally:
        for p in proxies:
            await p.stop()
    print(f"\none of three hosts reachable: 20/20 searches ok; sniffing found {len(hosts)} nodes")


async def test_one_hung_node_of_three_costs_a_failover_not_the_leg_and_rejoins_when_it_answers(
    cluster: LocalCluster, loaded: SearchClient
) -> None:
    """A node that accepts connections and never answers (a long GC pause, a half-open connection): each
    request that lands on it times out after half the leg budget, the transport marks the node dead and
    sends the request to another node, so every search still has both legs; the breaker never opens (the
    cluster is fine). Once the node answers again, it gets requests again."""
    proxies = []
    for node in cluster.nodes:
        parsed = urllib.parse.urlparse(node.url)
        proxies.append(await FaultProxy(parsed.hostname or "127.0.0.1", parsed.port or 9200).start())
    try:
        settings = _settings([p.url for p in proxies], loaded.index, leg_timeout_s=2.0)
        async with SearchClient.from_settings(settings, embedder=HashingEmbedder()) as c:
            assert (await c.search("revenue note")).hits  # (every node answers; the client is warm)
            await proxies[0].set_mode("blackhole")
            outcomes: list[tuple[bool, float]] = []

            async def caller(n: int) -> None:
                for i in range(12):
                    t0 = time.perf_counter()
                    res = await c.search(f"revenue note {n * 12 + i}")
                    outcomes.append((not res.degraded and bool(res.hits), time.perf_counter() - t0))

            await asyncio.gather(*(caller(n) for n in range(4)))
            hung_requests = proxies[0].requests
            assert hung_requests >= 1  # the hung node was tried
            assert all(both for both, _ in outcomes)  # and every search kept both legs
            assert c.breakers["elasticsearch"].state == "closed"
            slowest = max(seconds for _, seconds in outcomes)
            await proxies[0].set_mode("pass")
            before = proxies[0].requests
            for i in range(40):  # (the node's dead time: 1 s, doubling while it fails)
                await c.search(f"revenue note {i}")
                if proxies[0].requests > before:
                    break
                await asyncio.sleep(0.25)
            assert proxies[0].requests > before  # the node rejoined
    finally:
        for p in proxies:
            await p.stop()
    print(
        f"\none of three nodes hung: {len(outcomes)} hybrid searches by 4 callers, all with both legs, slowest "
        f"{slowest:.2f} s (leg budget 2 s); {hung_requests} requests reached the hung node"
    )
