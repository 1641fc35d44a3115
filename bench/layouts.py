"""The index layout for passages, measured against the layout it replaces and against no passages: the
same documents, every layout, one run, searches interleaved through the public API.

Layouts (each a fresh index of the same documents, vectors from the embedding cache, force-merged to one
segment so that no layout is measured on more segments than another):

- ``head``: no passages (``ES_PASSAGES=false``): one vector per document, its head;
- ``nested``: the layout before mapping version 4 (every document nested, its head among its passages;
  each passage's text indexed): built by the code of commit ``--old`` (a git worktree given with
  ``--old-tree``), searched by this code, as a client upgraded before ``reembed()`` searches it;
- ``passages``: today's layout (heads flat, only documents over the window nested);
- ``head-b``: ``head`` again, a second index of the same documents (the run's own noise: an A/A pair);
- ``head-src``, ``passages-src``: ``head`` and ``passages`` with the head vectors kept in ``_source`` too,
  as before mapping versions 2 / 5 (and as on a server before 8.17): the layout leaving them out replaces.
- ``passages-dup``: ``passages`` with each long document's head vector written again as its first passage's
  (as before 2026-11-28): the layout writing it once replaces.
- ``passages-pos``: ``passages`` with each passage's text indexed with its positions (as before mapping
  version 7, 2026-11-28): the layout indexing it for its words only replaces.
- ``passages-allcands``: not an index of its own: ``passages``'s index, searched with the passages' kNN
  clause gathering as many candidates as the heads' in a head-first index (as before 2026-11-28; today
  ``HEAD_FIRST_PASSAGE_CANDIDATES`` of them): the same index, only the query differs.

The store is measured settled: after the writes, once the shard's retention lease has moved past them, the
index is force-merged (which drops the ``_recovery_source`` copy a filtered ``_source`` keeps until then);
each build prints its fresh size too (stderr).

For each collection: the index's size (primaries' store), nDCG@10 of each leg (``storage.evaluation``), and
BM25 / kNN / hybrid latency over the judged queries (query vectors cached: the search's own time), the
layouts taken in turn for each query (the order rotated), ``--rounds`` times. With ``--scale`` the
documents are then indexed nine more times with new ids and the latency measured again (10x).

    .venv/bin/python bench/layouts.py --old-tree /tmp/oldtree [--sets lisa npl scifact scifact-x10 lisa-x10]

Starts a local Elasticsearch (1 GiB heap) unless ES_URL is set. Prints a table; JSON in
bench/results/layouts.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from long_documents import SHARED, long_collection

from embeddings import CachedEmbedder, LocalEmbedder
from storage import Document, SearchClient, SearchSettings
from storage.evaluation import BeirDataset, evaluate, load_beir
from storage.local_es import url_or_local

ROOT = Path(__file__).resolve().parents[1]
GIVEN = {
    "scifact": SHARED / "beir" / "scifact",
    "lisa": SHARED / "ir" / "lisa",
    "npl": SHARED / "ir" / "npl",
    "cacm": SHARED / "ir" / "cacm",
}
MODES = ("bm25", "knn", "hybrid")


def folder(name: str) -> Path:
    if name == "manpages":  # (real long documents: bench/man_pages.py)
        from man_pages import build

        return build()
    if name == "readmes":  # (real long documents: bench/readmes.py)
        from readmes import build as build_readmes

        return build_readmes()
    return long_collection(name.removesuffix("-x10")) if name.endswith("-x10") else GIVEN[name]


def index_name(name: str, layout: str) -> str:
    return f"bench-layouts-{name}-{layout.removesuffix('-allcands')}".lower()


def searching_all_candidates(client: SearchClient) -> None:
    """``passages-allcands``: this client's searches give the passages' clause the heads' candidates."""
    import storage._dsl.queries as queries

    def wrapped(call: Any) -> Any:
        async def with_all(*args: Any, **kwargs: Any) -> Any:
            saved, queries.HEAD_FIRST_PASSAGE_CANDIDATES = queries.HEAD_FIRST_PASSAGE_CANDIDATES, 1.0
            try:  # (the request is built before the first await; layouts are searched one at a time)
                return await call(*args, **kwargs)
            finally:
                queries.HEAD_FIRST_PASSAGE_CANDIDATES = saved

        return with_all

    client.search = wrapped(client.search)  # type: ignore[method-assign]
    client.leg_rankings = wrapped(client.leg_rankings)  # type: ignore[method-assign]


def settings_for(url: str, name: str, layout: str) -> SearchSettings:
    return SearchSettings(
        url=url, index=index_name(name, layout), leg_timeout_s=60, passages=not layout.startswith("head")
    )


def embedder() -> CachedEmbedder:
    return CachedEmbedder(LocalEmbedder(), ROOT / ".cache" / "embeddings")


async def build(url: str, name: str, layout: str, copies: int) -> None:
    """Index the collection (``copies`` > 0: that many more times, with new ids) into the layout's index."""
    data = load_beir(folder(name))
    if layout.endswith("-src"):  # (this process builds one layout: the index is made as before mapping 2 / 5)
        import storage._indexing.indices as indices

        indices.vectors_in_source_for = lambda server: True  # type: ignore[assignment]
    if layout.endswith("-dup"):  # (the head's vector written again among the passages, as before)
        from storage._indexing.intake import Embedded

        once = Embedded.source_for

        def again(self: Embedded, **kw: Any) -> dict[str, Any]:
            out = once(self, **kw)
            if out.get("passages"):
                out["passages"][0]["vector"] = self.vectors[0]
            return out

        Embedded.source_for = again  # type: ignore[method-assign]
    if layout.endswith("-pos"):  # (the passages' text with positions, as before mapping version 7)
        import storage._indexing.indices as indices

        made = indices.index_body

        def with_positions(**kw: Any) -> dict[str, Any]:
            body = made(**kw)
            passage = body["mappings"]["properties"]["passages"]["properties"]
            passage["text"] = {**passage["text"], "index_options": "positions"}
            return body

        indices.index_body = with_positions  # type: ignore[assignment]
    async with SearchClient.from_settings(settings_for(url, name, layout), embedder=embedder()) as client:
        if copies == 0:
            await client.indices.delete()
            await client.ensure_index()
            docs = list(data.documents)
        else:
            docs = [
                Document.model_validate({**d.model_dump(), "id": f"{d.id}-copy{n}"})
                for n in range(1, copies + 1)
                for d in data.documents
            ]
        # (a bulk load asked for ends merged once the retention lease moved past it, the recovery copies
        # dropped, however small the collection; the force merge below then finds one segment)
        report = await client.index_documents(docs, refresh=True, bulk_load=True)
        assert report.ok, report.failed[:3]
        es = client.elasticsearch.options(request_timeout=900)
        await es.indices.flush(index=client.index)
        fresh = await sizes(client)
        settled = await lease_moved_on(client)
        await es.indices.forcemerge(index=client.index, max_num_segments=1)
        await es.indices.refresh(index=client.index)
        print(
            json.dumps(
                {
                    "built": name,
                    "layout": layout,
                    "copies": copies,
                    "fresh_store_mb": fresh["store_mb"],
                    "lease_moved_on": settled,
                }
            ),
            file=sys.stderr,
            flush=True,
        )


async def lease_moved_on(client: SearchClient, wait_s: float = 180.0) -> bool:
    """Wait (at most ``wait_s``) until the shard's peer-recovery retention lease has moved past every write:
    the force merge that follows then drops ``_recovery_source`` (the copy of each document's source that a
    filtered ``_source`` makes Elasticsearch keep until then), so the store measured is the settled one."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        stats = (await client.elasticsearch.indices.stats(index=client.index, level="shards")).body
        copies = [c for index in stats["indices"].values() for shard in index["shards"].values() for c in shard]
        if all(
            lease["retaining_seq_no"] > c["seq_no"]["max_seq_no"]
            for c in copies
            for lease in c["retention_leases"]["leases"]
        ):
            return True
        await asyncio.sleep(5)
    return False


def build_in(tree: Path | None, url: str, name: str, layout: str, copies: int) -> None:
    """Build in a process of its own, with the code of ``tree`` (the old layout) or this checkout's."""
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = f"{tree / 'src'}{os.pathsep}{ROOT / 'bench'}"
    cmd = [sys.executable, __file__, "--build", url, name, layout, str(copies)]
    subprocess.run(cmd, check=True, env=env, cwd=ROOT)


async def sizes(client: SearchClient) -> dict[str, Any]:
    stats = (await client.elasticsearch.indices.stats(index=client.index, metric="docs,store")).body["_all"]
    return {"store_mb": round(stats["primaries"]["store"]["size_in_bytes"] / 1e6, 2)}


async def latencies(clients: dict[str, SearchClient], queries: list[str], rounds: int) -> dict[str, dict[str, float]]:
    """p50 (ms) per layout and mode, the layouts interleaved query by query (their order rotated)."""
    spent: dict[str, dict[str, list[float]]] = {lay: {m: [] for m in MODES} for lay in clients}
    layouts = list(clients)
    for r in range(rounds):
        for n, text in enumerate(queries):
            shift = (n + r) % len(layouts)
            for lay in layouts[shift:] + layouts[:shift]:
                for mode in MODES:
                    t0 = time.perf_counter()
                    await clients[lay].search(text, mode=mode, limit=10)  # type: ignore[arg-type]
                    spent[lay][mode].append((time.perf_counter() - t0) * 1000)
    return {lay: {m: round(statistics.median(v), 3) for m, v in modes.items()} for lay, modes in spent.items()}


async def measure(
    url: str, name: str, layouts: list[str], rounds: int, scale: bool, tree: Path | None
) -> dict[str, Any]:
    data: BeirDataset = load_beir(folder(name))
    out: dict[str, Any] = {"set": name, "documents": len(data.documents), "layouts": {}}
    cached = embedder()
    queries = [data.queries[q] for q in sorted(data.qrels) if q in data.queries]
    for text in queries:
        await cached.embed_query(text)
    clients = {lay: SearchClient.from_settings(settings_for(url, name, lay), embedder=cached) for lay in layouts}
    for lay, client in clients.items():
        if lay.endswith("-allcands"):
            searching_all_candidates(client)
    for client in clients.values():
        await client.__aenter__()
    try:
        for lay, client in clients.items():
            row = await sizes(client)
            # (whether its searches read nested passages: some document is over the window)
            health = (await client.health()).index
            row["searches_passages"] = health.searches_passages
            row["agreement"] = health.passage_agreement  # (and so how its long documents are read)
            row["head_first"] = health.long_documents_head_first
            row["ndcg"] = {s.mode: s.ndcg_at_10 for s in await evaluate(client, data)}
            out["layouts"][lay] = row
        await latencies(clients, queries[:20], 1)  # warm every layout
        for lay, p in (await latencies(clients, queries, rounds)).items():
            out["layouts"][lay]["p50_ms"] = p
        if scale:
            for lay in layouts:
                if not lay.endswith("-allcands"):
                    build_in(tree if lay == "nested" else None, url, name, lay, 9)
            for lay, client in clients.items():
                out["layouts"][lay]["store_mb_10x"] = (await sizes(client))["store_mb"]
            await latencies(clients, queries[:20], 1)
            for lay, p in (await latencies(clients, queries, rounds)).items():
                out["layouts"][lay]["p50_ms_10x"] = p
        for client in clients.values():
            await client.indices.delete()
    finally:
        for client in clients.values():
            await client.__aexit__(None, None, None)
    return out


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| set | layout | store MB | BM25 / kNN / hybrid nDCG@10 | p50 ms BM25 / kNN / hybrid "
        "| vs head: kNN, hybrid p50, store | 10x: kNN, hybrid p50 vs head |"
    ]
    lines.append("|---|---|---:|---|---|---|---|")
    for row in rows:
        head = row["layouts"].get("head")
        for lay, r in row["layouts"].items():
            nd = r["ndcg"]
            p = r["p50_ms"]
            rel = big = ""
            if head is not None:
                hp = head["p50_ms"]
                store = r["store_mb"] / head["store_mb"]
                rel = f"{p['knn'] / hp['knn']:.2f}×, {p['hybrid'] / hp['hybrid']:.2f}×, {store:.2f}×"
                if "p50_ms_10x" in r:
                    h10, p10 = head["p50_ms_10x"], r["p50_ms_10x"]
                    big = f"{p10['knn'] / h10['knn']:.2f}×, {p10['hybrid'] / h10['hybrid']:.2f}×"
            if r.get("agreement") is not None:  # (the median agreement, and so how long documents are read)
                lay += f" ({r['agreement']:.3f}: {'head first' if r.get('head_first') else 'the better of'})"
            lines.append(
                f"| {row['set']} | {lay} | {r['store_mb']} | {nd['bm25']:.4f} / {nd['knn']:.4f} / {nd['hybrid']:.4f} "
                f"| {p['bm25']} / {p['knn']} / {p['hybrid']} | {rel} | {big} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", nargs="+", default=["lisa", "npl", "scifact", "scifact-x10", "lisa-x10"])
    parser.add_argument("--layouts", nargs="+", default=["head", "nested", "passages"])
    parser.add_argument("--old-tree", type=Path, help="a checkout of the code before mapping version 4")
    parser.add_argument("--out", default="layouts.json", help="file name in bench/results")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--scale", action="store_true")
    parser.add_argument("--build", nargs=4, metavar=("URL", "SET", "LAYOUT", "COPIES"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build:
        url, name, layout, copies = args.build
        asyncio.run(build(url, name, layout, int(copies)))
        return
    if "nested" in args.layouts and args.old_tree is None:
        parser.error("the nested layout is built by the old code: --old-tree (git worktree add <dir> <commit>)")
    rows = []
    with url_or_local("bench-layouts", heap="1g") as url:
        for name in args.sets:
            for lay in args.layouts:
                if not lay.endswith("-allcands"):  # (searches another layout's index)
                    build_in(args.old_tree if lay == "nested" else None, url, name, lay, 0)
            row = asyncio.run(measure(url, name, args.layouts, args.rounds, args.scale, args.old_tree))
            rows.append(row)
            print(json.dumps(row), flush=True)
    print(table(rows))
    out = ROOT / "bench" / "results" / args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
