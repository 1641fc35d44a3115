"""Accent folding in BM25 (issue 53): ``english`` vs ``english_folded`` on the same documents, one run.

For each collection: BM25 nDCG@10 / Recall@100 with both analyzers on the collection as given (folding must
cost nothing), and on two variants built here where accents differ between query and document —
``accented documents`` (a third of the words of each document get an accent on their first vowel, chosen by a
hash of the word: the same word is always written the same way, as a name is) with the queries as given, and
``accented queries`` (the same transform on the queries only). Public API only; vectors from the hashing
embedder (this measures the BM25 leg alone).

    .venv/bin/python bench/accents.py [--sets scifact,cacm,lisa,npl]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import re
import time
from dataclasses import replace
from pathlib import Path

from embeddings import HashingEmbedder
from storage import SearchClient, SearchSettings
from storage.evaluation import BeirDataset, evaluate, load_beir
from storage.local_es import url_or_local

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
SETS = {"scifact": DATA / "beir" / "scifact", **{n: DATA / "ir" / n for n in ("cacm", "lisa", "npl")}}
_ACCENT = {"a": "á", "e": "é", "i": "í", "o": "ö", "u": "ü", "A": "Á", "E": "É", "I": "Í", "O": "Ö", "U": "Ü"}
_WORD = re.compile(r"[A-Za-z]{4,}")


def accent(text: str) -> str:
    """A third of the words (by a hash of the lower-cased word) with their first vowel accented."""

    def one(m: re.Match[str]) -> str:
        word = m.group(0)
        if hashlib.blake2b(word.lower().encode(), digest_size=1).digest()[0] % 3:
            return word
        for i, ch in enumerate(word):
            if ch in _ACCENT:
                return word[:i] + _ACCENT[ch] + word[i + 1 :]
        return word

    return _WORD.sub(one, text)


def variants(data: BeirDataset) -> dict[str, BeirDataset]:
    docs = [d.model_copy(update={"title": accent(d.title), "text": accent(d.text)}) for d in data.documents]
    return {
        "as given": data,
        "accented documents": replace(data, documents=docs),
        "accented queries": replace(data, queries={q: accent(t) for q, t in data.queries.items()}),
    }


async def bm25(url: str, data: BeirDataset, analyzer: str) -> tuple[float, float]:
    settings = SearchSettings(url=url, index=f"bench-accents-{analyzer.replace('_', '-')}", analyzer=analyzer)
    async with SearchClient.from_settings(settings, embedder=HashingEmbedder(dimensions=64)) as client:
        await client.indices.delete()
        await client.ensure_index()
        await client.index_documents(data.documents, refresh=True)
        scores = await evaluate(client, data)
        await client.indices.delete()
    row = next(s for s in scores if s.mode == "bm25")
    return row.ndcg_at_10, row.recall_at_100


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", default=",".join(SETS))
    args = parser.parse_args()
    print("| collection | variant | english nDCG@10 / R@100 | english_folded nDCG@10 / R@100 |")
    print("|---|---|---|---|")
    with url_or_local("bench-accents") as url:
        for name in args.sets.split(","):
            started = time.perf_counter()
            for variant, data in variants(load_beir(SETS[name])).items():
                plain = await bm25(url, data, "english")
                folded = await bm25(url, data, "english_folded")
                print(
                    f"| {name} | {variant} | {plain[0]:.4f} / {plain[1]:.4f} | {folded[0]:.4f} / {folded[1]:.4f} |",
                    flush=True,
                )
            print(f"<!-- {name}: {time.perf_counter() - started:.0f} s -->", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
