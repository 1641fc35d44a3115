"""What the workbench says about the index and its server: the fields the documents hold values in (what the
page offers to filter on and group by) and, when a search fails, where Elasticsearch is (credentials left out)
and what its breaker last saw. Through the client's public API only."""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

from .. import SearchClient

__all__ = ["fields_with_values", "where_elasticsearch"]


#: The document fields a filter or a group may name, besides the index's own ``metadata.<key>``.
_STANDARD_FIELDS = {"ticker": "keyword", "doc_type": "keyword", "source": "keyword", "published_at": "date"}


async def fields_with_values(client: SearchClient, tenant_id: str | None) -> dict[str, str]:
    """The fields this index's documents have values in (name -> ``keyword`` or ``date``): what the page offers
    to filter on and to group by (it offered the demo corpus's ticker, source and doc_type on any index)."""
    es = client.elasticsearch
    mapped = (await es.options(ignore_status=404).indices.get_mapping(index=client.index)).body or {}
    candidates = dict(_STANDARD_FIELDS)
    for index in mapped.values():
        if not isinstance(index, dict):
            continue
        metadata = index.get("mappings", {}).get("properties", {}).get("metadata", {}).get("properties", {})
        candidates.update({f"metadata.{key}": "keyword" for key in metadata})
    counts = await asyncio.gather(
        *(client.documents.count(filters={f: {"exists": True}}, tenant_id=tenant_id) for f in candidates)
    )
    return {field: kind for (field, kind), n in zip(candidates.items(), counts, strict=True) if n}


def where_elasticsearch(client: SearchClient) -> str:
    """Where Elasticsearch is (its hosts, credentials left out) and what its breaker last saw: a failed search
    said "circuit is open" and nothing of which server or why."""
    where = ", ".join(_without_credentials(h) for h in client.settings.hosts()) or "(a cloud id)"
    breaker = client.breakers.get("elasticsearch")
    if breaker is None or breaker.last_failure is None:
        return f" — Elasticsearch at {where}"
    return f" — Elasticsearch at {where}, breaker {breaker.state}, last failure: {breaker.last_failure}"


def _without_credentials(url: str) -> str:
    parts = urlsplit(url)
    host = f"{parts.hostname}:{parts.port}" if parts.port else str(parts.hostname)
    return parts._replace(netloc=host).geturl()
