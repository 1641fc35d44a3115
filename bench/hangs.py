"""Dependencies that stop answering: what a caller sees, how long it waits, when the breaker opens, how it
recovers — and the same under load, for a cluster with one hung node and for a 20-minute soak.

    .venv/bin/python bench/hangs.py matrix  [--budget 1.0] [--reset 5]
    .venv/bin/python bench/hangs.py cluster [--seconds 120] [--callers 8]
    .venv/bin/python bench/hangs.py soak    [--minutes 20] [--period 120] [--callers 8]

Every dependency is a real server on 127.0.0.1 behind the tests' TCP fault proxy: Elasticsearch (a local node
this script starts, or three for ``cluster``), an OpenAI-compatible ``/v1/embeddings`` server answering with
feature-hashing vectors (``bench/soak.py``'s), a Cohere-style rerank server scoring by BM25 and an
OpenAI-compatible chat server answering a fixed text with a citation (the tests' scripted servers). The four
hangs: ``blackhole`` (connections accepted, never answered), ``latency`` (every answer 10x the budget late),
``drip`` (one byte a second) and ``reset`` (the connection reset in mid-body).

- ``matrix``: for each dependency and hang, ``breaker_fail_max + 4`` calls in a row (searches; with rerank for
  the reranker; answers for the chat model): each call's outcome and milliseconds, the call after which the
  breaker was open, the slowest call once open; then the dependency answers again and, after the reset time,
  one probe closes it.
- ``cluster``: three nodes, each behind a proxy; ``--callers`` hybrid searches at once for ``--seconds``, node
  0 blackholed from a sixth of the run to five sixths: how many searches kept both legs, p50 / p99, the breaker,
  and how soon node 0 got requests again once it answered.
- ``soak``: one client, ``--callers`` searching (every other search reranked), a writer adding a document every
  50 ms and an answer every 2 s; every ``--period`` seconds the next dependency hangs for half the period (the
  hangs above, in turn). At the end: acknowledged writes missing from the index (must be 0), untyped errors
  (must be 0), RSS at the end against the fifth minute, each breaker's openings and closings against the
  faults it met.

Prints JSON; not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import gc
import json
import logging
import statistics
import sys
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the tests' fault proxy and scripted servers
sys.path.insert(0, str(ROOT / "bench"))

from elasticsearch import AsyncElasticsearch  # noqa: E402
from soak import EmbeddingsServer, rss_mb  # noqa: E402
from tests._faultproxy import FaultProxy  # noqa: E402
from tests._rerank_server import _answer as rerank_answer  # noqa: E402
from tests._scripted import chat_body, serve_http  # noqa: E402

from embeddings import HttpReranker, OpenAIChat, OpenAIEmbedder  # noqa: E402
from storage import Document, SearchClient, SearchError, SearchSettings  # noqa: E402
from storage.evaluation import load_beir  # noqa: E402
from storage.local_es import LocalCluster, LocalElasticsearch  # noqa: E402

DEPENDENCIES = ("elasticsearch", "embeddings", "reranker", "llm")
HANGS = ("blackhole", "latency", "drip", "reset")
DIMENSIONS = 384


def hang(proxy: FaultProxy, name: str, budget_s: float) -> Awaitable[None]:
    options: dict[str, dict[str, Any]] = {
        "blackhole": {},
        "latency": {"latency_s": 10 * budget_s},
        "drip": {"drip_bytes": 1, "drip_every_s": 1.0},
        "reset": {"cut_after": 40, "cut_times": 10**9},
    }
    mode = "cut_response" if name == "reset" else name
    return proxy.set_mode(mode, **options[name])


@contextlib.contextmanager
def model_servers() -> Iterator[dict[str, str]]:
    """The embeddings, rerank and chat servers; their base URLs."""
    embeddings = EmbeddingsServer(dimensions=DIMENSIONS)
    reply = json.dumps(chat_body("The corpus answers it [#d1].")).encode()

    def rerank(path: str, payload: dict[str, Any], auth: str | None) -> tuple[int, dict[str, str], bytes]:
        return 200, {"content-type": "application/json"}, json.dumps(rerank_answer(path, payload)).encode()

    def chat(path: str, payload: dict[str, Any], auth: str | None) -> tuple[int, dict[str, str], bytes]:
        return 200, {"content-type": "application/json"}, reply

    try:
        with serve_http(rerank) as rerank_port, serve_http(chat) as chat_port:
            yield {
                "embeddings": f"http://127.0.0.1:{embeddings.port}",
                "reranker": f"http://127.0.0.1:{rerank_port}",
                "llm": f"http://127.0.0.1:{chat_port}",
            }
    finally:
        embeddings.close()


async def proxies_for(urls: dict[str, str]) -> dict[str, FaultProxy]:
    out = {}
    for name, url in urls.items():
        parsed = urllib.parse.urlparse(url)
        out[name] = await FaultProxy(parsed.hostname or "127.0.0.1", parsed.port or 80).start()
    return out


def client_for(urls: dict[str, str], settings: SearchSettings) -> SearchClient:
    """A client of the four dependencies at ``urls`` (their proxies)."""
    embedder = OpenAIEmbedder(
        model="hashing", dimensions=DIMENSIONS, base_url=f"{urls['embeddings']}/v1", query_cache_size=0, timeout_s=30
    )
    reranker = HttpReranker(urls["reranker"], api="cohere-v2", model="bm25", timeout_s=30)
    llm = OpenAIChat(model="scripted", base_url=f"{urls['llm']}/v1", timeout_s=30)
    settings = settings.model_copy(update={"url": urls["elasticsearch"]})
    return SearchClient.from_settings(settings, embedder=embedder, reranker=reranker, llm=llm)


async def serve_faults(args: argparse.Namespace) -> None:
    """The child process of ``soak``: the model servers and a proxy in front of each dependency (and of
    ``--es-url``), so that the soak's RSS is the client's alone. Prints the proxies' URLs as one JSON line,
    then applies ``{"dependency": ..., "hang": ... | "pass", "budget": s}`` lines from stdin, answering each."""
    with model_servers() as urls:
        proxies = await proxies_for({**urls, "elasticsearch": args.es_url})
        print(json.dumps({name: p.url for name, p in proxies.items()}), flush=True)
        loop = asyncio.get_running_loop()
        while line := await loop.run_in_executor(None, sys.stdin.readline):
            order = json.loads(line)
            proxy = proxies[order["dependency"]]
            if order["hang"] == "pass":
                await proxy.set_mode("pass")
            else:
                await hang(proxy, order["hang"], order["budget"])
            print(json.dumps({"done": order}), flush=True)
        for p in proxies.values():
            await p.stop()


class Faults:
    """The parent's handle on :func:`serve_faults` running in a child process."""

    def __init__(self, proc: asyncio.subprocess.Process, urls: dict[str, str]) -> None:
        self.proc, self.urls = proc, urls

    @classmethod
    async def start(cls, es_url: str) -> Faults:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            "serve-faults",
            "--es-url",
            es_url,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,  # (the servers print the connections the proxy cuts)
        )
        assert proc.stdout is not None
        return cls(proc, json.loads(await proc.stdout.readline()))

    async def set(self, dependency: str, hang_name: str, budget_s: float = 1.0) -> None:
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        order = {"dependency": dependency, "hang": hang_name, "budget": budget_s}
        self.proc.stdin.write((json.dumps(order) + "\n").encode())
        await self.proc.stdin.drain()
        await self.proc.stdout.readline()

    async def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        await self.proc.wait()


async def load(es_url: str, index: str, embeddings_url: str, documents: list[Document]) -> None:
    embedder = OpenAIEmbedder(model="hashing", dimensions=DIMENSIONS, base_url=f"{embeddings_url}/v1")
    async with SearchClient.from_settings(SearchSettings(url=es_url, index=index), embedder=embedder) as loader:
        await loader.indices.delete()
        await loader.ensure_index()
        report = await loader.index_documents(documents, refresh=True)
        assert report.ok, report.failed[:3]


def outcome_of(result: Any) -> str:
    degradation = getattr(result, "degradation", None)
    return f"degraded:{degradation.reason}" if degradation is not None else "ok"


async def call_for(client: SearchClient, dependency: str, n: int) -> str:
    try:
        if dependency == "llm":
            return outcome_of(await client.answer(f"what does study {n} report?"))
        return outcome_of(await client.search(f"study {n} results", rerank=dependency == "reranker"))
    except SearchError as exc:
        legs = getattr(exc, "leg_errors", {})
        detail = ",".join(f"{leg}={e.reason}" for leg, e in legs.items()) or exc.reason
        return f"{type(exc).__name__}:{detail}"


async def matrix(args: argparse.Namespace) -> dict[str, Any]:
    data = load_beir(args.beir)
    rows = []
    with model_servers() as urls, LocalElasticsearch(name="hangs", ephemeral=True, heap="1g") as node:
        await load(node.url, "hangs", urls["embeddings"], data.documents[:300])
        proxies = await proxies_for({**urls, "elasticsearch": node.url})
        settings = SearchSettings(
            index="hangs",
            leg_timeout_s=args.budget,
            rerank_timeout_s=args.budget,
            answer_timeout_s=2 * args.budget,
            breaker_reset_s=args.reset,
        )
        try:
            for dependency in DEPENDENCIES:
                for name in HANGS:
                    async with client_for({d: p.url for d, p in proxies.items()}, settings) as client:
                        assert (await call_for(client, dependency, 0)) == "ok"
                        await hang(proxies[dependency], name, args.budget)
                        calls, opened_after = [], None
                        for n in range(settings.breaker_fail_max + 4):
                            t0 = time.perf_counter()
                            what = await call_for(client, dependency, n + 1)
                            calls.append({"outcome": what, "ms": round((time.perf_counter() - t0) * 1000, 1)})
                            if opened_after is None and client.breakers[dependency].state == "open":
                                opened_after = n + 1
                        await proxies[dependency].set_mode("pass")
                        await asyncio.sleep(args.reset + 0.1)
                        sent = proxies[dependency].requests
                        probe = await call_for(client, dependency, 99)
                        open_ms = [c["ms"] for c in calls[opened_after:]] if opened_after else []
                        row = {
                            "dependency": dependency,
                            "hang": name,
                            "first_call": calls[0],
                            "breaker_open_after_calls": opened_after,
                            "slowest_call_once_open_ms": max(open_ms) if open_ms else None,
                            "outcome_once_open": calls[-1]["outcome"],
                            "probe": probe,
                            "probe_requests": proxies[dependency].requests - sent,
                            "state_after_probe": client.breakers[dependency].state,
                            "calls": calls,
                        }
                        rows.append(row)
                        print(json.dumps({k: v for k, v in row.items() if k != "calls"}), flush=True)
        finally:
            for p in proxies.values():
                await p.stop()
    return {"budget_s": args.budget, "reset_s": args.reset, "rows": rows}


async def cluster(args: argparse.Namespace) -> dict[str, Any]:
    data = load_beir(args.beir)
    queries = list(data.queries.values())
    c = LocalCluster(size=3, name=f"hangs{int(time.time()) % 10000}")
    c.start()
    c.wait_green()
    proxies = []
    with model_servers() as urls:
        try:
            await load(c.urls[0], "hangs-cluster", urls["embeddings"], data.documents[:1000])
            for node in c.nodes:
                parsed = urllib.parse.urlparse(node.url)
                proxies.append(await FaultProxy(parsed.hostname or "127.0.0.1", parsed.port or 9200).start())
            embedder = OpenAIEmbedder(
                model="hashing", dimensions=DIMENSIONS, base_url=f"{urls['embeddings']}/v1", query_cache_size=0
            )
            settings = SearchSettings(url=",".join(p.url for p in proxies), index="hangs-cluster")
            latencies: list[float] = []
            both = degraded = failed = 0
            phase = {"hung": False}
            stop = time.monotonic() + args.seconds
            async with SearchClient.from_settings(settings, embedder=embedder) as client:

                async def caller(k: int) -> None:
                    nonlocal both, degraded, failed
                    n = k
                    while time.monotonic() < stop:
                        t0 = time.perf_counter()
                        try:
                            res = await client.search(queries[n % len(queries)])
                            both += not res.degraded
                            degraded += res.degraded
                        except SearchError:
                            failed += 1
                        if phase["hung"]:
                            latencies.append(time.perf_counter() - t0)
                        n += args.callers

                async def conductor() -> dict[str, Any]:
                    await asyncio.sleep(args.seconds / 6)
                    phase["hung"] = True
                    await proxies[0].set_mode("blackhole")
                    reached = proxies[0].requests
                    await asyncio.sleep(args.seconds * 4 / 6)
                    phase["hung"] = False
                    await proxies[0].set_mode("pass")
                    back, t0 = proxies[0].requests, time.perf_counter()
                    while proxies[0].requests == back and time.monotonic() < stop:  # noqa: ASYNC110 (a counter)
                        await asyncio.sleep(0.05)
                    return {
                        "requests_to_the_hung_node": proxies[0].requests - reached,
                        "rejoined_after_s": round(time.perf_counter() - t0, 2) if proxies[0].requests > back else None,
                    }

                results = await asyncio.gather(*(caller(k) for k in range(args.callers)), conductor())
                state = client.breakers["elasticsearch"].state
            total = both + degraded + failed
            ordered = sorted(latencies)
            return {
                "callers": args.callers,
                "seconds": args.seconds,
                "searches": total,
                "with_both_legs_pct": round(100 * both / total, 2),
                "degraded": degraded,
                "failed": failed,
                "while_hung": {
                    "searches": len(ordered),
                    "p50_ms": round(1000 * statistics.median(ordered), 1),
                    "p99_ms": round(1000 * ordered[int(0.99 * (len(ordered) - 1))], 1),
                    "max_ms": round(1000 * ordered[-1], 1),
                },
                "leg_budget_s": settings.leg_timeout_s,
                "breaker_at_end": state,
                **results[-1],
            }
        finally:
            for p in proxies:
                await p.stop()
            c.stop()


async def soak(args: argparse.Namespace) -> dict[str, Any]:
    data = load_beir(args.beir)
    queries = list(data.queries.values())
    with LocalElasticsearch(name="hangs-soak", ephemeral=True, heap="1g") as node:
        faults = await Faults.start(node.url)  # the servers and proxies: another process (RSS is the client's)
        try:
            await load(node.url, "hangs-soak", faults.urls["embeddings"], data.documents[:1000])
            return await _soak(args, faults, node.url, queries)
        finally:
            await faults.stop()


async def _soak(args: argparse.Namespace, faults: Faults, es_url: str, queries: list[str]) -> dict[str, Any]:
    settings = SearchSettings(index="hangs-soak", breaker_reset_s=10.0, leg_timeout_s=2.0, answer_timeout_s=4.0)
    outcomes: collections.Counter[str] = collections.Counter()
    acknowledged: list[str] = []
    periods: list[dict[str, Any]] = []
    transitions: list[tuple[float, str, str | None, str]] = []
    samples: list[tuple[float, float]] = []
    started = time.monotonic()
    stop = started + 60 * args.minutes

    def elapsed() -> float:
        return round(time.monotonic() - started, 1)

    class Breakers(logging.Handler):
        """The breakers' transitions, read from the library's structured log (what an operator reads)."""

        def emit(self, record: logging.LogRecord) -> None:
            to = getattr(record, "resilience.breaker.to", None)
            if to is not None:
                dependency = getattr(record, "resilience.dependency", "?")
                transitions.append((elapsed(), dependency, getattr(record, "resilience.breaker.from", None), to))

    async def guarded(what: str, call: Callable[[], Awaitable[Any]]) -> Any:
        try:
            result = await call()
            outcomes[f"{what}:{outcome_of(result)}"] += 1
            return result
        except SearchError as exc:
            outcomes[f"{what}:error:{type(exc).__name__}:{exc.reason}"] += 1
        except Exception as exc:  # an untyped error is a finding: count it, never hide it
            outcomes[f"{what}:UNTYPED:{type(exc).__name__}:{exc}"[:200]] += 1
        await asyncio.sleep(0)  # (a call that failed fast must not keep the loop from the others)
        return None

    log = logging.getLogger("storage")
    log.addHandler(breakers := Breakers(logging.INFO))
    log.setLevel(logging.INFO)
    async with client_for(faults.urls, settings) as client:

        async def searcher(k: int) -> None:
            n = k
            while time.monotonic() < stop:
                await guarded("search", lambda n=n: client.search(queries[n % len(queries)], rerank=n % 2 == 0))
                n += args.callers

        async def writer() -> None:
            n = 0
            while time.monotonic() < stop:
                doc = Document(id=f"soak-{n}", title=f"soak note {n}", text=f"written during the soak {n}")
                report = await guarded("write", lambda doc=doc: client.index_documents([doc]))
                if report is not None:
                    acknowledged.extend(report.indexed)
                n += 1
                await asyncio.sleep(0.05)

        async def answerer() -> None:
            while time.monotonic() < stop:
                await guarded("answer", lambda: client.answer("what do the studies report on insulin?"))
                await asyncio.sleep(2.0)

        async def sampler() -> None:
            while time.monotonic() < stop:
                await asyncio.sleep(30)
                gc.collect()
                samples.append((elapsed(), round(rss_mb(), 1)))

        async def conductor() -> None:
            i = 0
            while time.monotonic() + args.period <= stop + 1:
                # Each dependency in turn, the hang moving on every round: all four hangs, every dependency.
                dependency, name = DEPENDENCIES[i % 4], HANGS[(i + i // 4) % 4]
                await asyncio.sleep(args.period / 2)
                periods.append({"at_s": elapsed(), "dependency": dependency, "hang": name})
                await faults.set(dependency, name, settings.leg_timeout_s)
                await asyncio.sleep(args.period / 2)
                await faults.set(dependency, "pass")
                periods[-1]["until_s"] = elapsed()
                i += 1

        await asyncio.gather(*(searcher(k) for k in range(args.callers)), writer(), answerer(), sampler(), conductor())
        await asyncio.sleep(settings.breaker_reset_s + 1)
        for q in queries[:10]:  # the breakers close on the next successful calls
            await guarded("search", lambda q=q: client.search(q, rerank=True))
            await guarded("answer", lambda: client.answer("what do the studies report on insulin?"))
        breakers_at_end = {d: r.state for d, r in client.resilience.items()}
    log.removeHandler(breakers)
    es = AsyncElasticsearch(es_url)
    await es.indices.refresh(index="hangs-soak")
    found: set[str] = set()
    for start in range(0, len(acknowledged), 1000):
        ids = acknowledged[start : start + 1000]
        resp = await es.search(index="hangs-soak", size=len(ids), source=False, query={"ids": {"values": ids}})
        found.update(h["_id"] for h in resp.body["hits"]["hits"])
    await es.close()
    fifth = next((rss for at, rss in samples if at >= 300), samples[0][1] if samples else 0.0)
    for f in periods:
        # (a fault longer than breaker_reset_s: each failed probe opens the breaker again)
        moves = [t for t in transitions if t[1] == f["dependency"] and f["at_s"] <= t[0] <= f["until_s"] + 30]
        f["opened"] = sum(1 for t in moves if t[2] == "closed" and t[3] == "open")
        f["reopened_after_a_probe"] = sum(1 for t in moves if t[2] == "half-open" and t[3] == "open")
        f["closed"] = sum(1 for t in moves if t[3] == "closed")
    return {
        "minutes": args.minutes,
        "callers": args.callers,
        "outcomes": dict(outcomes.most_common()),
        "untyped_errors": sum(n for k, n in outcomes.items() if "UNTYPED" in k),
        "writes_acknowledged": len(acknowledged),
        "acknowledged_missing": len(set(acknowledged) - found),
        "rss_fifth_minute_mb": fifth,
        "rss_end_mb": samples[-1][1] if samples else None,
        "rss_end_vs_fifth_minute_pct": round(100 * (samples[-1][1] - fifth) / fifth, 2) if samples else None,
        "breakers_at_end": breakers_at_end,
        "faults": periods,
        "rss_samples": samples,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("what", choices=["matrix", "cluster", "soak", "serve-faults"])
    parser.add_argument("--es-url", help="serve-faults (soak's child process): the Elasticsearch to proxy")
    parser.add_argument("--beir", type=Path, default=ROOT.parent / "shared/data/beir/scifact")
    parser.add_argument("--budget", type=float, default=1.0, help="matrix: the leg / rerank budget (s)")
    parser.add_argument("--reset", type=float, default=5.0, help="matrix: breaker_reset_s")
    parser.add_argument("--seconds", type=float, default=120.0, help="cluster: how long")
    parser.add_argument("--callers", type=int, default=8)
    parser.add_argument("--minutes", type=float, default=20.0, help="soak: how long")
    parser.add_argument("--period", type=float, default=120.0, help="soak: seconds between two faults' starts")
    args = parser.parse_args()
    if args.what == "serve-faults":
        asyncio.run(serve_faults(args))
        return
    run = {"matrix": matrix, "cluster": cluster, "soak": soak}[args.what]
    print(json.dumps(asyncio.run(run(args)), indent=2))


if __name__ == "__main__":
    main()
