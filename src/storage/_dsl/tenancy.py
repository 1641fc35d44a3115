"""Tenancy: the one module every read and every write passes through. Pure: no I/O.

A multi-tenant client (``ES_MULTI_TENANT=true``) must name a tenant for every search, walk, count,
document read and write, or nothing is sent. The rule lives here and nowhere else:

- **Reads** are built from a :class:`Scope`, which only :func:`read_scope` makes: the caller's filters
  and, when a tenant is given (required for a multi-tenant client), its ``term``. The request builders
  (``storage._dsl.queries``) take a scope, never bare filters, so a read without the tenant's filter cannot be
  built. Both legs, the page's fetch and every page of a walk use the plan's scope.
- **Results** are checked a second time (:func:`keep_tenant`): the legs return each hit's ``tenant_id`` as
  a doc value, and a hit of another tenant is dropped (and logged as an error by the caller) whatever the
  query did. A stored document read by id is :func:`visible` only to its tenant.
- **Maintenance** (a reembed copying every document to a new version) reads :func:`every_tenant`; no
  caller-facing read does.
- **Writes**: :func:`stamp` gives every document the caller's tenant, and refuses one of another tenant
  (or, for a multi-tenant client, one with none).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .._errors import InvalidQuery
from .._fusion.methods import FusedList
from .._types.models import lone_surrogate
from .filters import Filter, FilterInput, Term, filter_fields, parse_filters, to_es_filters

__all__ = [
    "TENANT_FIELD",
    "Scope",
    "every_tenant",
    "keep_tenant",
    "read_scope",
    "require",
    "stamp",
    "tenants_of",
    "visible",
]

#: The keyword field a document's tenant is stored in (a doc value, returned by the legs).
TENANT_FIELD = "tenant_id"
_MADE_HERE = object()


def require(tenant_id: str | None, what: str, *, multi_tenant: bool) -> str | None:
    """The tenant a call acts for: None only for a single-tenant client that names none. A blank tenant is
    always an :class:`InvalidQuery`, and so is none for a multi-tenant client."""
    if tenant_id is not None and (not isinstance(tenant_id, str) or not tenant_id.strip()):
        raise InvalidQuery("tenant_id must be a non-empty string")
    if lone_surrogate(tenant_id):
        raise InvalidQuery(f"tenant_id {tenant_id!r} is not valid Unicode text (it holds a lone surrogate)")
    if tenant_id is None and multi_tenant:
        raise InvalidQuery(f"this client is multi-tenant: {what}() needs tenant_id=")
    return tenant_id


class Scope:
    """What a read may see: the filter clauses every request of the read carries (the caller's, the
    tenant's, a parsed query's field prefixes), identical for both legs and the fetch. Made by
    :func:`read_scope` only; read-only."""

    __slots__ = ("clauses", "doc_values", "fields", "tenant_id")

    def __init__(
        self, clauses: tuple[dict[str, Any], ...], tenant_id: str | None, fields: tuple[str, ...], made: object = None
    ) -> None:
        if made is not _MADE_HERE:
            raise TypeError("a Scope is made by storage._dsl.tenancy.read_scope(), which adds the tenant's filter")
        #: Elasticsearch filter clauses, all of which must hold.
        self.clauses = clauses
        #: The tenant every result must belong to (None: a single-tenant client).
        self.tenant_id = tenant_id
        #: The filtered field names (never their values), for telemetry's "top filters".
        self.fields = fields
        #: What the legs return besides ids and scores: the tenant, for the second check.
        self.doc_values: tuple[str, ...] = (TENANT_FIELD,) if tenant_id is not None else ()

    def __repr__(self) -> str:
        return f"Scope(clauses={self.clauses!r}, tenant_id={self.tenant_id!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Scope) and (self.clauses, self.tenant_id) == (other.clauses, other.tenant_id)

    def __hash__(self) -> int:
        return hash((repr(self.clauses), self.tenant_id))

    def widened(self, filters: FilterInput, extra: Sequence[dict[str, Any]] = ()) -> Scope:
        """The same read with other filters (a zero-result scope tier): the tenant is kept."""
        return _scope(parse_filters(filters), self.tenant_id, extra)

    def plus(self, extra: Sequence[dict[str, Any]]) -> Scope:
        """The scope with more clauses (a parsed query's field prefixes)."""
        if not extra:
            return self
        return Scope(self.clauses + tuple(extra), self.tenant_id, self.fields, _MADE_HERE)


def read_scope(
    filters: FilterInput,
    tenant_id: str | None,
    *,
    what: str,
    multi_tenant: bool,
    extra: Sequence[dict[str, Any]] = (),
) -> Scope:
    """The scope of one read: the caller's filters (validated: :class:`InvalidQuery` for anything unknown)
    and the tenant's term. A multi-tenant client's read without a tenant is refused here."""
    tenant = require(tenant_id, what, multi_tenant=multi_tenant)
    parsed = parse_filters(filters)
    if tenant is not None:
        parsed.append(Term(TENANT_FIELD, tenant))
    fields = filter_fields(parsed)
    return Scope((*to_es_filters(parsed), *extra), tenant, fields, _MADE_HERE)


def every_tenant() -> Scope:
    """A maintenance read of a whole index across tenants (a reembed copies every document to a new
    version): used by the index services only, never by a search, walk, count or read a caller makes."""
    return Scope((), None, (), _MADE_HERE)


def _scope(parsed: list[Filter], tenant: str | None, extra: Sequence[dict[str, Any]]) -> Scope:
    if tenant is not None:
        parsed = [*parsed, Term(TENANT_FIELD, tenant)]
    fields = filter_fields(parsed)
    return Scope(tuple(to_es_filters(parsed)) + tuple(extra), tenant, fields, _MADE_HERE)


def tenants_of(hits: Iterable[Mapping[str, Any]]) -> dict[str, str | None]:
    """id -> its ``tenant_id`` as a leg returned it (a doc value: the legs fetch no ``_source``)."""
    out: dict[str, str | None] = {}
    for h in hits:
        values = (h.get("fields") or {}).get(TENANT_FIELD) or [None]
        out.setdefault(str(h["_id"]), values[0])
    return out


def keep_tenant(fused: FusedList, tenant_of: Mapping[str, str | None], tenant: str) -> tuple[FusedList, int]:
    """The second check: the fused list without documents of another tenant, and how many were dropped (the
    caller logs them as an error). The filter inside every request should make this a no-op."""
    kept = fused.keep(lambda doc_id: tenant_of.get(doc_id) == tenant)
    return kept, len(fused) - len(kept)


def visible(source: Mapping[str, Any], tenant_id: str | None) -> bool:
    """A stored document exists for the caller: any, for a single-tenant read; its tenant's own otherwise."""
    return tenant_id is None or source.get(TENANT_FIELD) == tenant_id


def stamp(tenant: str | None, document_tenant: str | None, *, multi_tenant: bool, doc_id: str) -> str | None:
    """The tenant a written document gets (``tenant``, the caller's, when given), or an
    :class:`InvalidQuery` saying why it cannot be written: it belongs to another tenant, or a multi-tenant
    client was given a document without one."""
    if tenant is not None:
        if document_tenant not in (None, tenant):
            raise InvalidQuery(f"document {doc_id!r} belongs to tenant {document_tenant!r}, not {tenant!r}")
        return tenant
    if multi_tenant and not document_tenant:
        raise InvalidQuery(f"this client is multi-tenant: document {doc_id!r} has no tenant_id (pass tenant_id=)")
    return document_tenant
