"""Deep paging of a fused list: the walk's semantics and its opaque cursor. Pure: no I/O.

A walk runs on one point-in-time (a frozen view of the index: documents written meanwhile neither appear
nor shift the pages). Its order is:

1. the **head**: the fusion (same method, k and weights as :meth:`SearchClient.search`) of each leg's top
   ``depth`` documents — page 1 of a walk is ``search(window=depth)``'s first page, and position *n* of the
   walk is position *n* of that fused list;
2. then the **BM25 tail**: the keyword matches ranked below ``depth``, in BM25 order, minus any document
   already returned by the head (a kNN hit can also be a deep BM25 match).

So every BM25 match and every one of the ``depth`` nearest neighbours appears exactly once. The cursor
carries the point-in-time id, the position in the head, the BM25 ``search_after`` of the tail, and a
fingerprint of the arguments it belongs to.
"""

from __future__ import annotations

import base64
import hashlib
import json
import zlib
from collections.abc import Mapping
from typing import Any

__all__ = ["CURSOR_VERSION", "decode_cursor", "encode_cursor", "fingerprint"]

CURSOR_VERSION = 1


def fingerprint(parts: Mapping[str, Any]) -> str:
    """What a cursor is bound to (query, mode, filters, tenant, index, fusion): reused with other arguments
    it is refused, so a cursor cannot widen a search (another tenant, fewer filters)."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:24]


def encode_cursor(state: Mapping[str, Any]) -> str:
    raw = json.dumps({"v": CURSOR_VERSION, **state}, separators=(",", ":"), sort_keys=True).encode()
    return base64.urlsafe_b64encode(zlib.compress(raw, 6)).decode().rstrip("=")


def decode_cursor(cursor: str) -> dict[str, Any]:
    """Raises ``ValueError`` for anything that is not a cursor of this version."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        data = json.loads(zlib.decompress(base64.urlsafe_b64decode(padded.encode("ascii")), bufsize=1 << 16))
    except (ValueError, zlib.error, UnicodeError) as exc:
        raise ValueError("not a cursor returned by search_page") from exc
    if not isinstance(data, dict) or data.get("v") != CURSOR_VERSION:
        raise ValueError("not a cursor of this version")
    return data
