"""nDCG@10 and Recall@100 per mode and fusion on a BEIR folder, with the default local model.

Prints a JSON result; not a test. Starts a local Elasticsearch unless ES_URL is set. The same evaluation
as ``hybrid-search eval`` (storage._eval, metrics by ir-measures).

    .venv/bin/python bench/quality.py [--beir ../shared/data/beir/scifact]
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

from embeddings import LocalEmbedder
from storage import SearchClient, SearchSettings
from storage._eval import evaluate, load_beir
from storage.local_es import url_or_local

MODES = [
    ("bm25", None),
    ("knn", None),
    ("hybrid", "rrf"),
    ("hybrid", "linear_minmax"),
    ("hybrid", "linear_zscore"),
    ("hybrid", "dbsf"),
]


async def run(url: str, folder: Path) -> dict[str, object]:
    data = load_beir(folder)
    settings = SearchSettings(url=url, index=f"bench-{folder.name.lower()}", leg_timeout_s=60)
    out: dict[str, object] = {"dataset": data.name, "documents": len(data.documents), "queries": len(data.queries)}
    async with SearchClient.from_settings(settings, embedder=LocalEmbedder()) as client:
        await client.delete_index()
        await client.ensure_index()
        report = await client.index_documents(data.documents, refresh=True)
        out["index_seconds"] = round(report.seconds, 1)
        out["failed"] = len(report.failed)
        scores = await evaluate(client, data, modes=MODES)  # type: ignore[arg-type]
        out["results"] = [s.__dict__ for s in scores]
        await client.delete_index()
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--beir", type=Path, default=Path(__file__).parents[2] / "shared/data/beir/scifact")
    args = parser.parse_args()
    with url_or_local("bench", heap="1g") as url:
        print(json.dumps(asyncio.run(run(url, args.beir)), indent=2))


if __name__ == "__main__":
    main()
