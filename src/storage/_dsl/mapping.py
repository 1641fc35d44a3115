"""The index design: a strict mapping, versioned concrete indices behind an alias, the names a request may
target, and what an index records about itself (``_meta``). Pure."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .._errors import ConfigurationError, InvalidQuery
from ..passages import PassageSetting

__all__ = [
    "BUILDING",
    "CONTENT_HASH",
    "DEFINED_ANALYZERS",
    "DYNAMIC_TEMPLATES",
    "INDEX_VERSION_WIDTH",
    "METADATA_VALUE",
    "NESTED_LIMIT",
    "PASSAGE_AGREEMENT",
    "PASSAGE_TEXT_OPTIONS",
    "PAYLOAD",
    "building_versions",
    "carried_settings",
    "index_body",
    "index_meta",
    "is_version_of",
    "next_index_name",
    "stored_passages",
    "valid_target",
    "vector_index_for",
    "versioned_index_name",
    "write_index_of",
]

INDEX_VERSION_WIDTH = 6
#: A digest of each document's stored content (``_models.content_hash``): read as a doc value to skip
#: documents indexed again unchanged; added to indices made before it (a new field is always accepted).
CONTENT_HASH: dict[str, Any] = {"type": "keyword", "index": False}
#: A document's payload (``Document.payload``): kept in ``_source`` exactly as given, never indexed.
PAYLOAD: dict[str, Any] = {"type": "object", "enabled": False}
#: Each ``metadata.<key>`` value: a keyword (terms, facets), with a ``num`` and a ``date`` sub-field holding it
#: as a number / a date where it parses as one (else left out of that sub-field, never an error): what a filter
#: with a numeric or date value compares (``storage._dsl.filters``). Dates: ISO-8601 only, so that a number is
#: never read as epoch milliseconds.
METADATA_VALUE: dict[str, Any] = {
    "type": "keyword",
    "ignore_above": 1024,
    "fields": {
        "num": {"type": "double", "ignore_malformed": True},
        "date": {"type": "date", "format": "strict_date_optional_time", "ignore_malformed": True},
    },
}
DYNAMIC_TEMPLATES: list[dict[str, Any]] = [
    {"metadata_keywords": {"path_match": "metadata.*", "mapping": METADATA_VALUE}}
]
#: 1: one vector per document (``embedding``); 2: with passages (``passages``: offsets and a vector each);
#: 3: each passage's title and text indexed too (not stored: BM25 reads the passages); 4: every document's
#: head vector indexed flat (``embedding``) and only a document longer than the model's window has passages
#: (a short document costs what it costs without passages); 1 -> 2 and 4 -> 5: vectors left out of
#: ``_source`` on servers that give them back from doc values (:func:`vectors_in_source_for`; an index of an
#: earlier version, or built on an older server, keeps them there and is read from there); 6: each long
#: document's ``passage_agreement`` (a doc value: how a search reads the index's long documents); 7: the
#: passages' text indexed without positions (``PASSAGE_TEXT_OPTIONS``).
MAPPING_VERSION = 2
PASSAGES_MAPPING_VERSION = 7
#: How a passage's text is indexed: its words and their counts, no positions (a phrase is matched in the whole
#: text, ``storage._dsl.queries``). Positions were 45 % of the passages' text index (SciFact: 319 of 705 KB,
#: docs/benchmarks.md), searched only by a quoted phrase.
PASSAGE_TEXT_OPTIONS = "freqs"
#: Elasticsearch's default ``index.mapping.nested_objects.limit``: the most nested objects (here: a long
#: document's passages, its head's included) one document may hold; the server refuses a document with more.
NESTED_LIMIT = 10_000
#: How far a long document's passages agree with its head (``storage.passages.agreement``): a doc value the
#: search reads the median of, never searched.
PASSAGE_AGREEMENT: dict[str, Any] = {"type": "half_float", "index": False}
#: ``_meta.reembed.state`` of a version a reembed is building (``complete`` once it is checked and aliased).
BUILDING = "building"


#: Analyzers this library defines in each index's own settings (``ES_ANALYZER`` names one, or any analyzer
#: the server has). ``english_folded`` (the default) is Elasticsearch's ``english`` analyzer — possessives,
#: lowercase, English stopwords, Porter stemming — with accents folded after lowercasing, so "cafe naive
#: resume" matches "Café naïve résumé" and "Nestle" matches "Nestlé" (and the other way round). Its filters
#: exist in every full distribution (analysis-common) and in the local launcher's analysis plugin; on text
#: without accents it gives the same tokens as ``english``.
DEFINED_ANALYZERS: dict[str, dict[str, Any]] = {
    "english_folded": {
        "filter": {
            "english_folded_possessive": {"type": "stemmer", "language": "possessive_english"},
            "english_folded_stop": {"type": "stop", "stopwords": "_english_"},
            "english_folded_stemmer": {"type": "stemmer", "language": "english"},
        },
        "analyzer": {
            "english_folded": {
                "type": "custom",
                "tokenizer": "standard",
                "filter": [
                    "english_folded_possessive",
                    "lowercase",
                    "asciifolding",
                    "english_folded_stop",
                    "english_folded_stemmer",
                ],
            }
        },
    }
}

_INDEX_NAME = re.compile(r"^[a-z0-9][a-z0-9_.\-]{0,254}$")


def valid_target(index: str) -> str:
    """Explicit names only (comma-separated): no wildcards, ``_all``, exclusions or remote clusters; never empty
    (``None`` is the client's own alias: an empty name, an unset variable's, is not read as it)."""
    if not isinstance(index, str) or not index.strip():
        raise InvalidQuery(f"index must name an index or alias (None: the client's own), got {index!r}")
    names = index.split(",")
    bad = [n for n in names if not _INDEX_NAME.match(n)]
    if bad:
        raise InvalidQuery(f"invalid index name(s) {bad}: lowercase letters, digits, '.', '_', '-'; no wildcards")
    return index


def write_index_of(alias: str, indices: Mapping[str, Any]) -> str:
    """The index an alias writes to, among the ``indices`` it points at (``GET <alias>``'s answer)."""
    for name, info in indices.items():
        if name == alias or info.get("aliases", {}).get(alias, {}).get("is_write_index") or len(indices) == 1:
            return name
    raise ConfigurationError(f"alias {alias!r} points at several indices and none is the write index")


def index_meta(mappings: Any, index: str) -> dict[str, Any]:
    """``index``'s ``_meta`` in a get-mapping (or get-index) answer (the first index's when ``index`` is not a
    key: an alias), or {} for anything else (a proxy's page, a stub's answer)."""
    if not isinstance(mappings, Mapping) or not mappings:
        return {}
    found = mappings.get(index, next(iter(mappings.values())))
    mapping = found.get("mappings") if isinstance(found, Mapping) else None
    meta = mapping.get("_meta") if isinstance(mapping, Mapping) else None
    return dict(meta) if isinstance(meta, Mapping) else {}


def versioned_index_name(alias: str, version: int) -> str:
    return f"{alias}-{version:0{INDEX_VERSION_WIDTH}d}"


def _version_pattern(alias: str) -> re.Pattern[str]:
    return re.compile(rf"^{re.escape(alias)}-(\d{{{INDEX_VERSION_WIDTH}}})$")


def is_version_of(alias: str, name: str) -> bool:
    """Whether ``name`` is a versioned index of ``alias`` (``<alias>-NNNNNN``)."""
    return _version_pattern(alias).match(name) is not None


def next_index_name(alias: str, existing: list[str]) -> str:
    pattern = _version_pattern(alias)
    versions = [int(m.group(1)) for name in existing if (m := pattern.match(name))]
    return versioned_index_name(alias, max(versions, default=0) + 1)


def vector_index_for(server: tuple[int, int] | None) -> str:
    """The HNSW variant new indices get on a server of ``server`` (major, minor): ``int8_hnsw`` (vectors
    quantized to a byte per dimension, a quarter of the memory) from 8.14, where Elasticsearch made it the
    default; plain ``hnsw`` (floats) on 8.12-8.13, whose int8 quantization misranks vectors with many zero
    dimensions (seen on 8.12.2: a one-word match scored below unrelated documents). Unknown: ``int8_hnsw``."""
    return "hnsw" if server is not None and server < (8, 14) else "int8_hnsw"


def vectors_in_source_for(server: tuple[int, int] | None) -> bool:
    """Whether new indices on a server of ``server`` (major, minor) keep their vectors in ``_source`` too:
    only before 8.17, which cannot give a ``dense_vector`` back from its doc values (``docvalue_fields``
    refuses it), so what reads vectors (the diversity stage) must find them there. From 8.17 they are left
    out (Elasticsearch's default from 9.2): stored as JSON text they were three quarters of a head-only
    index's bytes. Unknown: left out."""
    return server is not None and server < (8, 17)


def vectors_in_source(info: Any) -> bool:
    """Whether an index (its get-mapping or get-index entry) keeps its head vectors in ``_source``."""
    mappings = info.get("mappings", {}) if isinstance(info, Mapping) else {}
    source = mappings.get("_source", {}) if isinstance(mappings, Mapping) else {}
    return "embedding" not in (source.get("excludes") or ()) if isinstance(source, Mapping) else True


def index_body(
    *,
    vector_index: str = "int8_hnsw",
    dimensions: int,
    normalized: bool,
    model_id: str,
    analyzer: str,
    shards: int = 1,
    replicas: int | None = None,
    passages: PassageSetting | None = None,
    vectors_in_source: bool = False,
) -> dict[str, Any]:
    """Settings and mappings for one concrete index.

    - ``dynamic: strict``: a field we did not design is an error, not a silent new mapping;
      ``metadata.*`` is the one open place, and only as keywords (with a number and a date sub-field each:
      ``METADATA_VALUE``).
    - ``embedding`` (the head: what the model reads of title + text): ``dot_product`` for unit vectors (same
      ranking as cosine, cheaper), else ``cosine``; HNSW with int8 quantisation (the default from 8.14,
      written out so 9.x's ``bbq_hnsw`` default does not change behaviour between server versions; plain
      ``hnsw`` on 8.12-8.13: :func:`vector_index_for`).
    - with ``passages``: every document's head vector is indexed flat in ``embedding``, as without passages:
      a document that fits the model's window is stored and searched exactly as in an index without them.
      Only a document longer than the window gets a nested ``passages`` field (``start``, ``end``: offsets in
      the text; ``vector``; the head's first, without a vector: ``embedding`` is its vector, indexed once): the
      kNN leg scores a document by the better of its head and its best passage
      (``storage._dsl.queries.knn_request``). Each passage's text is indexed too, for its words (no positions:
      ``PASSAGE_TEXT_OPTIONS``; BM25 scores a long document by the better of its whole text and its best
      passage: ``bm25_request``). Each long document's ``passage_agreement`` decides how: where the index's
      long documents agree with their heads (the median at least ``storage.passages.AGREEMENT_THRESHOLD``)
      they are read head first.
    - Vectors (the head's and the passages') and passage texts are left out of ``_source`` (the offsets
      stay): stored as JSON, vectors were three quarters of a head-only index's bytes, and a long document's
      passage vectors made its ``_source`` ten times larger and every fetch of it slower. The head vector
      stays in ``_source`` only with ``vectors_in_source`` (servers before 8.17: :func:`vectors_in_source_for`).
      (A filtered
      ``_source`` makes Elasticsearch keep a whole copy of each document written, ``_recovery_source``,
      until its peer-recovery retention lease has moved past it and the segment holding it is merged: a
      fresh index is larger for a while, with or without passages in it.) Indices built before (version
      2-3: every document nested, the head included, ``embedding`` not indexed) are still searched as they
      were, until ``reembed()``.
    - ``_meta`` records the model, dims and passage setting so a mismatch is caught at start-up.
    """
    text_field = {"type": "text", "analyzer": analyzer}
    similarity = "dot_product" if normalized else "cosine"
    vector = {
        "type": "dense_vector",
        "dims": dimensions,
        "index": True,
        "similarity": similarity,
        "index_options": {"type": vector_index, "m": 16, "ef_construction": 100},
    }
    embedding_meta: dict[str, Any] = {"model_id": model_id, "dimensions": dimensions, "normalized": normalized}
    properties: dict[str, Any] = {
        "title": text_field,
        "text": text_field,
        "ticker": {"type": "keyword"},
        "doc_type": {"type": "keyword"},
        "source": {"type": "keyword"},
        "tenant_id": {"type": "keyword"},
        "published_at": {"type": "date"},
        "metadata": {"type": "object", "dynamic": True},
        "content_hash": CONTENT_HASH,
        "payload": PAYLOAD,
        "embedding": vector,
    }
    excludes = [] if vectors_in_source else ["embedding"]
    mappings: dict[str, Any] = {"dynamic": "strict"}
    if passages is not None:
        embedding_meta["passages"] = passages.to_meta()
        properties["passages"] = {
            "type": "nested",
            "properties": {
                "start": {"type": "integer", "index": False},
                "end": {"type": "integer", "index": False},
                "vector": vector,
                "text": {**text_field, "index_options": PASSAGE_TEXT_OPTIONS},
            },
        }
        properties["passage_agreement"] = PASSAGE_AGREEMENT
        excludes += ["passages.vector", "passages.text"]
    if excludes:
        mappings["_source"] = {"excludes": excludes}
    analysis = DEFINED_ANALYZERS.get(analyzer)
    return {
        "settings": {
            **({"analysis": analysis} if analysis else {}),
            "index": {
                "number_of_shards": shards,
                # Default: one replica as soon as a second node exists (a node loss loses no data), none
                # on a single node (where it could never be allocated and the index would stay yellow).
                **({"auto_expand_replicas": "0-1"} if replicas is None else {"number_of_replicas": replicas}),
                "refresh_interval": "1s",
            },
        },
        "mappings": {
            **mappings,
            "_meta": {
                "mapping_version": MAPPING_VERSION if passages is None else PASSAGES_MAPPING_VERSION,
                "embedding": embedding_meta,
            },
            "dynamic_templates": DYNAMIC_TEMPLATES,
            "properties": properties,
        },
    }


#: The index settings (under ``index.``) a new version of an index takes over from the one it follows
#: (``create_version()``, ``reembed()``): the limits an operator raises on a live index for what it holds (more
#: metadata keys, a document with more passages, a longer text to highlight, deeper paging). A document the live
#: index took is taken by the next, and it is searched alike. Shards and replicas come from the settings.
CARRIED_SETTINGS: tuple[tuple[str, ...], ...] = (
    ("mapping", "total_fields", "limit"),
    ("mapping", "total_fields", "ignore_dynamic_beyond_limit"),
    ("mapping", "nested_objects", "limit"),
    ("mapping", "nested_fields", "limit"),
    ("mapping", "depth", "limit"),
    ("mapping", "field_name_length", "limit"),
    ("highlight", "max_analyzed_offset"),
    ("max_result_window",),
)


def carried_settings(info: Any) -> dict[str, Any]:
    """The :data:`CARRIED_SETTINGS` an index sets (its get-index entry ``info``), as dotted ``index.`` keys."""
    out: dict[str, Any] = {}
    for path in CARRIED_SETTINGS:
        value: Any = info.get("settings", {}).get("index", {}) if isinstance(info, Mapping) else None
        for key in path:
            value = value.get(key) if isinstance(value, Mapping) else None
        if value is not None and not isinstance(value, Mapping):
            out[".".join(path)] = value
    return out


def stored_passages(embedding_meta: Mapping[str, Any] | None) -> PassageSetting | None:
    """The passage setting an index recorded (``_meta.embedding.passages``), None for an index without."""
    raw = (embedding_meta or {}).get("passages")
    if not isinstance(raw, Mapping):
        return None
    try:
        return PassageSetting.from_meta(raw)
    except ValueError:
        return None


def building_versions(versions: dict[str, Any]) -> list[str]:
    """The versions an interrupted (or running) reembed left: ``_meta.reembed.state == "building"``."""
    return sorted(
        name
        for name, info in versions.items()
        if info.get("mappings", {}).get("_meta", {}).get("reembed", {}).get("state") == BUILDING
    )
