"""Client instructions per hybrid search, ours vs raw elasticsearch-py, counted by valgrind: a figure that
does not move with the machine's load (timings on 2 shared vCPUs drift ±15 % between runs minutes apart).

    .venv/bin/python bench/instructions.py            # needs valgrind (apt install valgrind)
    .venv/bin/python bench/instructions.py --searches 50 150   # quicker, coarser

Starts a local Elasticsearch unless ES_URL is set, indexes 2,000 SciFact documents, records one query's
three answers (BM25 leg, kNN leg, fetch), then runs each contender in a child process under
``valgrind --tool=callgrind`` answering from the recording (bench/profile_search.py's canned node): once
with N1 and once with N2 searches. (total(N2) - total(N1)) / (N2 - N1) is the client's own instructions per
search, start-up and imports cancelled out. Both contenders send the same requests and get the same bytes.
Start-up itself differs by up to ~20 million instructions between two runs of one program (an empty loop run
200 and 1,000 times differed by 22.8 M), so the default difference is 500 searches (±40 k per search at
worst); one code measured 4.20 M with a difference of 100 searches and 4.08 M with 500.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
from docs_page import stamp, write_section  # bench/docs_page.py: the page's generated sections
from elasticsearch import AsyncElasticsearch
from elasticsearch.serializer import OrjsonSerializer
from profile_search import CannedNode, record_answers  # bench/profile_search.py: recorded answers
from raw_client import Precomputed, query_key, two_phase

from embeddings import CachedEmbedder, LocalEmbedder
from storage import SearchClient, SearchSettings
from storage.evaluation import load_beir
from storage.local_es import url_or_local

ROOT = Path(__file__).resolve().parents[1]
INDEX = "bench-instructions"


async def record(url: str, window: int) -> dict[str, Any]:
    data = load_beir(ROOT.parent / "shared/data/beir/scifact")
    query = next(iter(data.queries.values()))
    cached = CachedEmbedder(LocalEmbedder(), ROOT / ".cache" / "embeddings")
    async with SearchClient.from_settings(
        SearchSettings(url=url, index=INDEX, passages=False), embedder=cached
    ) as client:
        await client.indices.delete()
        await client.ensure_index()
        report = await client.index_documents(data.documents[:2000], refresh=True)
        assert report.ok, report.failed[:3]
        vector = await cached.embed_query(query)
        answers = await record_answers(client.elasticsearch, INDEX, query, vector, window, window, highlight=True)
        await client.indices.delete()
    return {"query": query, "vector": list(vector), "window": window, **answers}


async def searches(recorded: dict[str, Any], who: str, n: int) -> None:
    """The child: ``n`` searches (after 20 to warm up) on the recorded answers."""
    CannedNode.answers = {kind: orjson.dumps(recorded[kind]) for kind in ("bm25", "knn", "fetch")}
    query, vector, window = recorded["query"], recorded["vector"], recorded["window"]
    settings = SearchSettings(
        url="http://canned:9200", index=INDEX, window=window, num_candidates=window, passages=False
    )
    fake = AsyncElasticsearch("http://canned:9200", node_class=CannedNode, serializer=OrjsonSerializer())
    embedder = Precomputed({query_key(query): vector}, "m", len(vector))
    client = SearchClient(fake, embedder, settings, owns_clients=False)

    async def ours() -> None:
        await client.search(query, limit=10, highlight=True)

    async def raw() -> None:
        await two_phase(fake, INDEX, query, vector, window=window, candidates=window, k=settings.rrf_k, highlight=True)

    call = ours if who == "ours" else raw
    for _ in range(20 + n):
        await call()
    await fake.close()


def count(path: Path, who: str, n: int) -> int:
    """Instructions of a child doing ``n`` searches, as callgrind reports them."""
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, __file__]
    out = subprocess.run(
        [*cmd, "--child", who, str(n), "--canned", str(path)], capture_output=True, text=True, env=env, check=True
    )
    found = re.search(r"Collected : (\d+)", out.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count in valgrind's output:\n{out.stderr[-2000:]}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--searches", type=int, nargs=2, default=(50, 550), metavar=("N1", "N2"))
    parser.add_argument("--window", type=int, default=100)
    parser.add_argument("--canned", type=Path, default=ROOT / ".cache" / "bench" / "canned-search.json")
    parser.add_argument("--child", nargs=2, metavar=("WHO", "N"), help=argparse.SUPPRESS)
    parser.add_argument("--write-docs", action="store_true", help="write its section of docs/benchmarks.md")
    args = parser.parse_args()
    if args.child:
        asyncio.run(searches(orjson.loads(args.canned.read_bytes()), args.child[0], int(args.child[1])))
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed: apt install valgrind (Debian/Ubuntu)")
    args.canned.parent.mkdir(parents=True, exist_ok=True)
    with url_or_local("instructions") as url:
        args.canned.write_bytes(orjson.dumps(asyncio.run(record(url, args.window))))
    n1, n2 = args.searches
    per_search = {}
    for who in ("raw", "ours"):
        per_search[who] = (count(args.canned, who, n2) - count(args.canned, who, n1)) / (n2 - n1)
    print(f"client instructions per hybrid search (window {args.window}, limit 10, highlights; valgrind):")
    for who, label in (("raw", "raw elasticsearch-py, same requests"), ("ours", "ours")):
        print(f"  {label:<36} {per_search[who] / 1e6:6.3f} M")
    ratio = per_search["ours"] / per_search["raw"]
    print(f"  ours / raw: {ratio:.2f}")
    if args.write_docs:
        write_section(
            "bench/instructions.py",
            f"### Client instructions per search (`bench/instructions.py`, valgrind, {stamp()})\n\n"
            f"One hybrid search (window {args.window}, limit 10, highlights) on recorded answers, counted by "
            f"valgrind between search {n1} and search {n2} (the machine's load does not move this figure): raw "
            f"elasticsearch-py sending the same requests {per_search['raw'] / 1e6:.3f} M instructions, ours "
            f"{per_search['ours'] / 1e6:.3f} M: **{ratio:.2f}×** (the guard: ≤ 1.4×).",
        )


if __name__ == "__main__":
    main()
