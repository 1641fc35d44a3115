"""``python -m storage.local_es run|start|stop|status|fetch`` (see the package docstring).

``start``, ``stop`` and ``status`` agree on an instance's name (``--name``, default ``local``): ``start``
runs it in the background and prints the ``ES_URL`` to export, ``stop`` stops it (whatever version it runs),
``status`` lists what runs and the URL of each. An instance keeps its port from one start to the next (or
takes ``--port``), so an exported ``ES_URL`` stays good across restarts.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import logging
import signal
import sys
import time
from pathlib import Path

from ._host import (
    DEFAULT_HEAP,
    DEFAULT_STOP_TIMEOUT_S,
    LocalElasticsearchError,
    _group_alive,
    _stop_group,
    default_cache_dir,
    default_version,
)
from ._node import LocalElasticsearch

#: The instance ``start``, ``stop`` and ``status`` mean when no ``--name`` is given.
DEFAULT_NAME = "local"


def _instances(cache_dir: Path, name: str | None = None) -> list[tuple[str, str, Path]]:
    """(name, version, directory) of the instances started by ``start`` that still run (a pid file whose
    process group is alive), all of them or those named ``name``."""
    out = []
    for directory in sorted((cache_dir / "instances").glob("*")):
        version, _, found = directory.name.partition("-")
        if name is not None and found != name:
            continue
        pid_file = directory / "pid"
        with contextlib.suppress(OSError, ValueError):
            if _group_alive(int(pid_file.read_text())):
                out.append((found, version, directory))
    return out


def _url(directory: Path) -> str:
    with contextlib.suppress(OSError):
        return (directory / "url").read_text().strip()
    with contextlib.suppress(OSError, ValueError, KeyError):
        return f"http://127.0.0.1:{json.loads((directory / 'ports.json').read_text())['http']}"
    return "(unknown)"


def _name_flag(name: str) -> str:
    return "" if name == DEFAULT_NAME else f" --name {name}"


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m storage.local_es", description="A local Elasticsearch on 127.0.0.1, without Docker."
    )
    parser.add_argument("command", choices=["run", "start", "stop", "status", "fetch"])
    parser.add_argument(
        "--version", default=None, help="default: ES_VERSION, else the newest the launcher knows (8.x or 9.x)"
    )
    parser.add_argument("--cache-dir", type=Path, default=default_cache_dir())
    parser.add_argument("--heap", default=DEFAULT_HEAP)
    parser.add_argument(
        "--name", default=DEFAULT_NAME, help=f"instance name (data, logs, port); default {DEFAULT_NAME}"
    )
    parser.add_argument("--port", type=int, default=None, help="HTTP port (default: the instance's last, else free)")
    parser.add_argument("--ephemeral", action="store_true", help="delete the instance's data and logs on stop")
    parser.add_argument(
        "--no-plugins", action="store_true", help="the bare minimal distribution (no english analyzer, no GET /)"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.command == "status":
        running = _instances(args.cache_dir)
        if not running:
            print("no local Elasticsearch is running (start one: python -m storage.local_es start)")
            return 0
        for name, version, directory in running:
            print(f"{name}: Elasticsearch {version}, pid {(directory / 'pid').read_text().strip()}")
            print(f"  export ES_URL={_url(directory)}")
            print(f"  stop with: python -m storage.local_es stop{_name_flag(name)}")
        return 0
    if args.command == "stop":
        running = _instances(args.cache_dir, args.name)
        if not running:
            others = _instances(args.cache_dir)
            hint = "".join(f"\n  python -m storage.local_es stop{_name_flag(n)}  ({v})" for n, v, _ in others)
            print(f"no local Elasticsearch named {args.name!r} is running" + (f"; running:{hint}" if hint else ""))
            return 0
        for _, version, directory in running:
            _stop_group(int((directory / "pid").read_text()), DEFAULT_STOP_TIMEOUT_S)
            (directory / "pid").unlink(missing_ok=True)
            (directory / "url").unlink(missing_ok=True)
            print(f"stopped {args.name} (Elasticsearch {version})")
        return 0
    node = LocalElasticsearch(
        version=args.version or default_version(),
        cache_dir=args.cache_dir,
        heap=args.heap,
        name=args.name,
        ephemeral=args.ephemeral,
        die_with_parent=args.command != "start",
        plugins=not args.no_plugins,
        port=args.port,
    )
    try:
        if args.command == "fetch":
            started = time.monotonic()
            print(node.fetch(), f"({time.monotonic() - started:.1f} s)")
        elif args.command == "start":
            if running := _instances(args.cache_dir, args.name):
                _, version, directory = running[0]
                print(f"{args.name} is running already (Elasticsearch {version})\nexport ES_URL={_url(directory)}")
                return 0
            url = node.start()
            atexit.unregister(node.stop)  # leave it running; `stop` ends it
            node.process = None
            print(f"export ES_URL={url}")
            print(
                f"(Elasticsearch {node.version}, pid file {node.instance_dir / 'pid'}; "
                f"stop with: python -m storage.local_es stop{_name_flag(args.name)})"
            )
        else:
            # Ctrl-C stops it even when started from a shell (or a test worker) that ignores SIGINT for
            # background jobs: Python then never installs its handler, so it is installed here, before the
            # node starts and the line saying Ctrl-C stops it is printed (an interrupt sent as soon as that
            # line is read was ignored, and the node outlived it).
            signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
            try:
                url = node.start()
                print(
                    f"Elasticsearch {node.version} is running at {url} (pid {node.pid}) - Ctrl-C stops it", flush=True
                )
                while node.process is not None and node.process.poll() is None:
                    time.sleep(1)
            except KeyboardInterrupt:
                pass
            finally:
                node.stop()
    except LocalElasticsearchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
