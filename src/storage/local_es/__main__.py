"""``python -m storage.local_es run|start|stop|fetch`` (see the package docstring)."""

from __future__ import annotations

import argparse
import atexit
import contextlib
import logging
import signal
import sys
import time
from pathlib import Path

from ._host import (
    DEFAULT_HEAP,
    DEFAULT_STOP_TIMEOUT_S,
    LocalElasticsearchError,
    _stop_group,
    default_cache_dir,
    default_version,
)
from ._node import LocalElasticsearch


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m storage.local_es", description="A local Elasticsearch on 127.0.0.1, without Docker."
    )
    parser.add_argument("command", choices=["run", "start", "stop", "fetch"])
    parser.add_argument(
        "--version", default=default_version(), help="default: ES_VERSION, else the installed client's major"
    )
    parser.add_argument("--cache-dir", type=Path, default=default_cache_dir())
    parser.add_argument("--heap", default=DEFAULT_HEAP)
    parser.add_argument("--name", default="cli", help="instance name (data and logs live per name)")
    parser.add_argument("--ephemeral", action="store_true", help="delete the instance's data and logs on stop")
    parser.add_argument(
        "--no-plugins", action="store_true", help="the bare minimal distribution (no english analyzer, no GET /)"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    node = LocalElasticsearch(
        version=args.version,
        cache_dir=args.cache_dir,
        heap=args.heap,
        name=args.name,
        ephemeral=args.ephemeral,
        die_with_parent=args.command != "start",
        plugins=not args.no_plugins,
    )
    try:
        if args.command == "fetch":
            started = time.monotonic()
            print(node.fetch(), f"({time.monotonic() - started:.1f} s)")
        elif args.command == "stop":
            pid_file = node.instance_dir / "pid"
            if not pid_file.exists():
                print("no local Elasticsearch started by `start` is running")
                return 0
            _stop_group(int(pid_file.read_text()), DEFAULT_STOP_TIMEOUT_S)
            pid_file.unlink(missing_ok=True)
            (node.instance_dir / "url").unlink(missing_ok=True)
            print("stopped")
        elif args.command == "start":
            url = node.start()
            atexit.unregister(node.stop)  # leave it running; `stop` ends it
            node.process = None
            print(f"ES_URL={url}  (pid file: {node.instance_dir / 'pid'}; stop with `python -m storage.local_es stop`)")
        else:
            url = node.start()
            print(f"Elasticsearch {args.version} is running at {url} (pid {node.pid}) - Ctrl-C stops it", flush=True)
            with contextlib.suppress(KeyboardInterrupt):
                # Ctrl-C stops it even when started from a shell that ignores SIGINT for background jobs
                # (Python then never installs its handler: the node would outlive an interrupt).
                signal.signal(signal.SIGINT, signal.default_int_handler)
                signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
                while node.process is not None and node.process.poll() is None:
                    time.sleep(1)
            node.stop()
    except LocalElasticsearchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
