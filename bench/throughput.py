"""The standing throughput guard alone: our hybrid search against the same requests written with raw
elasticsearch-py, at 1 / 8 / 32 concurrent callers, in interleaved slices, ``--runs`` times, pooled.

    .venv/bin/python bench/throughput.py              # SciFact, two runs of 24 s per contender and concurrency
    .venv/bin/python bench/throughput.py --seconds 6  # quicker, noisier

bench/run.py runs this same measurement (``guard``) among everything else; this script runs only the
guard (~11 minutes), so it can be run twice on a quiet machine. Query vectors are precomputed for every
contender (looked up in memory), so the figure is the client's cost, not the model's. The guard: ours / raw
≥ 0.95 at every concurrency, pooled over the runs (the mean of every slice's queries/s of each contender).
Starts a local Elasticsearch (1 GiB heap) unless ES_URL is set.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from docs_page import stamp, write_section  # bench/docs_page.py: the page's generated sections
from elasticsearch import AsyncElasticsearch
from raw_client import Precomputed, two_phase  # bench/raw_client.py: the hand-written reference

from embeddings import CachedEmbedder, LocalEmbedder, Vector
from storage import SearchClient, SearchSettings
from storage.evaluation import load_beir
from storage.local_es import url_or_local

ROOT = Path(__file__).resolve().parents[1]
CALLERS = (1, 8, 32)


async def measure(
    url: str, beir: Path, runs: int, seconds: float, leg_budget_s: float | None = None, rounds: int = 24
) -> dict[str, Any]:
    data = load_beir(beir)
    index = "bench-throughput"
    cached = CachedEmbedder(LocalEmbedder(), ROOT / ".cache" / "embeddings")
    # The default leg budget (as bench/instructions.py): a budget longer than the attempt timeout makes every
    # attempt keep a timer of its own (~12 µs each, four per search), which a user on the defaults never pays.
    settings = SearchSettings(url=url, index=index, window=100, bulk_chunk_size=100, passages=False)
    if leg_budget_s is not None:
        settings = settings.model_copy(update={"leg_timeout_s": leg_budget_s})
    client = SearchClient.from_settings(settings, embedder=cached)
    queries = list(data.queries.values())
    try:
        await client.indices.delete()
        await client.ensure_index()
        await client.index_documents(data.documents, refresh=True)
        vectors = {q: await cached.embed_query(q) for q in queries}
        fast = SearchClient(
            client.elasticsearch, Precomputed(vectors, cached.model_id, cached.dimensions), settings, owns_clients=False
        )
        result = await guard(
            client.elasticsearch, fast, index, vectors, queries, settings, runs, seconds, rounds=rounds
        )
        return {"dataset": {"name": data.name, "documents": len(data.documents), "queries": len(queries)}} | result
    finally:
        await client.indices.delete()
        await client.aclose()


async def guard(
    es: AsyncElasticsearch,
    fast: SearchClient,
    index: str,
    vectors: dict[str, Vector],
    queries: list[str],
    settings: SearchSettings,
    runs: int,
    seconds: float,
    warmup: int = 900,
    rounds: int = 24,
) -> dict[str, Any]:
    """The guard's measurement (bench/run.py reports the same): ``fast`` (ours, vectors looked up in memory)
    against the same requests written with raw elasticsearch-py on ``es``, with and without our server-side
    timeout, and raw again (a control: the same code as raw in slices of its own, whose ratio to raw is the
    measurement's own noise); an interleaved warm-up of ``warmup`` queries each, then ``runs`` × (1 / 8 / 32
    callers × ``rounds`` rotated slices), pooled. Slices of one second (24 per 24 s) hold the control within
    ±1.4 % of raw; slices of four (six) let it drift by up to 3.4 %: the machine's slow drift cancels out over
    more, shorter alternations."""

    async def ours(q: str) -> Any:
        return (await fast.search(q, limit=10, highlight=False)).ids

    async def raw(q: str) -> Any:
        return await two_phase(es, index, q, vectors[q], window=100, candidates=100, k=settings.rrf_k)

    # The same requests as ours, the server-side timeout included (Elasticsearch checks the clock while it
    # scores: a server cost of a feature, not the client's).
    timeout = es_timeout(fast)

    async def raw_timeout(q: str) -> Any:
        return await two_phase(
            es, index, q, vectors[q], window=100, candidates=100, k=settings.rrf_k, server_timeout=timeout
        )

    async def raw_again(q: str) -> Any:  # the control: raw, measured a second time in its own slices
        return await two_phase(es, index, q, vectors[q], window=100, candidates=100, k=settings.rrf_k)

    contenders = {
        "ours": ours,
        "raw_elasticsearch_py": raw,
        "raw_with_server_timeout": raw_timeout,
        "raw_again": raw_again,
    }
    for q in (queries * 3)[:warmup]:  # Elasticsearch's JIT warms over thousands of searches
        for call in contenders.values():
            await call(q)
    slices: dict[int, dict[str, list[float]]] = {c: {name: [] for name in contenders} for c in CALLERS}
    for run in range(runs):
        for c in CALLERS:
            for name, qps in (await interleaved_throughput(contenders, queries, c, seconds, rounds)).items():
                slices[c][name].extend(qps)
        print(f"run {run + 1}: " + json.dumps(ratios(slices)), flush=True)
    return {
        "runs": runs,
        "slices_per_run": rounds,
        "leg_timeout_s": settings.leg_timeout_s,
        "seconds_per_contender_and_concurrency": seconds,
        "queries_per_second": {
            name: {f"c{c}": round(statistics.fmean(slices[c][name]), 1) for c in CALLERS} for name in contenders
        },
        "ours_over_raw": ratios(slices),
        "per_slice_min_max": {
            f"c{c}": [
                round(min(o / r for o, r in zip(slices[c]["ours"], slices[c]["raw_elasticsearch_py"], strict=True)), 3),
                round(max(o / r for o, r in zip(slices[c]["ours"], slices[c]["raw_elasticsearch_py"], strict=True)), 3),
            ]
            for c in CALLERS
        },
    }


def rotated(names: list[str], turn: int) -> list[str]:
    """``names`` started at position ``turn`` (mod their number): each name leads once per full cycle."""
    return names[turn % len(names) :] + names[: turn % len(names)]


async def throughput(
    call: Callable[[str], Awaitable[Any]], queries: list[str], concurrency: int, seconds: float, start: int = 0
) -> float:
    """Queries/s of ``call`` at ``concurrency`` callers for ``seconds``, the callers taking ``queries`` in turn
    from position ``start``."""
    done = 0
    stop_at = time.perf_counter() + seconds

    async def worker(offset: int) -> None:
        nonlocal done
        i = start + offset
        while time.perf_counter() < stop_at:
            await call(queries[i % len(queries)])
            done += 1
            i += concurrency

    t0 = time.perf_counter()
    await asyncio.gather(*(worker(i) for i in range(concurrency)))
    return round(done / (time.perf_counter() - t0), 1)


async def interleaved_throughput(
    contenders: dict[str, Callable[[str], Awaitable[Any]]],
    queries: list[str],
    concurrency: int,
    seconds: float,
    rounds: int = 6,
) -> dict[str, list[float]]:
    """Queries/s of each contender at ``concurrency`` callers in each of ``rounds`` slices of ``seconds /
    rounds``, the contenders' order rotated every round, so none is measured only while the server warms up
    (its JIT, caches) or only after it has. Slices of one round are adjacent in time: their ratios show how
    far the machine moves a comparison. Each round starts further into ``queries`` (the same place for every
    contender), so short slices still cover them all."""
    slices: dict[str, list[float]] = {name: [] for name in contenders}
    names = list(contenders)
    for r in range(rounds):
        start = r * len(queries) // rounds
        for name in rotated(names, r):
            slices[name].append(await throughput(contenders[name], queries, concurrency, seconds / rounds, start))
    return slices


def es_timeout(client: SearchClient) -> str:
    """The server-side ``timeout`` our legs send (``Backend.server_side``)."""
    body = client._backend.server_side({})  # (what the client sends, read, not restated)
    return str(body["timeout"])


def ratios(slices: dict[int, dict[str, list[float]]]) -> dict[str, float]:
    """Pooled: every slice so far of ours over every slice of raw, per concurrency."""
    out = {
        f"c{c}": round(statistics.fmean(slices[c]["ours"]) / statistics.fmean(slices[c]["raw_elasticsearch_py"]), 3)
        for c in CALLERS
    }
    for c in CALLERS:
        raw = statistics.fmean(slices[c]["raw_elasticsearch_py"])
        same = slices[c].get("raw_with_server_timeout")
        if same:
            out[f"c{c} vs the same requests"] = round(statistics.fmean(slices[c]["ours"]) / statistics.fmean(same), 3)
        again = slices[c].get("raw_again")
        if again:  # the same code as raw: how far the measurement alone moves a ratio
            out[f"c{c} control: raw again / raw"] = round(statistics.fmean(again) / raw, 3)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--beir", type=Path, default=ROOT.parent / "shared/data/beir/scifact")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=24, help="slices per contender, concurrency and run")
    parser.add_argument("--seconds", type=float, default=24.0, help="per contender, concurrency and run")
    parser.add_argument("--leg-budget", type=float, help="leg_timeout_s (default: the settings' default)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "throughput.json")
    parser.add_argument("--write-docs", action="store_true", help="write its section of docs/benchmarks.md")
    args = parser.parse_args()
    started = time.perf_counter()
    with url_or_local("bench", heap="1g") as url:
        result = asyncio.run(measure(url, args.beir, args.runs, args.seconds, args.leg_budget, args.rounds))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=1))
    print(f"done in {time.perf_counter() - started:.0f} s; guard ≥ 0.95: " + ("met" if met(result) else "NOT met"))
    if args.write_docs:
        write_section("bench/throughput.py", markdown(result))


def met(result: dict[str, Any]) -> bool:
    return min(result["ours_over_raw"][f"c{c}"] for c in CALLERS) >= 0.95


def markdown(result: dict[str, Any], script: str = "bench/throughput.py") -> str:
    """The guard's section of docs/benchmarks.md (``script``: which ran it; bench/run.py runs it too)."""
    qps, pooled, spread = result["queries_per_second"], result["ours_over_raw"], result["per_slice_min_max"]
    cells = " | ".join
    rows = [
        f"### The throughput guard (`{script}`, {stamp()})",
        "",
        f"Ours against the same requests written with raw elasticsearch-py, {result['dataset']['name']} "
        f"({result['dataset']['documents']:,} documents, {result['dataset']['queries']} queries, query vectors "
        f"precomputed), default settings; {result['seconds_per_contender_and_concurrency']:g} s per contender "
        f"and concurrency in {result.get('slices_per_run', 6)} interleaved slices, {result['runs']} runs pooled. "
        "The guard: ours / raw ≥ 0.95 "
        f"at every concurrency — **{'met' if met(result) else 'NOT met'}**.",
        "",
        "| | " + cells(f"{c} caller{'s' if c > 1 else ''}" for c in CALLERS) + " |",
        "|---|" + "---:|" * len(CALLERS),
        "| ours q/s | " + cells(f"{qps['ours'][f'c{c}']}" for c in CALLERS) + " |",
        "| raw elasticsearch-py q/s | " + cells(f"{qps['raw_elasticsearch_py'][f'c{c}']}" for c in CALLERS) + " |",
        "| **ours / raw** | " + cells(f"**{pooled[f'c{c}']:.3f}**" for c in CALLERS) + " |",
        "| ours / raw sending the same requests (our server-side timeout too) | "
        + cells(f"{pooled[f'c{c} vs the same requests']:.3f}" for c in CALLERS)
        + " |",
        "| control: raw again / raw (the same code measured twice: the measurement's own noise) | "
        + cells(f"{pooled.get(f'c{c} control: raw again / raw', float('nan')):.3f}" for c in CALLERS)
        + " |",
        "| per-slice spread of ours / raw | "
        + cells(f"{spread[f'c{c}'][0]}–{spread[f'c{c}'][1]}" for c in CALLERS)
        + " |",
    ]
    return "\n".join(rows)


if __name__ == "__main__":
    main()
