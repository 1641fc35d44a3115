"""What the launcher's plugins cost: their build time, and a node's start time with and without them.

    .venv/bin/python bench/node_start.py [--version 8.19.21] [--runs 3]

- build: the two plugins compiled and packaged from scratch (a fresh build directory and a fresh copy of
  the distribution, so nothing cached is reused), seconds;
- start: ``LocalElasticsearch(...).start()`` to a ready node (process spawned, HTTP answering, yellow),
  with the plugins and with the bare minimal distribution, alternating, ``--runs`` each.

Prints one line per measurement and a JSON summary; not a test. The distribution must already be fetched
(any earlier start does it).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from storage.local_es import LocalElasticsearch, default_version, find_java_home, install_plugins


def build_seconds(version: str) -> float:
    home = LocalElasticsearch(version=version, plugins=False).fetch()
    with tempfile.TemporaryDirectory(prefix="plugin-build-") as tmp:
        copy = Path(tmp) / "home"
        shutil.copytree(home, copy, symlinks=True)
        started = time.monotonic()
        install_plugins(copy, version, find_java_home(version), Path(tmp) / "build")
        return time.monotonic() - started


def start_seconds(version: str, plugins: bool, run: int) -> float:
    node = LocalElasticsearch(
        version=version, plugins=plugins, ephemeral=True, name=f"start-{'p' if plugins else 'm'}{run}"
    )
    node.fetch()
    if plugins:  # built and installed before the clock starts: the start alone is measured
        install_plugins(node.home, version, find_java_home(version), node.cache_dir / "plugins")
    started = time.monotonic()
    node.start()
    seconds = time.monotonic() - started
    node.stop()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--version", default=default_version())
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    build = build_seconds(args.version)
    print(f"plugin build (both, from scratch): {build:.1f} s", flush=True)
    starts: dict[str, list[float]] = {"plugins": [], "minimal": []}
    for run in range(args.runs):
        for plugins in (True, False):
            s = start_seconds(args.version, plugins, run)
            starts["plugins" if plugins else "minimal"].append(round(s, 1))
            print(f"start {'with plugins' if plugins else 'minimal     '} run {run + 1}: {s:.1f} s", flush=True)
    summary = {
        "version": args.version,
        "plugin_build_s": round(build, 1),
        "start_s": starts,
        "start_median_s": {k: statistics.median(v) for k, v in starts.items()},
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
