"""The Elasticsearch our users run, with whichever ``elasticsearch`` client major pip installed.

elasticsearch-py sends ``Accept`` / ``Content-Type: application/vnd.elasticsearch+json; compatible-with=<its
major>`` on every request, and rewrites any header a caller sets to its own major (elasticsearch-py #2923).
A 9.x client and an 8.x server therefore fail on the first request: ``400 media_type_header_exception``
("Accept version must be either version 8 or 7, but found 9"). An 8.x client talks to 8.x and, through REST
API compatibility, 9.x servers.

:class:`CompatibleTransport` is the transport of every client :meth:`SearchClient.from_settings` builds: it
learns the server's major from its first refusal of the header and from then on sends the compatibility
the server accepts (``compatible-with=8``), the refused request sent again at once (a 400 applied nothing).
A client you build yourself and pass to ``SearchClient(es, ...)`` is used as it is — never patched: build it
with ``transport_class=storage.CompatibleTransport`` to get the same, else a 9.x client meeting an 8.x
server is an :class:`IncompatibleServer` error saying so.

The oldest server supported is :data:`MINIMUM_SERVER` (see :func:`too_old`): the versions from there to the
newest 9.x are tested in CI (``tests/integration/test_versions.py``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from importlib.metadata import version
from typing import Any

from elastic_transport import AsyncTransport, HttpHeaders, TransportApiResponse

__all__ = ["CLIENT_MAJOR", "MINIMUM_SERVER", "CompatibleTransport", "server_version", "too_old"]

#: The installed elasticsearch-py's major version.
CLIENT_MAJOR = int(version("elasticsearch").split(".", 1)[0])
#: The oldest Elasticsearch this library works with, and why: the ``knn`` *query* (deep paging and the
#: passages' kNN on a point-in-time), int8-quantized HNSW vectors (``int8_hnsw``) and ``inner_hits`` on a
#: nested ``dense_vector`` (which passage matched) all arrived in 8.12.
MINIMUM_SERVER = (8, 12)
_WHY = "the knn query, int8_hnsw vectors and inner_hits on nested vectors, all from 8.12"
_COMPAT = re.compile(r"compatible-with=\d+")


def _refuses_our_major(resp: TransportApiResponse) -> bool:
    body = resp.body
    if resp.meta.status != 400 or not isinstance(body, Mapping):
        return False
    error = body.get("error")
    return isinstance(error, Mapping) and error.get("type") == "media_type_header_exception"


def _pinned(headers: Any, major: int) -> HttpHeaders:
    out = HttpHeaders(headers) if headers is not None and not isinstance(headers, str) else HttpHeaders()
    for name in ("accept", "content-type"):
        value = out.get(name)
        if value and "compatible-with=" in value:
            out[name] = _COMPAT.sub(f"compatible-with={major}", value)
    return out


class CompatibleTransport(AsyncTransport):
    """An elastic-transport ``AsyncTransport`` that sends the REST compatibility version the server accepts
    (see the module docstring). Shared by a client and every ``options()`` copy of it."""

    #: The compatibility major the server accepts, once learned (None: the client's own, so far accepted).
    compatible_with: int | None = None

    async def perform_request(self, method: str, target: str, **kwargs: Any) -> TransportApiResponse:  # type: ignore[override]
        if self.compatible_with is not None:
            kwargs["headers"] = _pinned(kwargs.get("headers"), self.compatible_with)
        resp = await super().perform_request(method, target, **kwargs)
        if self.compatible_with is None and CLIENT_MAJOR > 8 and _refuses_our_major(resp):
            self.compatible_with = 8  # the server is 8.x: it speaks 8 (and 7)
            kwargs["headers"] = _pinned(kwargs.get("headers"), 8)
            resp = await super().perform_request(method, target, **kwargs)
        return resp


def server_version(info: Mapping[str, Any]) -> tuple[int, int] | None:
    """``(major, minor)`` from a ``GET /`` answer (None if it has no version number)."""
    number = str(info.get("version", {}).get("number", "")) if isinstance(info.get("version"), Mapping) else ""
    match = re.match(r"(\d+)\.(\d+)", number)
    return (int(match.group(1)), int(match.group(2))) if match else None


def too_old(version: tuple[int, int] | None) -> str | None:
    """Why a server of ``version`` cannot be used (None when it can, or when the version is unknown)."""
    if version is None or version >= MINIMUM_SERVER:
        return None
    found, floor = ".".join(map(str, version)), ".".join(map(str, MINIMUM_SERVER))
    return f"Elasticsearch {found} is older than {floor}, the oldest this library supports ({_WHY})"
