"""``hybrid-search``: the command line (typer + rich), one module per command group.

- ``_app.py``: the app, the shared options (``--url``, ``--index``, ``--verbose``), how a command runs;
- ``_build.py``: ``init``, ``ingest``, ``models``, ``reembed``;
- ``_read.py``: ``search``, ``ask``, ``health``;
- ``_quality.py``: ``eval``, ``tune``;
- ``_demo.py``: ``demo``;
- ``_serve.py``: ``mcp``, ``workbench``, ``kibana-import``, ``compose``.

Settings come from the environment (``ES_*``, ``EMBEDDINGS_*``, ``LLM_*``); ``--url`` / ``--index`` override the
two most common ones. Errors print one line and exit non-zero (1: some documents failed, 2: an error);
``--verbose`` shows the details.
"""

from __future__ import annotations

from . import _build, _demo, _quality, _read, _serve  # noqa: F401 - each registers its commands
from ._app import app

__all__ = ["app", "main"]


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point (``argv`` for tests); usage errors are click's (exit 2)."""
    try:
        app(args=argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
