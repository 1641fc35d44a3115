"""Every document submitted ends in exactly one of indexed / failed: the three classic collections of
``../shared/data/ir`` (cacm has 1,617 title-only records), indexed as they are, then counted in the index.

    .venv/bin/python bench/ingest_accounting.py [--embedder hashing|local]

Reads each ``corpus.jsonl`` as raw records (nothing is filtered before the library sees it), indexes them,
and prints submitted / indexed / failed (by reason) / the index's count per collection. ``hashing`` (the
default) makes it quick: what is measured is the accounting, not retrieval quality. Starts a local
Elasticsearch unless ES_URL is set. Prints a JSON result; not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
from pathlib import Path
from typing import Any

from embeddings import Embedder, HashingEmbedder, LocalEmbedder
from storage import SearchClient, SearchSettings
from storage.evaluation import beir_document, read_jsonl_documents
from storage.local_es import url_or_local

ROOT = Path(__file__).resolve().parents[1]


async def run(url: str, folders: list[Path], embedder: Embedder) -> list[dict[str, Any]]:
    out = []
    for folder in folders:
        records = [beir_document(r) for _, r, _ in read_jsonl_documents(folder / "corpus.jsonl") if r is not None]
        title_only = sum(1 for r in records if r["title"].strip() and not r["text"].strip())
        settings = SearchSettings(url=url, index=f"accounting-{folder.name}")
        async with SearchClient.from_settings(settings, embedder=embedder) as client:
            await client.indices.delete()
            await client.ensure_index()
            report = await client.index_documents(records, refresh=True)
            count = await client.documents.count()
            await client.indices.delete()
        row = {
            "collection": folder.name,
            "submitted": len(records),
            "title_only": title_only,
            "indexed": len(report.indexed),
            "failed": len(report.failed),
            "failed_by_reason": dict(collections.Counter(f.reason for f in report.failed)),
            "duplicates": len(report.duplicates),
            "count_in_index": count,
            "accounted": len(report.indexed) + len(report.failed) + len(report.duplicates) == len(records),
            "seconds": round(report.seconds, 1),
        }
        print(json.dumps(row), flush=True)
        out.append(row)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared/data/ir")
    parser.add_argument("--embedder", choices=("hashing", "local"), default="hashing")
    args = parser.parse_args()
    folders = sorted(p for p in args.data.iterdir() if (p / "corpus.jsonl").is_file())
    embedder: Embedder = HashingEmbedder(dimensions=64) if args.embedder == "hashing" else LocalEmbedder()
    with url_or_local("accounting", heap="1g") as url:
        rows = asyncio.run(run(url, folders, embedder))
    print(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
