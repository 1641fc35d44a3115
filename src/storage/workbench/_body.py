"""A JSON request body, read once for every handler of the workbench's API."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from .. import InvalidQuery

__all__ = ["json_body"]


async def json_body(request: Request) -> dict[str, Any]:
    """The body's JSON object ({} for a GET); anything else is :class:`InvalidQuery` (a 400)."""
    if request.method == "GET":
        return {}
    try:
        body = await request.json()
    except ValueError:
        raise InvalidQuery("the request body is not JSON") from None
    if not isinstance(body, dict):
        raise InvalidQuery("the request body must be a JSON object")
    return body
