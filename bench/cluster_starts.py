"""Cold starts of a three-node local cluster, each from an empty cache directory (the distribution fetched
and unpacked anew, no node directory left from before): every start must form a green cluster.

    .venv/bin/python bench/cluster_starts.py [--runs 10]

Prints one line per run (fetch + unpack seconds, seconds to green, or the error) and a JSON summary.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

from storage.local_es import LocalCluster, LocalElasticsearch, LocalElasticsearchError


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--size", type=int, default=3)
    args = parser.parse_args()
    results = []
    for run in range(1, args.runs + 1):
        cache = Path(tempfile.mkdtemp(prefix="cluster-cold-"))
        cache.chmod(0o755)  # the nodes run as an unprivileged user when started by root
        try:
            t0 = time.monotonic()
            LocalElasticsearch(cache_dir=cache).fetch()
            fetched = time.monotonic() - t0
            cluster = LocalCluster(size=args.size, name=f"cold{run}", cache_dir=cache)
            t1 = time.monotonic()
            try:
                with cluster:
                    cluster.wait_green()
                    green = time.monotonic() - t1
                row = {"run": run, "ok": True, "fetch_unpack_s": round(fetched, 1), "green_s": round(green, 1)}
            except LocalElasticsearchError as exc:
                row = {"run": run, "ok": False, "error": str(exc)[:2000]}
        finally:
            shutil.rmtree(cache, ignore_errors=True)
        print(json.dumps(row), flush=True)
        results.append(row)
    ok = [r for r in results if r["ok"]]
    print(
        json.dumps(
            {
                "runs": len(results),
                "green": len(ok),
                "green_s": sorted(r["green_s"] for r in ok),
                "fetch_unpack_s": sorted(r["fetch_unpack_s"] for r in ok),
            }
        )
    )


if __name__ == "__main__":
    main()
