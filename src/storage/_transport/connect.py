"""The Elasticsearch client a :class:`SearchClient` makes from its settings: hosts or Cloud ID, credentials
and TLS, one retry layer (ours), node failover, the fast serializer, the compatibility header."""

from __future__ import annotations

import io
import json
import re
from typing import TYPE_CHECKING, Any

from elastic_transport import AiohttpHttpNode, HttpHeaders
from elastic_transport.client_utils import DEFAULT, DefaultType
from elasticsearch import AsyncElasticsearch
from elasticsearch.serializer import OrjsonSerializer

from .._errors import ConfigurationError, ElasticsearchNotConfigured
from .._settings import SearchSettings
from .compat import CompatibleTransport

if TYPE_CHECKING:
    from elastic_transport._node import NodeApiResponse

__all__ = ["elasticsearch_client"]

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class Serializer(OrjsonSerializer):
    """elasticsearch-py's orjson serializer (a 384-float query vector encodes in 13 µs instead of 365 µs with
    the standard library), reading too what JSON allows and orjson refuses: a lone surrogate escape
    (``"\\ud83d"``: what a JavaScript program writes for a string cut inside an emoji; Elasticsearch stores and
    returns it). orjson refused the whole response, so one such document, written by another program, failed
    every search that showed it. Such a response is read by the standard library, each lone surrogate replaced
    by U+FFFD (no encoder writes one as UTF-8: the text would fail again wherever it is sent on).
    """

    def json_loads(self, data: bytes) -> Any:
        try:
            return super().json_loads(data)
        except ValueError:  # (orjson.JSONDecodeError); not JSON for the standard library either: raised there
            return _without_lone_surrogates(json.loads(data))


def _without_lone_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_without_lone_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {_without_lone_surrogates(k): _without_lone_surrogates(v) for k, v in value.items()}
    return value


#: aiohttp's mark (``aiohttp.payload.TOO_LARGE_BYTES_BODY``): a body of more bytes handed to it whole warns.
_AIOHTTP_LARGE_BODY = 2**20


class _StreamedBody(io.BytesIO):
    """A request body aiohttp writes in chunks; ``decode`` for elastic-transport's debug log of the body."""

    def decode(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        return self.getvalue().decode(encoding, errors)


class StreamedBodyNode(AiohttpHttpNode):
    """elasticsearch-py's aiohttp node, handing aiohttp a request body over 1 MiB as a stream.

    aiohttp (3.13 on) warns on a body of more than 1 MiB given as bytes ("Sending a large body directly with
    raw bytes might lock the event loop", a ResourceWarning). The warning is raised inside the node's request,
    where elastic-transport reads any exception as a failed connection: under ``-W error`` (pytest's
    ``filterwarnings = error``, in many users' test suites) a bulk request over 1 MiB (a larger
    ``bulk_max_bytes``, or one large document) failed as "cannot reach Elasticsearch". A file-like body is
    written in chunks, as aiohttp asks; a smaller body goes as it did.
    """

    async def perform_request(  # type: ignore[override]  # as the base's: BaseNode declares it synchronous
        self,
        method: str,
        target: str,
        body: bytes | None = None,
        headers: HttpHeaders | None = None,
        request_timeout: DefaultType | float | None = DEFAULT,
    ) -> NodeApiResponse:
        sent: Any = body  # the base hands it to aiohttp as it is (unless it compresses: then bytes)
        if body is not None and len(body) > _AIOHTTP_LARGE_BODY and not self.config.http_compress:
            sent = _StreamedBody(body)
        return await super().perform_request(method, target, sent, headers, request_timeout)


def elasticsearch_client(s: SearchSettings) -> AsyncElasticsearch:
    """An ``AsyncElasticsearch`` for settings ``s`` (:class:`ElasticsearchNotConfigured` without a URL or a
    Cloud ID; :class:`ConfigurationError` for settings elasticsearch-py refuses)."""
    hosts = s.hosts()
    if not hosts and not s.cloud_id:
        raise ElasticsearchNotConfigured()
    auth: dict[str, Any] = {"ca_certs": s.ca_certs} if s.ca_certs else {}
    if s.ssl_assert_fingerprint:
        auth["ssl_assert_fingerprint"] = s.ssl_assert_fingerprint
    if s.cloud_id:
        auth["cloud_id"] = s.cloud_id
    if s.api_key is not None:
        auth["api_key"] = s.api_key.get_secret_value()
    elif s.username is not None:
        auth["basic_auth"] = (s.username, s.password.get_secret_value() if s.password else "")
    sniff = s.sniff_on_start or s.sniff_on_node_failure
    # Only when asked: passing any sniff option (even False) installs elasticsearch-py's sniff callback,
    # whose requests use the transport's default retries (3) and outlive a closed client.
    sniffing: dict[str, Any] = {}
    if sniff:
        sniffing = {
            "sniff_on_start": s.sniff_on_start,
            "sniff_on_node_failure": s.sniff_on_node_failure,
            "min_delay_between_sniffing": s.sniff_min_delay_s,
        }
    try:
        return AsyncElasticsearch(
            hosts or None,
            request_timeout=s.request_timeout_s,
            # One retry layer only (ours). The transport keeps node failover for multi-node clusters (on
            # connection errors and timeouts) and never retries statuses by itself (it would, at once).
            max_retries=max(len(hosts) - 1, 2 if sniff else 0),
            retry_on_status=(),
            # With several nodes a timed-out node is failed over too (the transport marks it dead): a hung node
            # costs a search one request timeout (half the leg budget, Backend.leg_request_timeout_s).
            retry_on_timeout=len(hosts) > 1 or sniff,
            verify_certs=s.verify_certs,
            serializer=Serializer(),
            node_class=StreamedBodyNode,
            # Whatever client major is installed, the compatibility header the server accepts (compat).
            transport_class=CompatibleTransport,
            **sniffing,
            **auth,
        )
    except ValueError as exc:  # e.g. TLS options with an http:// URL
        raise ConfigurationError(f"invalid Elasticsearch connection settings: {exc}") from None
