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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from ._errors import InvalidQuery
from ._models import is_metadata_field

__all__ = ["Exists", "Filter", "FilterInput", "Range", "Term", "Terms", "parse_filters", "to_es_filters"]

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


Filter = Term | Terms | Range | Exists
FilterInput = Mapping[str, Any] | Sequence[Filter] | None


def _check_field(field: str) -> None:
    if field in KEYWORD_FIELDS or field in DATE_FIELDS or is_metadata_field(field):
        return
    allowed = ", ".join(sorted(KEYWORD_FIELDS | DATE_FIELDS)) + ", metadata.<key>"
    raise InvalidQuery(f"unknown filter field {field!r}; filterable fields: {allowed}")


def _scalar(field: str, value: object) -> Scalar:
    if isinstance(value, str | bool | int | float) and not (isinstance(value, float) and value != value):
        if field == "published_at" and isinstance(value, bool):
            raise InvalidQuery(f"filter {field!r}: expected a date, got {value!r}")
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
        return value
    raise InvalidQuery(f"filter {field!r}.{key}: expected a number or string, got {value!r}")


def _parse_one(field: str, condition: object) -> Filter:
    _check_field(field)
    if isinstance(condition, Mapping):
        keys = set(condition)
        if keys == {"exists"}:
            if not isinstance(condition["exists"], bool):
                raise InvalidQuery(f"filter {field!r}: exists must be true or false")
            return Exists(field, condition["exists"])
        if not keys or not keys <= _RANGE_KEYS:
            raise InvalidQuery(
                f"filter {field!r}: a mapping must be a range (gt, gte, lt, lte) or {{'exists': bool}}, "
                f"got keys {sorted(map(str, keys))}"
            )
        bounds = {k: _range_value(field, k, v) for k, v in condition.items()}
        if ("gt" in bounds and "gte" in bounds) or ("lt" in bounds and "lte" in bounds):
            raise InvalidQuery(f"filter {field!r}: give one lower and one upper bound at most")
        return Range(field, **bounds)
    if isinstance(condition, list | tuple | set | frozenset):
        values = tuple(_scalar(field, v) for v in condition)
        if not values:
            raise InvalidQuery(f"filter {field!r}: an empty list matches nothing; omit the filter instead")
        if len(values) > MAX_TERMS:
            raise InvalidQuery(f"filter {field!r}: at most {MAX_TERMS} values")
        return Terms(field, values)
    if field in DATE_FIELDS:
        value = _range_value(field, "eq", condition)
        return Range(field, gte=value, lte=value)
    return Term(field, _scalar(field, condition))


def parse_filters(filters: FilterInput) -> list[Filter]:
    """Validate caller filters; raises :class:`InvalidQuery` on anything unknown or malformed."""
    if filters is None:
        return []
    if isinstance(filters, Mapping):
        return [_parse_one(str(field), condition) for field, condition in filters.items()]
    if isinstance(filters, str | bytes):
        raise InvalidQuery("filters must be a mapping or a list of Filter objects")
    out: list[Filter] = []
    for f in filters:
        if not isinstance(f, Term | Terms | Range | Exists):
            raise InvalidQuery(f"not a filter: {f!r}")
        _check_field(f.field)
        out.append(f)
    return out


def _es_field(field: str) -> str:
    return "_id" if field == "id" else field


def _jsonable(value: RangeValue) -> str | int | float:
    return value.isoformat() if isinstance(value, date | datetime) else value


def to_es_filters(filters: Sequence[Filter]) -> list[dict[str, Any]]:
    """Elasticsearch filter clauses (all must match); the same list goes to both legs."""
    clauses: list[dict[str, Any]] = []
    for f in filters:
        field = _es_field(f.field)
        if isinstance(f, Term):
            clauses.append({"term": {field: f.value}})
        elif isinstance(f, Terms):
            clauses.append({"terms": {field: list(f.values)}})
        elif isinstance(f, Range):
            bounds = {k: _jsonable(v) for k in ("gt", "gte", "lt", "lte") if (v := getattr(f, k)) is not None}
            clauses.append({"range": {field: bounds}})
        elif f.present:
            clauses.append({"exists": {"field": field}})
        else:
            clauses.append({"bool": {"must_not": [{"exists": {"field": field}}]}})
    return clauses
