"""Each framework's names for a search, translated once into ours. Pure: no framework is imported here.

- the result count: LangChain ``k`` (also in ``search_kwargs``), LlamaIndex ``similarity_top_k``, Haystack
  ``top_k`` — our ``limit``;
- filters: LangChain's ``filter`` (``{key: value}``; a list value means any of them), LlamaIndex's
  ``MetadataFilters`` (read by duck typing: ``filters``, ``condition``; each ``MetadataFilter``'s ``key``,
  ``operator``, ``value``), Haystack's filter dicts (``{"field": "meta.x", "operator": "==", "value": ...}``
  and ``{"operator": "AND" | "OR" | "NOT", "conditions": [...]}``), and the Elasticsearch stores' own filter
  lists (``[{"term": {"metadata.page": 1}}, {"bool": {...}}]``: ``term``, ``terms``, ``range``, ``exists``,
  ``ids`` and ``bool``) — a list of our filters (``storage._dsl.filters``), which the search then validates
  like any other.

One tree, one translation: a comparison is one of our conditions (``==`` a term, ``in`` terms, ``>`` ``>=``
``<`` ``<=`` a range, ``== None`` absent, ``!= None`` present), ``!=`` and ``not in`` its :class:`Not`,
``AND`` / ``OR`` / ``NOT`` an :class:`AllOf` / :class:`AnyOf` / :class:`Not` of the children. The frameworks'
comparison rules, as their own stores apply them: a range with a string value compares dates (an ISO-8601
string, else an error), a range with ``None`` matches nothing, ``in`` and ``not in`` take a list. Anything
else (text matching, a range on a list) is an :class:`~storage.InvalidQuery` naming the operator — never a
second filter engine, never a condition silently dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from .._dsl.filters import DATE_FIELDS, KEYWORD_FIELDS, AllOf, AnyOf, Exists, Filter, Not, condition
from .._errors import InvalidQuery

__all__ = [
    "count_argument",
    "elasticsearch_filters",
    "haystack_filters",
    "haystack_store_field",
    "langchain_filter",
    "llama_index_filters",
    "our_field",
    "store_field",
]

_RANGES = {">": "gt", ">=": "gte", "<": "lt", "<=": "lte"}
#: LlamaIndex's FilterOperator values -> the comparison operators above.
_LLAMA_OPERATORS = {"==": "==", "!=": "!=", ">": ">", ">=": ">=", "<": "<", "<=": "<=", "in": "in", "nin": "not in"}
_OPERATORS = ("==", "!=", "in", "not in", "exists", *_RANGES)
#: A framework's filter, translated: our filters, all of which must hold (None: no filter).
Translated = list[Filter] | None


def count_argument(name: str, value: Any) -> int:
    """A framework's result count (``k``, ``top_k``, ``similarity_top_k``) as our ``limit``: a whole number."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidQuery(f"{name} must be a whole number, got {type(value).__name__} {value!r}")
    return value


def our_field(key: str) -> str:
    """A framework's field name as ours: ``meta.x`` / ``metadata.x`` / ``x`` -> ``x`` for our own fields
    (``ticker``, ``doc_type``, ``source``, ``tenant_id``, ``id``, ``published_at``), else ``metadata.x``."""
    if not isinstance(key, str) or not key:
        raise InvalidQuery(f"a filter's field must be a name, got {key!r}")
    bare = key.removeprefix("meta.").removeprefix("metadata.")
    if bare in KEYWORD_FIELDS or bare in DATE_FIELDS:
        return bare
    return f"metadata.{bare}"


def _range_bound(field: str, op: str, value: Any) -> Any:
    """A range's value as the frameworks compare it: numbers as numbers, a string as an ISO-8601 date."""
    if isinstance(value, str) and field.startswith("metadata."):
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            raise InvalidQuery(f"filter {field} {op} {value!r}: a string compares only as an ISO-8601 date") from None
    if isinstance(value, list | tuple | dict | set):
        raise InvalidQuery(f"filter {field} {op}: a range needs one value, got {type(value).__name__}")
    return value


def _values(field: str, op: str, value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise InvalidQuery(f"filter {field} {op} ...: the value must be a list, got {type(value).__name__}")
    return value


def _comparison(field: str, op: Any, value: Any) -> Filter:
    """``field op value`` as one of our filters."""
    if op in _RANGES:
        if value is None:
            return AnyOf(())  # (nothing compares with None)
        return condition(field, {_RANGES[op]: _range_bound(field, op, value)})
    if op in ("==", "!="):
        if value is None:
            return Exists(field, op == "!=")
        if isinstance(value, list | tuple):
            raise InvalidQuery(
                f"filter {field} {op} a list (the exact set of values) is not supported: "
                f"use {'in' if op == '==' else 'not in'} for any of them"
            )
        equal = condition(field, value)
        return equal if op == "==" else Not((equal,))
    if op in ("in", "not in"):
        values = _values(field, op, value)
        positive: Filter = condition(field, values) if values else AnyOf(())
        return positive if op == "in" else Not((positive,))
    if op == "exists":
        return Exists(field, bool(value))
    raise InvalidQuery(f"the filter operator {op!r} (on {field}) is not supported: use one of {', '.join(_OPERATORS)}")


def _tree(node: tuple[Any, ...], field: Callable[[str], str]) -> Filter:
    """A tree of ``("cmp", field, op, value)`` / ``("AND" | "OR" | "NOT", [children])`` as one of our filters,
    each field name read by ``field``."""
    kind = node[0]
    if kind == "cmp":
        return _comparison(field(node[1]), node[2], node[3])
    children = tuple(_tree(child, field) for child in node[1])
    if kind == "AND":
        return AllOf(children)
    if kind == "OR":
        return AnyOf(children)
    if kind == "NOT":
        return Not(children)
    raise InvalidQuery(f"the logical filter operator {kind!r} is not supported: use AND, OR or NOT")


def _translate(tree: tuple[Any, ...], field: Callable[[str], str] = our_field) -> list[Filter]:
    top = _tree(tree, field)
    return list(top.filters) if isinstance(top, AllOf) else [top]


def store_field(key: str) -> str:
    """A framework store's metadata key as ours: always ``metadata.<key>`` (a store's documents carry the
    framework's metadata there; ``source`` is the document's, not our own ``source`` field)."""
    if not isinstance(key, str) or not key:
        raise InvalidQuery(f"a filter's field must be a name, got {key!r}")
    return f"metadata.{key.removeprefix('meta.').removeprefix('metadata.')}"


def langchain_filter(value: Any, *, store: bool = False) -> Translated:
    """LangChain's ``filter``: ``{key: value}`` (a list: any of them); None: no filter. ``store``: the keys
    are a store's document metadata (:func:`store_field`)."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InvalidQuery(f"filter must be a mapping {{key: value}}, got {type(value).__name__}")
    tree = (
        "AND",
        [("cmp", k, "in", list(v)) if isinstance(v, list | tuple) else ("cmp", k, "==", v) for k, v in value.items()],
    )
    return _translate(tree, store_field if store else our_field)


def _llama_tree(filters: Any) -> tuple[Any, ...]:
    kind = str(getattr(getattr(filters, "condition", None), "value", getattr(filters, "condition", "and")))
    children: list[tuple[Any, ...]] = []
    for f in getattr(filters, "filters", []) or []:
        if hasattr(f, "filters"):  # nested MetadataFilters
            children.append(_llama_tree(f))
            continue
        op = str(getattr(getattr(f, "operator", None), "value", getattr(f, "operator", "==")))
        if op not in _LLAMA_OPERATORS:
            raise InvalidQuery(f"the filter operator {op!r} (on {getattr(f, 'key', '?')}) is not supported")
        children.append(("cmp", f.key, _LLAMA_OPERATORS[op], f.value))
    return (kind.upper(), children)


def llama_index_filters(filters: Any, *, store: bool = False) -> Translated:
    """LlamaIndex's ``MetadataFilters`` (operators ``==``, ``!=``, ``in``, ``nin``, ``>``, ``>=``, ``<``,
    ``<=``; conditions ``and``, ``or``, ``not``; nested) as our filters; None: no filter. ``store``: the keys
    are a store's node metadata (:func:`store_field`)."""
    if filters is None:
        return None
    if not hasattr(filters, "filters"):
        raise InvalidQuery(f"filters must be a MetadataFilters, got {type(filters).__name__}")
    return _translate(_llama_tree(filters), store_field if store else our_field)


#: A Haystack document's own fields, which are not its meta (and not filter fields here).
_HAYSTACK_FIELDS = ("content", "embedding", "sparse_embedding", "blob", "score", "meta")


def haystack_store_field(key: str) -> str:
    """A Haystack document store's field as ours: ``meta.<key>`` — or ``<key>`` alone, which
    ``ElasticsearchDocumentStore`` reads as the same — is ``metadata.<key>``, ``id`` the document's id; the
    content (or an embedding) is not a filter field."""
    if key == "id":
        return "id"
    if not isinstance(key, str) or key in _HAYSTACK_FIELDS or key in ("", "meta."):
        raise InvalidQuery(f"filter field {key!r}: a document store filters on 'id' and 'meta.<key>' fields")
    return store_field(key)


def _haystack_tree(node: Any) -> tuple[Any, ...]:
    if not isinstance(node, Mapping) or "operator" not in node:
        raise InvalidQuery(f"a Haystack filter needs an 'operator', got {node!r}"[:200])
    op = node["operator"]
    if "conditions" in node and op not in ("AND", "OR", "NOT"):
        raise InvalidQuery(f"the logical filter operator {op!r} is not supported: use AND, OR or NOT")
    if op in ("AND", "OR", "NOT"):
        conditions = node.get("conditions")
        if not isinstance(conditions, list):
            raise InvalidQuery(f"the Haystack filter operator {op!r} needs a list of 'conditions'")
        return (op, [_haystack_tree(c) for c in conditions])
    if "field" not in node or "value" not in node:
        raise InvalidQuery("a Haystack comparison needs 'field', 'operator' and 'value'")
    return ("cmp", node["field"], op, node["value"])


def haystack_filters(filters: Any, *, store: bool = False) -> dict[str, Any] | Translated:
    """Haystack's filter syntax as our filters; None (or, for a store, ``{}``): no filter. A mapping without
    ``operator`` is taken as our model already (what our retriever's options always took) — not for a
    ``store``, whose filters are Haystack's (fields ``id`` and ``meta.<key>``: :func:`haystack_store_field`)."""
    if filters is None or (store and filters == {}):
        return None
    if not isinstance(filters, Mapping):
        raise InvalidQuery(f"filters must be a mapping, got {type(filters).__name__}")
    if not store and not {"operator", "field", "conditions"} & set(filters):
        return dict(filters)
    return _translate(_haystack_tree(filters), haystack_store_field if store else our_field)


#: Elasticsearch range keys -> the comparison operators above.
_ES_RANGES = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}


def _es_one(kind: str, body: Any) -> tuple[str, Any]:
    """A leaf clause's ``{field: value}`` (one field, as Elasticsearch requires)."""
    if not isinstance(body, Mapping) or len(body) != 1:
        raise InvalidQuery(f"the {kind!r} filter clause must name one field, got {body!r}"[:200])
    ((field, value),) = body.items()
    return str(field), value


def _es_tree(clause: Any) -> tuple[Any, ...]:
    if not isinstance(clause, Mapping) or len(clause) != 1:
        raise InvalidQuery(f"an Elasticsearch filter clause is one query type, got {clause!r}"[:200])
    ((kind, body),) = clause.items()
    if kind == "term":
        field, value = _es_one(kind, body)
        if isinstance(value, Mapping):
            if set(value) - {"value", "boost", "case_insensitive"} or value.get("case_insensitive"):
                raise InvalidQuery(f"the term filter on {field} takes a value (case_insensitive is not supported)")
            value = value.get("value")
        return ("cmp", field, "==", value)
    if kind == "terms":
        field, value = _es_one(kind, {k: v for k, v in body.items() if k != "boost"})
        return ("cmp", field, "in", list(value) if isinstance(value, list | tuple) else value)
    if kind == "range":
        field, bounds = _es_one(kind, body)
        if not isinstance(bounds, Mapping) or set(bounds) - {*_ES_RANGES, "boost"} or not set(bounds) & set(_ES_RANGES):
            raise InvalidQuery(f"the range filter on {field} takes gt, gte, lt and lte (no format or time_zone)")
        return ("AND", [("cmp", field, _ES_RANGES[k], v) for k, v in bounds.items() if k in _ES_RANGES])
    if kind == "exists":
        if not isinstance(body, Mapping) or not isinstance(body.get("field"), str):
            raise InvalidQuery("the exists filter clause takes {'field': name}")
        return ("cmp", body["field"], "exists", True)
    if kind == "ids":
        if not isinstance(body, Mapping) or not isinstance(body.get("values"), list):
            raise InvalidQuery("the ids filter clause takes {'values': [...]}")
        return ("cmp", "_id", "in", body["values"])
    if kind == "bool":
        return _es_bool(body)
    raise InvalidQuery(
        f"the {kind!r} clause cannot be a filter here (it matches text or scores): put the words in the query, "
        "or filter with term, terms, range, exists, ids and bool"
    )


def _es_list(body: Mapping[str, Any], key: str) -> list[tuple[Any, ...]]:
    value = body.get(key, [])
    return [_es_tree(c) for c in (value if isinstance(value, list) else [value])]


def _es_bool(body: Any) -> tuple[Any, ...]:
    if not isinstance(body, Mapping) or set(body) - {"must", "filter", "should", "must_not", "minimum_should_match"}:
        raise InvalidQuery("a bool filter takes must, filter, should, must_not and minimum_should_match")
    required = _es_list(body, "must") + _es_list(body, "filter")
    should = _es_list(body, "should")
    least = body.get("minimum_should_match", 1 if should and not required else 0)
    if should and least not in (1, "1"):
        raise InvalidQuery(
            "a bool filter's should clauses only score beside must or filter, unless minimum_should_match is 1: "
            "give minimum_should_match: 1 to require one of them, or leave them out"
            if least in (0, "0")
            else f"minimum_should_match {least!r} is not supported: 1 (any of the should clauses) is"
        )
    children = required + ([("OR", should)] if should else [])
    children += [("NOT", [c]) for c in _es_list(body, "must_not")]
    return ("AND", children)


def peer_store_field(key: str, suffix: str = ".keyword") -> str:
    """A field of an Elasticsearch store's layout as ours: ``metadata.<key>`` (its keyword sub-field,
    ``suffix``, alike) is the document's metadata, ``_id`` its id; the text and the vector are not filter
    fields."""
    if key in ("_id", "id"):
        return "id"
    bare = key.removesuffix(suffix) if isinstance(key, str) and suffix else key
    if not isinstance(bare, str) or not bare.startswith("metadata.") or bare == "metadata.":
        raise InvalidQuery(f"filter field {key!r}: filter on metadata.<key> fields (and _id)")
    return store_field(bare)


def elasticsearch_filters(clauses: Any, *, suffix: str = ".keyword") -> Translated:
    """An Elasticsearch store's filter list (LangChain's ``filter=[...]``, LlamaIndex's ``es_filter=[...]``):
    each clause one of our filters, all of which must hold (fields: :func:`peer_store_field`). A clause that
    matches text or scores is refused by name, never dropped. None or ``[]``: no filter."""
    if clauses is None:
        return None
    if isinstance(clauses, Mapping):
        clauses = [clauses]
    if not isinstance(clauses, list):
        raise InvalidQuery(f"an Elasticsearch filter is a list of clauses, got {type(clauses).__name__}")
    if not clauses:
        return None
    return _translate(("AND", [_es_tree(c) for c in clauses]), lambda key: peer_store_field(key, suffix))
