"""Facets over a search's matches: what a caller may ask for, the aggregations that compute it, and the
answer read back. Pure: no I/O (the request is sent by ``storage._search.facets``).

What "matched" means for each mode — the **match set** the counts are over:

- ``bm25``: every document the BM25 query matches (within the filters and the tenant);
- ``knn``: the kNN leg's candidate window (its ``window`` nearest documents within the filters);
- ``hybrid``: the union of the two (Elasticsearch computes aggregations of a request holding both a
  ``query`` and a ``knn`` section over exactly that union).

A facet request is its own request, sent alongside the legs (never after them), so it never changes the
hits. Its syntax, for the CLI and the agent tool (a :class:`FacetSpec` in Python):

=================================  ===========================================================
``ticker`` / ``ticker:25``          terms (the 10, or 25, most frequent values; at most 100)
``published_at:month``             date histogram (``year``, ``quarter``, ``month``, ``week``, ``day``)
``published_at:2024-01-01..2024-07-01,2024-07-01..``   date ranges (``from..to``; either end open)
``metadata.region``                terms on a metadata key (keywords)
``metadata.score:0..10,10..``      numeric ranges on a metadata key mapped as a number
=================================  ===========================================================
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .._errors import InvalidQuery
from .._types.models import is_metadata_field

__all__ = [
    "FACET_FIELDS",
    "FacetKind",
    "FacetSpec",
    "facet_aggregations",
    "parse_facets",
    "read_facets",
]

FacetKind = Literal["terms", "date_histogram", "range"]
#: The fields a facet may count, besides ``metadata.<key>``.
FACET_FIELDS: tuple[str, ...] = ("ticker", "doc_type", "source", "published_at")
_TERMS_FIELDS = ("ticker", "doc_type", "source")
_INTERVALS = ("year", "quarter", "month", "week", "day")
#: Bucket caps: a facet's cost is bounded whatever is asked.
MAX_TERMS = 100
MAX_FACETS = 10
MAX_RANGES = 20


@dataclass(frozen=True, slots=True)
class FacetSpec:
    """One facet: counts of ``field`` over the match set, as ``kind`` buckets."""

    field: str
    kind: FacetKind = "terms"
    #: Terms: how many of the most frequent values.
    size: int = 10
    #: Date histogram: the calendar interval.
    interval: str = "month"
    #: Ranges: ``(from, to)`` pairs, either end None (open); dates as ``YYYY-MM-DD``, or numbers.
    ranges: tuple[tuple[str | float | None, str | float | None], ...] = ()

    @property
    def name(self) -> str:
        """The facet's key in the response (the field: one facet per field)."""
        return self.field


def parse_facets(items: Iterable[str | FacetSpec] | None, metadata_types: Mapping[str, str]) -> tuple[FacetSpec, ...]:
    """The facets asked for, validated: :class:`InvalidQuery` names the bad one. ``metadata_types``: the
    mapped type of each ``metadata.<key>`` the index holds (a key not there is unmapped)."""
    if items is None:
        return ()
    if isinstance(items, str | FacetSpec):
        items = [items]
    specs = [item if isinstance(item, FacetSpec) else _parse(item) for item in items]
    if len(specs) > MAX_FACETS:
        raise InvalidQuery(f"at most {MAX_FACETS} facets per search, got {len(specs)}")
    seen: set[str] = set()
    for spec in specs:
        _check(spec, metadata_types)
        if spec.field in seen:
            raise InvalidQuery(f"facet {spec.field!r} asked twice: one facet per field")
        seen.add(spec.field)
    return tuple(specs)


def _parse(text: str) -> FacetSpec:
    field, _, arg = str(text).strip().partition(":")
    field, arg = field.strip(), arg.strip()
    if not field:
        raise InvalidQuery("a facet needs a field: ticker, doc_type, source, published_at or metadata.<key>")
    if field == "published_at":
        if not arg:
            return FacetSpec(field, "date_histogram")
        if arg in _INTERVALS:
            return FacetSpec(field, "date_histogram", interval=arg)
        if ".." not in arg:
            raise InvalidQuery(
                f"facet {text!r}: give an interval ({', '.join(_INTERVALS)}) or date ranges (from..to, ...)"
            )
        return FacetSpec(field, "range", ranges=_ranges(field, arg, number=False))
    if arg and ".." in arg:
        return FacetSpec(field, "range", ranges=_ranges(field, arg, number=True))
    if arg:
        if not arg.isdigit():
            raise InvalidQuery(f"facet {text!r}: after ':' give how many values (e.g. {field}:20) or ranges")
        return FacetSpec(field, "terms", size=int(arg))
    return FacetSpec(field)


def _ranges(field: str, arg: str, *, number: bool) -> tuple[tuple[str | float | None, str | float | None], ...]:
    out: list[tuple[str | float | None, str | float | None]] = []
    for part in arg.split(","):
        low, sep, high = part.strip().partition("..")
        if not sep:
            raise InvalidQuery(f"facet {field}: ranges are from..to (either end open), separated by commas")
        out.append((_bound(field, low, number), _bound(field, high, number)))
    return tuple(out)


def _bound(field: str, text: str, number: bool) -> str | float | None:
    text = text.strip()
    if not text:
        return None
    if number:
        try:
            return float(text)
        except ValueError:
            raise InvalidQuery(f"facet {field}: range bound {text!r} is not a number") from None
    if not re.fullmatch(r"\d{4}(-\d{2}(-\d{2})?)?", text):
        raise InvalidQuery(f"facet {field}: range bound {text!r} is not a date (YYYY, YYYY-MM or YYYY-MM-DD)")
    return text


def _check(spec: FacetSpec, metadata_types: Mapping[str, str]) -> None:
    field = spec.field
    if spec.kind not in ("terms", "date_histogram", "range"):
        raise InvalidQuery(f"facet {field}: kind must be terms, date_histogram or range, got {spec.kind!r}")
    if field.startswith("metadata."):
        key = field.removeprefix("metadata.")
        if not is_metadata_field(field):
            raise InvalidQuery(f"facet {field!r}: a metadata key is letters, digits, '_' and '-'")
        mapped = metadata_types.get(key)
        if mapped is None:
            raise InvalidQuery(f"facet {field!r}: no document has metadata key {key!r} (the field is unmapped)")
        numeric = mapped in ("long", "integer", "short", "byte", "double", "float", "half_float", "scaled_float")
        if spec.kind == "range" and not numeric:
            raise InvalidQuery(f"facet {field!r}: ranges need a number, and it is mapped as {mapped}")
        if spec.kind == "date_histogram" or (spec.kind == "terms" and not (numeric or mapped == "keyword")):
            raise InvalidQuery(f"facet {field!r}: a {spec.kind} facet cannot count a {mapped} field")
    elif field == "published_at":
        if spec.kind == "terms":
            raise InvalidQuery("facet published_at: a date is counted by interval (published_at:month) or ranges")
    elif field in _TERMS_FIELDS:
        if spec.kind != "terms":
            raise InvalidQuery(f"facet {field}: a keyword is counted by value ({field} or {field}:20)")
    elif field in ("title", "text"):
        raise InvalidQuery(f"facet {field!r}: full text cannot be counted; facet on {', '.join(FACET_FIELDS)}")
    else:
        raise InvalidQuery(f"facet {field!r}: unknown field; use {', '.join(FACET_FIELDS)} or metadata.<key>")
    if spec.kind == "terms" and not 1 <= spec.size <= MAX_TERMS:
        raise InvalidQuery(f"facet {field}: between 1 and {MAX_TERMS} values")
    if spec.kind == "date_histogram" and spec.interval not in _INTERVALS:
        raise InvalidQuery(f"facet {field}: interval must be one of {', '.join(_INTERVALS)}")
    if spec.kind == "range" and not 1 <= len(spec.ranges) <= MAX_RANGES:
        raise InvalidQuery(f"facet {field}: between 1 and {MAX_RANGES} ranges")


def facet_aggregations(specs: Sequence[FacetSpec]) -> dict[str, Any]:
    """The ``aggs`` section computing ``specs`` (each capped: terms at ``size``, a histogram's empty
    buckets left out, ranges as given)."""
    aggs: dict[str, Any] = {}
    for spec in specs:
        if spec.kind == "terms":
            aggs[spec.name] = {"terms": {"field": spec.field, "size": spec.size}}
        elif spec.kind == "date_histogram":
            aggs[spec.name] = {
                "date_histogram": {
                    "field": spec.field,
                    "calendar_interval": spec.interval,
                    "min_doc_count": 1,
                    "format": "yyyy-MM-dd",
                }
            }
        else:
            ranges = [{k: v for k, v in (("from", low), ("to", high)) if v is not None} for low, high in spec.ranges]
            kind = "date_range" if spec.field == "published_at" else "range"
            body: dict[str, Any] = {"field": spec.field, "ranges": ranges}
            if kind == "date_range":
                body["format"] = "yyyy-MM-dd||yyyy-MM||yyyy"
            aggs[spec.name] = {kind: body}
    return aggs


def read_facets(aggregations: Mapping[str, Any], specs: Sequence[FacetSpec]) -> dict[str, list[tuple[str, int]]]:
    """Each facet's buckets from a response's ``aggregations``: ``(value, count)``, in Elasticsearch's order
    (terms: most frequent first; histograms and ranges: in order)."""
    out: dict[str, list[tuple[str, int]]] = {}
    for spec in specs:
        raw = aggregations.get(spec.name, {})
        buckets: list[tuple[str, int]] = []
        for bucket in raw.get("buckets", []):
            if spec.kind == "date_histogram":
                value = str(bucket.get("key_as_string", bucket.get("key")))
            elif spec.kind == "range":
                value = str(bucket.get("key"))
            else:
                value = str(bucket.get("key_as_string", bucket.get("key")))
            buckets.append((value, int(bucket.get("doc_count", 0))))
        out[spec.name] = buckets
    return out
