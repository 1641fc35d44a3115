"""A local search workbench: why a result ranks where it does (``hybrid-search workbench``).

One page over an existing index — BM25, kNN and the fused list side by side with each hit's per-leg ranks,
scores and passages; the fusion changed live (re-fused from the legs' candidates, no search re-run);
judgments (0/1/2) kept in an index beside the data and exported as BEIR qrels; nDCG@10 / Recall@100 per leg
and per fusion, ``tune`` from the judgments, and — only when started with writes allowed and confirmed —
the result stored with the index; recent, slow and degraded searches from the telemetry data stream.

It sits above the client's public API (like ``storage.evaluation``): it imports no private module of
``storage``. Binds 127.0.0.1 by default; a random token in the printed URL; read-only unless
``allow_writes``; a tenant-bound workbench sees one tenant. Needs the ``workbench`` extra (Starlette and
uvicorn)::

    from storage.workbench import Workbench, create_app
    app = create_app(Workbench(lambda: SearchClient.from_settings(), token=secrets.token_urlsafe(24)))
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

try:
    import uvicorn
    from starlette.applications import Starlette
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("the workbench needs the 'workbench' extra: pip install 'hybrid-search-es[workbench]'") from exc

from .. import SearchClient
from ._app import COOKIE, Workbench, create_app

__all__ = ["COOKIE", "Workbench", "create_app", "serve"]


def serve(
    client_factory: Callable[[], SearchClient],
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    allow_writes: bool = False,
    tenant_id: str | None = None,
    token: str | None = None,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve the workbench until Ctrl-C (uvicorn; its client is made, entered and closed on uvicorn's loop).
    ``on_ready(url)`` gets the URL with the token once it listens."""
    token = token or secrets.token_urlsafe(24)
    wb = Workbench(client_factory, token=token, allow_writes=allow_writes, tenant_id=tenant_id)
    app: Starlette = create_app(wb)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)

    class _Announce(uvicorn.Server):
        async def startup(self, sockets: list[object] | None = None) -> None:  # type: ignore[override]
            await super().startup(sockets)  # type: ignore[arg-type]
            if on_ready is not None and self.started:
                bound = self.servers[0].sockets[0].getsockname()[1] if self.servers else port
                on_ready(f"http://{host}:{bound}/?token={token}")

    server = _Announce(config)
    server.run()
