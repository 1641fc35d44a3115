"""What the Elasticsearch stores we replace take, met here: their client objects and their constructor arguments.

A user who swaps ``ElasticsearchStore`` for ours keeps the arguments they pass. Each one either means something
here and is mapped (an ``Elasticsearch`` client's nodes and credentials become our connection; the peers'
default field names and distance are ours already), or is refused by name with what to pass instead — never
taken and ignored. Pure: no framework is imported; an elasticsearch-py client is read by its public attributes.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any, Literal

from .._errors import ConfigurationError

__all__ = [
    "Refresh",
    "api_key_of",
    "connection_of",
    "haystack_arguments",
    "is_elasticsearch_client",
    "peer_arguments",
    "refresh_of",
    "store_connection",
]

#: Headers an elasticsearch-py client sends on its own (not the user's to carry over).
_OWN_HEADERS = {"authorization", "user-agent", "accept", "content-type"}


def is_elasticsearch_client(value: Any) -> bool:
    """An elasticsearch-py client, sync or async (read by its module and its transport, not imported)."""
    return type(value).__module__.split(".")[0] == "elasticsearch" and hasattr(value, "transport")


def _credentials(authorization: str | None) -> dict[str, Any]:
    if not authorization:
        return {}
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() == "apikey":
        return {"api_key": token}
    if scheme.lower() == "basic":
        try:
            username, _, password = base64.b64decode(token).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            raise ConfigurationError("the Elasticsearch client's basic credentials could not be read") from None
        return {"username": username, "password": password}
    raise ConfigurationError(
        f"the Elasticsearch client authenticates with {scheme!r}: pass es_api_key= (or es_user= and es_password=)"
    )


def connection_of(es: Any) -> dict[str, Any]:
    """An elasticsearch-py client given where the peer took one (``client=`` / ``es_client=``): its nodes,
    credentials and certificate checks as our connection settings (``url``, ``api_key`` or ``username`` and
    ``password``, ``ca_certs``, ``verify_certs``, ``ssl_assert_fingerprint``). The store opens a client of its
    own on them (ours is asyncio and keeps its own pool); yours stays yours to close. What cannot be carried
    over (an ``ssl_context``, a client certificate, a bearer token, other headers) is refused by name."""
    nodes = list(es.transport.node_pool.all())
    if not nodes:
        raise ConfigurationError("the Elasticsearch client has no nodes: pass es_url= instead")
    config = nodes[0].config
    for name in ("ssl_context", "client_cert", "client_key"):
        if getattr(config, name, None) is not None:
            raise ConfigurationError(
                f"the Elasticsearch client's {name} cannot be carried over: pass es_url= and "
                "settings=SearchSettings(ca_certs=..., ssl_assert_fingerprint=...) instead"
            )
    headers = {k.lower(): v for k, v in dict(getattr(es, "_headers", {}) or {}).items()}
    for node in nodes:
        headers = {**{k.lower(): v for k, v in dict(node.config.headers or {}).items()}, **headers}
    extra = sorted(set(headers) - _OWN_HEADERS)
    if extra:
        raise ConfigurationError(f"the Elasticsearch client's headers {extra} cannot be carried over: leave them out")
    connection: dict[str, Any] = {"url": ",".join(str(n.base_url) for n in nodes)}
    connection.update(_credentials(headers.get("authorization")))
    connection["verify_certs"] = bool(config.verify_certs)
    if config.ca_certs:
        connection["ca_certs"] = str(config.ca_certs)
    if config.ssl_assert_fingerprint:
        connection["ssl_assert_fingerprint"] = str(config.ssl_assert_fingerprint)
    return connection


def store_connection(
    *,
    url: str | None,
    cloud_id: str | None,
    username: str | None,
    password: str | None,
    api_key: str | None,
    es: Any = None,
    alone: str = "client=",
) -> dict[str, Any]:
    """The connection a store opens: the peer's ``es_url`` / ``es_cloud_id`` / credentials as our settings'
    names, or — ``es``, an elasticsearch-py client passed as ``alone`` — that client's nodes and credentials
    (:func:`connection_of`); both at once is a :class:`ConfigurationError`."""
    given = {"url": url, "cloud_id": cloud_id, "username": username, "password": password, "api_key": api_key}
    if es is None:
        return given
    if any(given.values()):
        raise ConfigurationError(f"pass {alone} alone, not with es_url / credentials")
    return connection_of(es)


def _name(value: Any) -> str:
    """An enum's value or a string, upper-cased (``DistanceStrategy.COSINE`` and ``"cosine"`` alike)."""
    return str(getattr(value, "value", value)).upper()


#: The peers' constructor arguments this store cannot honour, and what to do instead.
REFUSED = {
    "num_dimensions": "the index takes its dimensions from the embedding model: leave num_dimensions out",
    "metadata_mappings": "metadata keys are mapped as they come (a keyword, with num and date sub-fields): "
    "leave metadata_mappings out",
    "custom_index_settings": "the index settings are this library's (analyzer, shards and replicas: "
    "settings=SearchSettings(number_of_shards=..., number_of_replicas=...))",
    "es_params": "pass connection options in settings=SearchSettings(...) (request_timeout_s, ca_certs, ...)",
    "es_connection": "pass client= (an Elasticsearch client) or es_url=",
}


def peer_arguments(given: dict[str, Any], *, fields: Mapping[str, str]) -> dict[str, Any]:
    """Take the peer's constructor arguments out of ``given`` (what is left: search options). ``fields``: the
    peer's field-name arguments and their defaults — the defaults are accepted (this index has the same roles
    under its own names), another name is refused. ``distance_strategy`` COSINE is ours; ``batch_size`` is our
    bulk chunk size. Returns the settings they map to."""
    mapped: dict[str, Any] = {}
    for name, reason in REFUSED.items():
        if given.pop(name, None) is not None:
            raise ConfigurationError(f"{name}= is not taken here: {reason}")
    for name, default in fields.items():
        value = given.pop(name, None)
        if value is not None and value != default:
            raise ConfigurationError(
                f"{name}={value!r}: this index has its own layout (text, vector and metadata fields); to move an "
                "index the Elasticsearch store wrote, use the store's import_index(index, text_field=...)"
            )
    distance = given.pop("distance_strategy", None)
    if distance is not None and _name(distance) != "COSINE":
        raise ConfigurationError(
            f"distance_strategy={_name(distance)}: this index compares vectors by cosine similarity (COSINE)"
        )
    given.pop("user_agent", None)  # (ours names this library; nothing a search depends on)
    batch_size = given.pop("batch_size", None)
    if batch_size is not None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigurationError(f"batch_size must be a whole number above 0, got {batch_size!r}")
        mapped["bulk_chunk_size"] = batch_size
    return mapped


def api_key_of(api_key: Any, api_key_id: Any) -> str | None:
    """Haystack's ``api_key`` and ``api_key_id`` (each a ``Secret``, a string or None) as one API key: both
    given, the encoded ``id:key`` Elasticsearch takes; the key alone, as it is (already encoded)."""
    key, key_id = (v.resolve_value() if hasattr(v, "resolve_value") else v for v in (api_key, api_key_id))
    if key_id and not key:
        raise ConfigurationError("api_key_id is given but api_key is missing")
    if key and key_id:
        return base64.b64encode(f"{key_id}:{key}".encode()).decode()
    return str(key) if key else None


#: A per-call ``refresh`` as the peers take it (None: the store's own setting).
Refresh = bool | Literal["wait_for"] | None


def refresh_of(refresh: Any) -> bool | None:
    """A peer's per-call ``refresh`` (``True``, ``False``, ``"wait_for"``) as ours: visible to reads when the
    call returns, or not (None: the store's own setting)."""
    if refresh is None or isinstance(refresh, bool):
        return refresh
    if refresh == "wait_for":
        return True
    raise ConfigurationError(f"refresh must be True, False or 'wait_for', got {refresh!r}")


#: ElasticsearchDocumentStore's arguments this store cannot honour, and what to do instead.
_HAYSTACK_REFUSED = {
    "custom_mapping": "the index mapping is this library's (text, passages, vector, metadata.<key>)",
    "sparse_vector_field": "sparse vectors are not supported: this store searches BM25 and its dense vectors",
    "ingest_pipeline": "documents are embedded by the store's embedder, not by an ingest pipeline",
    "headers": "pass credentials as api_key= (or the ES_* environment); other headers are not sent",
}


def haystack_arguments(given: dict[str, Any]) -> dict[str, Any]:
    """ElasticsearchDocumentStore's other arguments (its own and the Elasticsearch client's keyword
    arguments) as our connection settings, or refused by name with what to pass instead."""
    for name, reason in _HAYSTACK_REFUSED.items():
        if given.pop(name, None) is not None:
            raise ConfigurationError(f"{name}= is not taken here: {reason}")
    similarity = given.pop("embedding_similarity_function", None)
    if similarity is not None and similarity != "cosine":
        raise ConfigurationError(
            f"embedding_similarity_function={similarity!r}: this index compares vectors by cosine similarity"
        )
    mapped: dict[str, Any] = {}
    if "basic_auth" in given:
        username, password = given.pop("basic_auth")
        mapped.update(username=username, password=password)
    for theirs, ours in (
        ("verify_certs", "verify_certs"),
        ("ca_certs", "ca_certs"),
        ("request_timeout", "request_timeout_s"),
    ):
        if theirs in given:
            mapped[ours] = given.pop(theirs)
    if given:
        raise ConfigurationError(
            f"unknown argument(s) {sorted(given)}: pass connection options in settings=SearchSettings(...)"
        )
    return mapped
