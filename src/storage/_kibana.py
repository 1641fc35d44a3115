"""Import the saved objects in ``kibana/`` through Kibana's saved-objects API (``hybrid-search kibana-import``).

Uses aiohttp (already installed with ``elasticsearch[async]``) for the multipart upload.
"""

from __future__ import annotations

import json

import aiohttp

__all__ = ["import_saved_objects"]


async def import_saved_objects(
    kibana_url: str,
    ndjson: bytes,
    *,
    filename: str = "saved_objects.ndjson",
    space: str | None = None,
    timeout_s: float = 30.0,
) -> str:
    """POST ``ndjson`` (saved objects) to ``/api/saved_objects/_import?overwrite=true``; returns a one-line summary.

    Raises ``OSError`` when Kibana cannot be reached and ``ValueError`` when it refuses the objects.
    """
    base = kibana_url.rstrip("/") + (f"/s/{space}" if space else "")
    form = aiohttp.FormData()
    form.add_field("file", ndjson, filename=filename, content_type="application/ndjson")
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as session,
            session.post(
                f"{base}/api/saved_objects/_import",
                params={"overwrite": "true"},
                headers={"kbn-xsrf": "hybrid-search"},
                data=form,
            ) as resp,
        ):
            status, text = resp.status, await resp.text()
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise OSError(f"cannot reach Kibana at {kibana_url}: {exc} (is it running? docker compose up -d)") from exc
    if status != 200:
        raise ValueError(f"Kibana answered {status}: {text[:300]}")
    body = json.loads(text)
    if not body.get("success", False):
        errors = [f"{e.get('type')}/{e.get('id')}: {e.get('error', {}).get('type')}" for e in body.get("errors", [])]
        raise ValueError(f"Kibana refused {len(errors)} objects: {'; '.join(errors[:5])}")
    return f"imported {body.get('successCount', 0)} saved objects into {base}"
