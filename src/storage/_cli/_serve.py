"""Commands that serve: ``mcp`` (the MCP server over stdio), ``kibana-import``, ``compose`` (the
docker-compose file for Elasticsearch and Kibana)."""

from __future__ import annotations

import asyncio
from importlib import resources
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


def compose_file() -> str:
    """The docker-compose file: inside the installed package, or at the checkout's root."""
    packaged = resources.files("storage") / "docker-compose.yml"
    if packaged.is_file():
        return packaged.read_text(encoding="utf-8")
    return (Path(__file__).resolve().parents[3] / "docker-compose.yml").read_text(encoding="utf-8")


@app.command()
def compose() -> None:
    """Print a docker-compose file for Elasticsearch and Kibana (Basic license, security off, local use):
    `hybrid-search compose > docker-compose.yml && docker compose up -d`, then export
    ES_URL=http://127.0.0.1:9200. Any elasticsearch client major works with it (ES_VERSION picks the server)."""
    out.print(compose_file(), markup=False, end="")
