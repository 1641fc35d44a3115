"""Commands that serve: ``mcp`` (the MCP server over stdio), ``workbench`` (a local web page on the index),
``kibana-import``, ``compose`` (the docker-compose file for Elasticsearch and Kibana)."""

from __future__ import annotations

import asyncio
from importlib import resources
from pathlib import Path
from typing import Annotated

import typer

from ._app import app, err, out, settings

# -- mcp and kibana ------------------------------------------------------------------------------------


@app.command()
def mcp(
    limit: Annotated[int | None, typer.Option(help="Results a search returns by default [TOOL_LIMIT; 5].")] = None,
    max_limit: Annotated[
        int | None, typer.Option(help="The most results the model may ask for [TOOL_MAX_LIMIT; 20].")
    ] = None,
    max_chars: Annotated[
        int | None, typer.Option(help="Characters of a tool's reply at most [TOOL_MAX_CHARS; 4000].")
    ] = None,
    mode: Annotated[str | None, typer.Option(help="hybrid, bm25 or knn [TOOL_MODE; hybrid].")] = None,
    tenant: Annotated[str | None, typer.Option(help="Search only this tenant's documents [TOOL_TENANT_ID].")] = None,
    filters: Annotated[
        str | None,
        typer.Option(help="Filters the model may use, comma-separated: ticker,doc_type,source,date [TOOL_FILTERS]."),
    ] = None,
    min_similarity: Annotated[
        float | None,
        typer.Option(help="Hide semantic-only results below this similarity; 0 shows all [TOOL_MIN_SIMILARITY]."),
    ] = None,
    diversity: Annotated[
        float | None,
        typer.Option(help="0 (ranked order) to 1: fewer near-duplicate results [TOOL_DIVERSITY; 0]."),
    ] = None,
) -> None:
    """Serve the search, get_document and answer tools over MCP (stdio), on --url / --index. Needs the 'mcp'
    extra. Without ES_URL the server still starts; every call then says what to set."""
    try:
        from ..agent.mcp import main as serve
    except ImportError:
        err.print("error: the MCP server needs the 'mcp' extra: pip install 'hybrid-search-es[mcp]'", markup=False)
        raise typer.Exit(2) from None
    from .._errors import ConfigurationError
    from ..agent import ToolSettings

    try:
        policy = ToolSettings().policy(
            limit=limit,
            max_limit=max_limit,
            max_chars=max_chars,
            mode=mode,
            tenant_id=tenant,
            allowed_filters=filters,
            min_similarity=min_similarity,
            diversity=diversity,
        )
        search_settings = settings()
    except (ConfigurationError, ValueError) as exc:
        # Said on stderr, and served: the host completes its handshake and shows the reason on every call
        # (exiting here, it would only see its pipe close).
        reason = str(exc).splitlines()[0]
        err.print(f"error: {reason}", markup=False)
        serve(None, None, startup_error=reason)
        raise typer.Exit(2) from None
    serve(policy, search_settings)


@app.command()
def workbench(
    port: Annotated[int, typer.Option(help="Port to listen on (0: any free one).")] = 8765,
    host: Annotated[str, typer.Option(help="Address to bind (the default keeps it on this machine).")] = "127.0.0.1",
    allow_writes: Annotated[
        bool, typer.Option("--allow-writes", help="Allow storing a tuned fusion with the index (after a confirmation).")
    ] = False,
    tenant: Annotated[str | None, typer.Option(help="See and judge this tenant's documents only.")] = None,
) -> None:
    """A local web page on the index (--url / --index): BM25, kNN and fused results side by side, the fusion
    changed live, judgments, nDCG per leg and fusion, tune, recent/slow/degraded searches. Prints its URL (with
    a one-time token); Ctrl-C stops it. Needs the 'workbench' extra."""
    try:
        from ..workbench import serve as serve_workbench
    except ImportError:
        err.print(
            "error: the workbench needs the 'workbench' extra: pip install 'hybrid-search-es[workbench]'", markup=False
        )
        raise typer.Exit(2) from None
    from .._client import SearchClient

    search_settings = settings()

    def ready(url: str) -> None:
        out.print(f"workbench on {url}", markup=False)
        out.print(
            "read-only" if not allow_writes else "writes allowed: a tuned fusion can be stored (after a confirmation)",
            markup=False,
        )
        out.print("Ctrl-C stops it", markup=False)

    serve_workbench(
        lambda: SearchClient.from_settings(search_settings),
        host=host,
        port=port,
        allow_writes=allow_writes,
        tenant_id=tenant,
        on_ready=ready,
    )


@app.command("kibana-import")
def kibana_import(
    kibana_url: Annotated[str, typer.Option(help="Kibana's URL.", envvar="KIBANA_URL")] = "http://127.0.0.1:5601",
    file: Annotated[
        Path | None, typer.Option(help="Saved objects to send instead of the ones that ship with the package.")
    ] = None,
    space: Annotated[str | None, typer.Option(help="A Kibana space id (default space if omitted).")] = None,
) -> None:
    """Import the data views and the dashboard into Kibana (saved-objects API, overwrite)."""
    from .._observability.kibana import SAVED_OBJECTS, import_saved_objects, saved_objects

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
