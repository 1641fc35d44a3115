"""What facets and diversity (MMR) cost, and what diversity does to quality and to duplicates.

On each given collection (the default local model; vectors cached in .cache/embeddings, so only a cold run
embeds), every judged query is searched (hybrid, limit 10) with ``diversity`` 0 (today's order), 0.3 and
0.5, and once with a facet: nDCG@10 (ir-measures, as every bench scores) and the search's p50.

Then a **collection with duplicates**, built reproducibly from SciFact (seed 7): 20 % of the abstracts get a
lightly edited copy (a few words dropped, two swapped; same title), indexed beside the originals. For each
judged query: how many distinct stories (an original and its copies count once) the top 10 holds, and how
many of its places go to a second copy of a story already shown — at diversity 0 and 0.5.

    .venv/bin/python bench/diversity.py [--sets scifact cacm lisa npl]

Starts a local Elasticsearch (1 GiB heap) unless ES_URL is set. Prints a table; JSON in
bench/results/diversity.json. Run it with nothing else on the machine (it measures latency).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import time
from pathlib import Path
from typing import Any

from embeddings import CachedEmbedder, LocalEmbedder
from storage import Document, SearchClient, SearchSettings
from storage.evaluation import BeirDataset, load_beir, measure
from storage.local_es import url_or_local

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
GIVEN = {
    "scifact": SHARED / "beir" / "scifact",
    "cacm": SHARED / "ir" / "cacm",
    "lisa": SHARED / "ir" / "lisa",
    "npl": SHARED / "ir" / "npl",
}
DIVERSITY = (0.0, 0.3, 0.5)


def p50(values: list[float]) -> float:
    return round(statistics.median(values), 2)


def edited(doc: Document, rng: random.Random) -> Document:
    """A light edit: about one word in twelve dropped and two neighbours swapped, the same title."""
    words = doc.text.split()
    kept = [w for w in words if rng.random() > 1 / 12] or words
    if len(kept) > 3:
        i = rng.randrange(len(kept) - 1)
        kept[i], kept[i + 1] = kept[i + 1], kept[i]
    return Document(id=f"{doc.id}~copy", title=doc.title, text=" ".join(kept))


async def quality(url: str, name: str, data: BeirDataset, cached: CachedEmbedder) -> dict[str, Any]:
    settings = SearchSettings(url=url, index=f"bench-diversity-{name}", leg_timeout_s=60)
    out: dict[str, Any] = {"set": name}
    async with SearchClient.from_settings(settings, embedder=cached) as client:
        await client.indices.delete()
        await client.ensure_index()
        assert (await client.index_documents(data.documents, refresh=True)).ok
        queries = {q: data.queries[q] for q in sorted(data.qrels) if q in data.queries}
        for text in queries.values():
            await cached.embed_query(text)  # cached: the latency below is the search's own
        # Interleaved per query (each variant on the same query in turn, after one warm-up pass), so that
        # no variant pays for cold caches or a slower minute of the machine.
        variants: dict[str, dict[str, Any]] = {f"diversity_{d}": {"diversity": d} for d in DIVERSITY}
        variants["facets"] = {"facets": ["source", "doc_type"]}
        for text in queries.values():
            await client.search(text, limit=10)
        ranked: dict[str, dict[str, list[str]]] = {name: {} for name in variants}
        took: dict[str, list[float]] = {name: [] for name in variants}
        for qid, text in queries.items():
            for name, extra in variants.items():
                t0 = time.perf_counter()
                res = await client.search(text, limit=10, **extra)
                took[name].append((time.perf_counter() - t0) * 1000)
                ranked[name][qid] = res.ids
        for d in DIVERSITY:
            name = f"diversity_{d}"
            out[name] = {"ndcg": measure(data.qrels, ranked[name])[0], "p50_ms": p50(took[name])}
        out["facets_p50_ms"] = p50(took["facets"])
        same = sum(ranked["facets"][q] == ranked["diversity_0.0"][q] for q in queries)
        out["facets_same_hits"] = round(same / len(queries), 4)  # facets never change the hits: 1.0
        await client.indices.delete()
    return out


async def duplicates(url: str, data: BeirDataset, cached: CachedEmbedder) -> dict[str, Any]:
    rng = random.Random(7)
    copies = [edited(d, rng) for d in data.documents if rng.random() < 0.2]
    settings = SearchSettings(url=url, index="bench-diversity-duplicates", leg_timeout_s=60)
    out: dict[str, Any] = {
        "set": "scifact+copies",
        "documents": len(data.documents) + len(copies),
        "copies": len(copies),
    }
    async with SearchClient.from_settings(settings, embedder=cached) as client:
        await client.indices.delete()
        await client.ensure_index()
        assert (await client.index_documents([*data.documents, *copies], refresh=True)).ok
        queries = [data.queries[q] for q in sorted(data.qrels) if q in data.queries]
        for d in (0.0, 0.5):
            stories, repeats = [], []
            for text in queries:
                ids = (await client.search(text, limit=10, diversity=d)).ids
                originals = [i.removesuffix("~copy") for i in ids]
                stories.append(len(set(originals)))
                repeats.append(len(originals) - len(set(originals)))
            out[f"diversity_{d}"] = {
                "distinct_stories_mean": round(statistics.mean(stories), 3),
                "second_copies_mean": round(statistics.mean(repeats), 3),
                "queries_with_a_second_copy": round(sum(1 for r in repeats if r) / len(repeats), 4),
            }
        await client.indices.delete()
    return out


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=list(GIVEN))
    args = parser.parse_args()
    cached = CachedEmbedder(LocalEmbedder(), ROOT / ".cache" / "embeddings")
    results: list[dict[str, Any]] = []
    with url_or_local("bench-diversity", heap="1g") as url:
        for name in args.sets:
            row = await quality(url, name, load_beir(GIVEN[name]), cached)
            print(json.dumps(row), flush=True)
            results.append(row)
        row = await duplicates(url, load_beir(GIVEN["scifact"]), cached)
        print(json.dumps(row), flush=True)
        results.append(row)
    await cached.aclose()
    print("\n| set | nDCG@10 d=0 | d=0.3 | d=0.5 | p50 ms d=0 | d=0.5 | with facets |")
    print("|---|---|---|---|---|---|---|")
    for r in results[:-1]:
        d0, d3, d5 = (r[f"diversity_{d}"] for d in DIVERSITY)
        print(
            f"| {r['set']} | {d0['ndcg']} | {d3['ndcg']} | {d5['ndcg']} | {d0['p50_ms']} | {d5['p50_ms']} "
            f"| {r['facets_p50_ms']} |"
        )
    dup = results[-1]
    print(f"\n{dup['set']} ({dup['documents']} documents, {dup['copies']} copies):")
    for d in ("0.0", "0.5"):
        print(f"  diversity {d}: {dup[f'diversity_{d}']}")
    out = ROOT / "bench" / "results" / "diversity.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1))
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    asyncio.run(main())
