"""Soak: many hybrid searches at high concurrency with faults injected part of the time; the process must
stay bounded (memory, tasks, connections, file descriptors) and every search must end with a result or a
typed error.

    .venv/bin/python bench/soak.py [--searches 50000] [--concurrency 32]

What runs: a local Elasticsearch this script owns (it is killed and restarted once, same port), an
OpenAI-compatible ``/v1/embeddings`` server in this process (real HTTP; feature-hashing vectors, so 50,000
query embeddings cost nothing — the bundled models are far too slow for that on 2 cores) behind a TCP fault
proxy (refusing connections for a while), a corpus of SciFact abstracts, and ``--concurrency`` workers
sending the SciFact queries round-robin with the query-vector cache off (every kNN leg calls the embedder
over HTTP). Timeline (fractions of ``--searches``): warm-up to 5 %, then baseline readings; embedder
refusing from 30 % for ``--refuse-s`` seconds; Elasticsearch killed at 60 % and restarted (and again at
80 % with ``--kills 2``); readings again at the end, after the breakers' reset time. RSS and the number of
live objects are sampled every ``--sample-every`` searches. Prints a JSON report; not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import gc
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the tests' fault proxy

from tests._faultproxy import FaultProxy  # noqa: E402

from embeddings import HashingEmbedder, OpenAIEmbedder  # noqa: E402
from storage import SearchClient, SearchError, SearchSettings  # noqa: E402
from storage.evaluation import load_beir  # noqa: E402
from storage.local_es import LocalElasticsearch  # noqa: E402


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def tcp_connections(port: int) -> int:
    """Established connections of this process to ``port`` (via /proc/net/tcp{,6} and our fds' inodes)."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            cols = line.split()
            remote_port = int(cols[2].split(":")[1], 16)
            if remote_port == port and cols[3] == "01" and cols[9] in inodes:
                count += 1
    return count


def readings(client: SearchClient, es_port: int) -> dict[str, Any]:
    gc.collect()
    return {
        "rss_mb": round(rss_mb(), 1),
        "asyncio_tasks": len(asyncio.all_tasks()),
        "open_fds": open_fds(),
        "es_connections": tcp_connections(es_port),
        "breakers": {dep: r.state for dep, r in client.resilience.items()},
        "retry_budget_tokens": {dep: round(r.budget.tokens, 2) for dep, r in client.resilience.items()},
    }


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """Connections the fault proxy cuts are the point of the exercise, not errors to print."""


class EmbeddingsServer:
    """``POST /v1/embeddings`` (the OpenAI JSON) answered with feature-hashing vectors, in a thread."""

    def __init__(self, dimensions: int) -> None:
        hashing = HashingEmbedder(dimensions=dimensions)

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real servers do
            wbufsize = -1  # headers and body in one write (else the body waits out a delayed ACK: 40 ms)

            def do_POST(self) -> None:
                payload = json.loads(self.rfile.read(int(self.headers["content-length"])))
                inputs = payload["input"] if isinstance(payload["input"], list) else [payload["input"]]
                data = [
                    {"object": "embedding", "index": i, "embedding": hashing.embed_one(t)} for i, t in enumerate(inputs)
                ]
                body = json.dumps({"object": "list", "model": payload["model"], "data": data}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.httpd = _QuietServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = int(self.httpd.server_address[1])
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


async def soak(args: argparse.Namespace) -> dict[str, Any]:
    data = load_beir(args.beir)
    docs = data.documents[: args.documents]
    queries = list(data.queries.values())
    node = LocalElasticsearch(name=f"soak-{os.getpid()}", ephemeral=True, heap="1g", die_with_parent=False)
    server = EmbeddingsServer(dimensions=384)
    es_url = node.start()
    es_port = int(es_url.rsplit(":", 1)[1])
    proxy = await FaultProxy("127.0.0.1", server.port).start()
    outcomes: collections.Counter[str] = collections.Counter()
    timeline: list[dict[str, Any]] = []
    try:
        settings = SearchSettings(url=es_url, index="soak", breaker_reset_s=5.0, leg_timeout_s=3.0)
        indexer = OpenAIEmbedder(model="hashing", dimensions=384, base_url=f"http://127.0.0.1:{server.port}/v1")
        async with SearchClient.from_settings(settings, embedder=indexer) as loader:
            await loader.indices.delete()
            await loader.ensure_index()
            report = await loader.index_documents(docs, refresh=True)
            assert report.ok, report.failed[:3]
        embedder = OpenAIEmbedder(
            model="hashing",
            dimensions=384,
            base_url=f"{proxy.url}/v1",
            query_cache_size=0,
            timeout_s=2.0,
        )
        client = SearchClient.from_settings(settings, embedder=embedder)
        done = 0
        marks = {
            "warm": int(0.05 * args.searches),
            "refuse": int(0.30 * args.searches),
            "kill": int(0.60 * args.searches),
            "kill2": int(0.80 * args.searches),
        }
        events: dict[str, asyncio.Event] = {name: asyncio.Event() for name in marks}
        started = time.perf_counter()

        samples: list[dict[str, Any]] = []

        async def worker(offset: int) -> None:
            nonlocal done
            i = offset
            while done < args.searches:
                done += 1
                if done % args.sample_every == 0:  # memory over time: a leak grows, a high-water mark plateaus
                    gc.collect()
                    samples.append({"at": done, "rss_mb": round(rss_mb(), 1), "live_objects": len(gc.get_objects())})
                for name, at in marks.items():
                    if done == at:
                        events[name].set()
                try:
                    res = await client.search(queries[i % len(queries)], limit=10, highlight=i % 4 == 0)
                    outcomes["degraded" if res.degraded else "ok"] += 1
                except SearchError as exc:
                    outcomes[f"error:{type(exc).__name__}:{exc.reason}"] += 1
                except Exception as exc:  # an untyped error is a finding: count it, never hide it
                    outcomes[f"UNTYPED:{type(exc).__name__}"] += 1
                i += args.concurrency

        async def conductor() -> None:
            await events["warm"].wait()
            timeline.append({"at": done, "what": "baseline", **readings(client, es_port)})
            await events["refuse"].wait()
            timeline.append({"at": done, "what": "embedder refusing"})
            await proxy.set_mode("refuse")
            await asyncio.sleep(args.refuse_s)
            await proxy.set_mode("pass")
            timeline.append({"at": done, "what": "embedder back"})
            await events["kill"].wait()
            timeline.append({"at": done, "what": "elasticsearch killed"})
            node.kill()
            t0 = time.perf_counter()
            await asyncio.to_thread(node.start)
            timeline.append({"at": done, "what": f"elasticsearch restarted in {time.perf_counter() - t0:.1f} s"})
            if args.kills > 1:  # a second outage: a high-water mark stays, a leak would step up again
                await events["kill2"].wait()
                timeline.append({"at": done, "what": "elasticsearch killed again"})
                node.kill()
                t0 = time.perf_counter()
                await asyncio.to_thread(node.start)
                timeline.append({"at": done, "what": f"restarted in {time.perf_counter() - t0:.1f} s"})

        for q in queries[:50]:  # one caller, to open the pools, then the idle "before" reading
            await client.search(q)
        before = readings(client, es_port)
        timeline.append({"at": 0, "what": "before (idle)", **before})
        workers = [asyncio.create_task(worker(i)) for i in range(args.concurrency)]
        conduct = asyncio.create_task(conductor())
        await asyncio.gather(*workers)
        await conduct
        elapsed = time.perf_counter() - started
        await asyncio.sleep(settings.breaker_reset_s + 1)
        for q in queries[:20]:  # the breakers close again on the next successful calls
            with contextlib.suppress(SearchError):
                await client.search(q)
        end = readings(client, es_port)
        timeline.append({"at": done, "what": "end (idle)", **end})
        base = next(t for t in timeline if t["what"] == "baseline")
        await client.aclose()
        await embedder.aclose()
        return {
            "searches": sum(outcomes.values()),
            "concurrency": args.concurrency,
            "documents": len(docs),
            "seconds": round(elapsed, 1),
            "searches_per_s": round(sum(outcomes.values()) / elapsed, 1),
            "outcomes": dict(outcomes.most_common()),
            "untyped_errors": sum(n for k, n in outcomes.items() if k.startswith("UNTYPED")),
            "rss_growth_after_warmup_pct": round(100 * (end["rss_mb"] - base["rss_mb"]) / base["rss_mb"], 2),
            "samples": samples,
            "idle_before_vs_after": {
                k: [before[k], end[k]] for k in ("asyncio_tasks", "open_fds", "es_connections", "rss_mb")
            },
            "timeline": timeline,
        }
    finally:
        await proxy.stop()
        node.stop()
        server.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--beir", type=Path, default=ROOT.parent / "shared/data/beir/scifact")
    parser.add_argument("--searches", type=int, default=50_000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--documents", type=int, default=1000)
    parser.add_argument("--refuse-s", type=float, default=10.0)
    parser.add_argument("--sample-every", type=int, default=5000)
    parser.add_argument("--kills", type=int, choices=(1, 2), default=1, help="Elasticsearch outages (at 60 %%, 80 %%)")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(soak(args)), indent=2))


if __name__ == "__main__":
    main()
