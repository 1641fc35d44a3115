"""One typed filter model, rendered identically for both legs (``bool.filter`` and ``knn.filter``).

Filters are given as a mapping ``{field: condition}`` (all conditions must hold) or as a list of
:class:`Filter` objects. Conditions:

=================================  ==========================================================
``"AAPL"`` / ``3`` / ``True``      term: the field equals the value
``["AAPL", "MSFT"]``               terms: the field equals one of the values
``{"gte": ..., "lt": ...}``        range (``gt``, ``gte``, ``lt``, ``lte``) on dates or numbers
``{"exists": True|False}``         the field is present / absent
=================================  ==========================================================

Fields: ``ticker``, ``doc_type``, ``source``, ``tenant_id``, ``id``, ``published_at`` (dates only) and
``metadata.<key>``. Anything else is an :class:`InvalidQuery` before any request is sent.

The list form also takes three combinators of filters: :class:`AllOf` (every one holds), :class:`AnyOf` (at
least one holds; none given: nothing matches) and :class:`Not` (not all of them hold), nested as deep as
needed — what a framework's ``!=``, ``not in``, ``NOT`` and ``OR`` across fields become (``storage.
integrations._dialects``).

A ``metadata.<key>`` value is a keyword, and is compared **by the type of the value a filter gives**: a
string as a keyword (equality; a range is lexical), a number as a number (``2 < 10``, ``2 == 2.0``), a
``date`` / ``datetime`` as a date. The numeric and date comparisons read the keyword's ``num`` and ``date``
sub-fields, which an index built by this version has for every metadata value that parses as one
(``storage._dsl.mapping``); on an older index they match nothing until ``reembed()``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from .._errors import InvalidQuery
from .._types.models import is_metadata_field, lone_surrogate

__all__ = [
    "AllOf",
    "AnyOf",
    "Exists",
    "Filter",
    "FilterInput",
    "Not",
    "Range",
    "Term",
    "Terms",
    "condition",
    "filter_fields",
    "parse_filters",
    "to_es_filters",
]

KEYWORD_FIELDS = frozenset({"ticker", "doc_type", "source", "tenant_id", "id"})
DATE_FIELDS = frozenset({"published_at"})
_RANGE_KEYS = frozenset({"gt", "gte", "lt", "lte"})
MAX_TERMS = 1024

Scalar = str | int | float | bool
RangeValue = str | int | float | date | datetime


@dataclass(frozen=True, slots=True)
class Term:
    field: str
    value: Scalar


@dataclass(frozen=True, slots=True)
class Terms:
    field: str
    values: tuple[Scalar, ...]


@dataclass(frozen=True, slots=True)
class Range:
    field: str
    gt: RangeValue | None = None
    gte: RangeValue | None = None
    lt: RangeValue | None = None
    lte: RangeValue | None = None


@dataclass(frozen=True, slots=True)
class Exists:
    field: str
    present: bool = True


@dataclass(frozen=True, slots=True)
class AllOf:
    """Every one of ``filters`` holds (none given: everything matches)."""

    filters: tuple[Filter, ...]


@dataclass(frozen=True, slots=True)
class AnyOf:
    """At least one of ``filters`` holds (none given: nothing matches)."""

    filters: tuple[Filter, ...]


@dataclass(frozen=True, slots=True)
class Not:
    """Not all of ``filters`` hold (one given: it does not hold)."""

    filters: tuple[Filter, ...]


Leaf = Term | Terms | Range | Exists
Filter = Term | Terms | Range | Exists | AllOf | AnyOf | Not
_COMBINATORS = (AllOf, AnyOf, Not)
FilterInput = Mapping[str, Any] | Sequence[Filter] | None


def _check_field(field: str) -> None:
    if field in KEYWORD_FIELDS or field in DATE_FIELDS or is_metadata_field(field):
        return
    allowed = ", ".join(sorted(KEYWORD_FIELDS | DATE_FIELDS)) + ", metadata.<key>"
    raise InvalidQuery(f"unknown filter field {field!r}; filterable fields: {allowed}")


def _unicode(field: str, value: object) -> None:
    if lone_surrogate(value):
        raise InvalidQuery(f"filter {field!r}: {value!r} is not valid Unicode text (it holds a lone surrogate)")


def _scalar(field: str, value: object) -> Scalar:
    if isinstance(value, str | bool | int | float) and not (isinstance(value, float) and value != value):
        if field == "published_at" and isinstance(value, bool):
            raise InvalidQuery(f"filter {field!r}: expected a date, got {value!r}")
        _unicode(field, value)
        return value
    raise InvalidQuery(f"filter {field!r}: expected a string, number or boolean, got {type(value).__name__}")


def _range_value(field: str, key: str, value: object) -> RangeValue:
    if isinstance(value, datetime | date):
        return value
    if field in DATE_FIELDS:
        if not isinstance(value, str):
            raise InvalidQuery(f"filter {field!r}.{key}: expected an ISO date, got {value!r}")
        try:
            (datetime if "T" in value else date).fromisoformat(value)
        except ValueError:
            raise InvalidQuery(f"filter {field!r}.{key}: {value!r} is not an ISO-8601 date") from None
        return value
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        _unicode(field, value)
        return value
    raise InvalidQuery(f"filter {field!r}.{key}: expected a number or string, got {value!r}")


def condition(field: str, given: object) -> Leaf:
    """One field's condition in the mapping form (see the module docstring), validated."""
    _check_field(field)
    if isinstance(given, Mapping):
        keys = set(given)
        if keys == {"exists"}:
            if not isinstance(given["exists"], bool):
                raise InvalidQuery(f"filter {field!r}: exists must be true or false")
            return Exists(field, given["exists"])
        if not keys or not keys <= _RANGE_KEYS:
            raise InvalidQuery(
                f"filter {field!r}: a mapping must be a range (gt, gte, lt, lte) or {{'exists': bool}}, "
                f"got keys {sorted(map(str, keys))}"
            )
        bounds = {k: _range_value(field, k, v) for k, v in given.items()}
        if ("gt" in bounds and "gte" in bounds) or ("lt" in bounds and "lte" in bounds):
            raise InvalidQuery(f"filter {field!r}: give one lower and one upper bound at most")
        return Range(field, **bounds)
    if isinstance(given, list | tuple | set | frozenset):
        values = tuple(_scalar(field, v) for v in given)
        if not values:
            raise InvalidQuery(f"filter {field!r}: an empty list matches nothing; omit the filter instead")
        if len(values) > MAX_TERMS:
            raise InvalidQuery(f"filter {field!r}: at most {MAX_TERMS} values")
        return Terms(field, values)
    if field in DATE_FIELDS:
        value = _range_value(field, "eq", given)
        return Range(field, gte=value, lte=value)
    return Term(field, _scalar(field, given))


def parse_filters(filters: FilterInput) -> list[Filter]:
    """Validate caller filters; raises :class:`InvalidQuery` on anything unknown or malformed."""
    if filters is None:
        return []
    if isinstance(filters, Mapping):
        return [condition(str(field), value) for field, value in filters.items()]
    if isinstance(filters, str | bytes) or not isinstance(filters, Iterable):
        raise InvalidQuery(f"filters must be a mapping or a list of Filter objects, not {type(filters).__name__}")
    out = list(filters)
    for f in out:
        _check_tree(f)
    return out


def _check_tree(f: object) -> None:
    if isinstance(f, _COMBINATORS):
        if not isinstance(f.filters, tuple):
            raise InvalidQuery(f"{type(f).__name__}.filters must be a tuple of filters, got {f.filters!r}")
        for child in f.filters:
            _check_tree(child)
    elif isinstance(f, Term | Terms | Range | Exists):
        _check_field(f.field)
        for name in ("value", "values", "gt", "gte", "lt", "lte"):
            _unicode(f.field, getattr(f, name, None))
    else:
        raise InvalidQuery(f"not a filter: {f!r}")


def filter_fields(filters: Sequence[Filter]) -> tuple[str, ...]:
    """The fields ``filters`` read, sorted (each once)."""
    seen: set[str] = set()
    stack = list(filters)
    while stack:
        f = stack.pop()
        if isinstance(f, _COMBINATORS):
            stack.extend(f.filters)
        else:
            seen.add(f.field)
    return tuple(sorted(seen))


def _es_field(field: str, value: object = None) -> str:
    """The Elasticsearch field a comparison with ``value`` reads: ``_id`` for ``id``; a metadata key's
    ``num`` / ``date`` sub-field for a number / a date."""
    if field == "id":
        return "_id"
    if field.startswith("metadata."):
        if isinstance(value, int | float) and not isinstance(value, bool):
            return f"{field}.num"
        if isinstance(value, date | datetime):
            return f"{field}.date"
    return field


def _jsonable(value: RangeValue) -> str | int | float:
    return value.isoformat() if isinstance(value, date | datetime) else value


def _terms(field: str, values: Sequence[Scalar]) -> dict[str, Any]:
    groups: dict[str, list[Scalar]] = {}
    for v in values:
        groups.setdefault(_es_field(field, v), []).append(v)
    clauses = [{"terms": {target: vs}} for target, vs in groups.items()]
    return clauses[0] if len(clauses) == 1 else {"bool": {"should": clauses, "minimum_should_match": 1}}


def _range(f: Range) -> dict[str, Any]:
    bounds = {k: v for k in ("gt", "gte", "lt", "lte") if (v := getattr(f, k)) is not None}
    targets = {_es_field(f.field, v) for v in bounds.values()}
    if len(targets) > 1:
        raise InvalidQuery(f"filter {f.field!r}: a range's bounds must be of one type (numbers, dates or strings)")
    target = targets.pop() if targets else _es_field(f.field)
    return {"range": {target: {k: _jsonable(v) for k, v in bounds.items()}}}


def _clause(f: Filter) -> dict[str, Any]:
    if isinstance(f, Term):
        return {"term": {_es_field(f.field, f.value): f.value}}
    if isinstance(f, Terms):
        return _terms(f.field, f.values)
    if isinstance(f, Range):
        return _range(f)
    if isinstance(f, Exists):
        exists = {"exists": {"field": _es_field(f.field)}}
        return exists if f.present else {"bool": {"must_not": [exists]}}
    inner = [_clause(c) for c in f.filters]
    if isinstance(f, AllOf):
        return {"bool": {"filter": inner}}
    if isinstance(f, AnyOf):
        return {"bool": {"should": inner, "minimum_should_match": 1}} if inner else {"match_none": {}}
    if not inner:
        return {"match_none": {}}  # not (everything)
    return {"bool": {"must_not": [inner[0] if len(inner) == 1 else {"bool": {"filter": inner}}]}}


def to_es_filters(filters: Sequence[Filter]) -> list[dict[str, Any]]:
    """Elasticsearch filter clauses (all must match); the same list goes to both legs."""
    return [_clause(f) for f in filters]
