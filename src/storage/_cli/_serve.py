"""Commands that serve: ``mcp`` (the MCP server over stdio), ``kibana-import``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from ._app import app, err, out

# -- mcp and kibana ------------------------------------------------------------------------------------


@app.command()
def mcp() -> None:
    """Serve the search and get_document tools over MCP (stdio). Needs the 'mcp' extra."""
    try:
        from ..mcp_server import main as serve
    except ImportError:
        err.print("error: the MCP server needs the 'mcp' extra: pip install 'hybrid-search-es[mcp]'", markup=False)
        raise typer.Exit(2) from None
    serve()


@app.command("kibana-import")
def kibana_import(
    kibana_url: Annotated[str, typer.Option(help="Kibana's URL.", envvar="KIBANA_URL")] = "http://127.0.0.1:5601",
    file: Annotated[
        Path | None, typer.Option(help="Saved objects to send instead of the ones that ship with the package.")
    ] = None,
    space: Annotated[str | None, typer.Option(help="A Kibana space id (default space if omitted).")] = None,
) -> None:
    """Import the data views and the dashboard into Kibana (saved-objects API, overwrite)."""
    from .._kibana import SAVED_OBJECTS, import_saved_objects, saved_objects

    try:
        body, name = (file.read_bytes(), file.name) if file is not None else (saved_objects(), SAVED_OBJECTS)
        summary = asyncio.run(import_saved_objects(kibana_url, body, filename=name, space=space))
    except (OSError, ValueError) as exc:
        err.print(f"error: {exc}", markup=False)
        raise typer.Exit(2) from None
    out.print(summary, markup=False)
