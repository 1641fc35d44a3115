"""Each framework's names for a search, translated once into ours. Pure: no framework is imported here.

- the result count: LangChain ``k`` (also in ``search_kwargs``), LlamaIndex ``similarity_top_k``, Haystack
  ``top_k`` — our ``limit``;
- filters: LangChain's ``filter`` (``{key: value}``; a list value means any of them), LlamaIndex's
  ``MetadataFilters`` (read by duck typing: ``filters``, ``condition``; each ``MetadataFilter``'s ``key``,
  ``operator``, ``value``), Haystack's filter dicts (``{"field": "meta.x", "operator": "==", "value": ...}``
  and ``{"operator": "AND" | "OR" | "NOT", "conditions": [...]}``) — our filter model (``storage._filters``),
  which the search then validates like any other.

Our model is a conjunction of one condition per field: ``==`` (term), ``in`` (terms), ``>`` ``>=`` ``<``
``<=`` (a range; several on one field merge), ``== None`` / ``exists``. An ``OR`` of equalities on one field
is ``in``. What it cannot say (``!=``, ``not in``, ``NOT``, an ``OR`` across fields, text matching) is an
:class:`~storage.InvalidQuery` naming the operator — never a second filter engine, never a condition
silently dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._errors import InvalidQuery
from .._filters import DATE_FIELDS, KEYWORD_FIELDS

__all__ = [
    "count_argument",
    "haystack_filters",
    "langchain_filter",
    "llama_index_filters",
    "our_field",
    "store_field",
]

_RANGES = {">": "gt", ">=": "gte", "<": "lt", "<=": "lte"}
#: LlamaIndex's FilterOperator values -> the comparison operators above.
_LLAMA_OPERATORS = {"==": "==", "!=": "!=", ">": ">", ">=": ">=", "<": "<", "<=": "<=", "in": "in", "nin": "not in"}


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


def _add(out: dict[str, Any], field: str, op: str, value: Any) -> None:
    """``field op value`` into the conjunction ``out``."""
    have = out.get(field)
    if op in _RANGES:
        if value is None:
            raise InvalidQuery(f"filter {field} {op} None: a range needs a value")
        if have is not None and not (isinstance(have, dict) and "exists" not in have):
            raise InvalidQuery(f"filter on {field}: a range cannot be combined with another condition on it")
        bounds = dict(have or {})
        if _RANGES[op] in bounds:
            raise InvalidQuery(f"filter on {field}: two '{op}' bounds")
        bounds[_RANGES[op]] = value
        out[field] = bounds
        return
    if have is not None:
        raise InvalidQuery(f"filter on {field}: two conditions on one field can only be range bounds")
    if op == "==":
        out[field] = {"exists": False} if value is None else value
    elif op == "in":
        if isinstance(value, str) or not isinstance(value, Sequence):
            raise InvalidQuery(f"filter {field} in ...: the value must be a list, got {type(value).__name__}")
        out[field] = list(value)
    elif op == "exists":
        out[field] = {"exists": bool(value)}
    else:
        raise InvalidQuery(
            f"the filter operator {op!r} (on {field}) is not supported: use ==, in, >, >=, <, <= (combined with "
            "AND), or an OR of == on one field"
        )


def store_field(key: str) -> str:
    """A framework store's metadata key as ours: always ``metadata.<key>`` (a store's documents carry the
    framework's metadata there; ``source`` is the document's, not our own ``source`` field)."""
    if not isinstance(key, str) or not key:
        raise InvalidQuery(f"a filter's field must be a name, got {key!r}")
    return f"metadata.{key.removeprefix('meta.').removeprefix('metadata.')}"


def _conjunction(node: tuple[Any, ...], out: dict[str, Any], field: Callable[[str], str] = our_field) -> None:
    """A tree of ``("cmp", field, op, value)`` / ``("AND" | "OR" | "NOT", [children])`` into ``out``, each
    field name read by ``field``."""
    kind = node[0]
    if kind == "cmp":
        _add(out, field(node[1]), node[2], node[3])
    elif kind == "AND":
        for child in node[1]:
            _conjunction(child, out, field)
    elif kind == "OR":
        children = node[1]
        fields = {field(c[1]) for c in children if c[0] == "cmp"}
        if children and all(c[0] == "cmp" and c[2] in ("==", "in") for c in children) and len(fields) == 1:
            values: list[Any] = []
            for c in children:
                values += list(c[3]) if c[2] == "in" else [c[3]]
            _add(out, fields.pop(), "in", values)
        else:
            raise InvalidQuery("the filter operator 'OR' is supported only between == (or in) conditions on one field")
    else:
        raise InvalidQuery(f"the filter operator {kind!r} is not supported: use AND, or OR between == on one field")


def _translate(tree: tuple[Any, ...], field: Callable[[str], str] = our_field) -> dict[str, Any]:
    out: dict[str, Any] = {}
    _conjunction(tree, out, field)
    return out


def langchain_filter(value: Any, *, store: bool = False) -> dict[str, Any] | None:
    """LangChain's ``filter``: ``{key: value}`` (a list: any of them); None: no filter. ``store``: the keys
    are a store's document metadata (:func:`store_field`)."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InvalidQuery(f"filter must be a mapping {{key: value}}, got {type(value).__name__}")
    tree = ("AND", [("cmp", k, "in" if isinstance(v, list | tuple) else "==", v) for k, v in value.items()])
    return _translate(tree, store_field if store else our_field)


def _llama_tree(filters: Any) -> tuple[Any, ...]:
    condition = str(getattr(getattr(filters, "condition", None), "value", getattr(filters, "condition", "and")))
    children: list[tuple[Any, ...]] = []
    for f in getattr(filters, "filters", []) or []:
        if hasattr(f, "filters"):  # nested MetadataFilters
            children.append(_llama_tree(f))
            continue
        op = str(getattr(getattr(f, "operator", None), "value", getattr(f, "operator", "==")))
        if op not in _LLAMA_OPERATORS:
            raise InvalidQuery(f"the filter operator {op!r} (on {getattr(f, 'key', '?')}) is not supported")
        children.append(("cmp", f.key, _LLAMA_OPERATORS[op], f.value))
    kind = condition.upper()
    if kind == "NOT":
        raise InvalidQuery("the filter condition 'not' is not supported: use AND, or OR between == on one field")
    return (kind, children)


def llama_index_filters(filters: Any, *, store: bool = False) -> dict[str, Any] | None:
    """LlamaIndex's ``MetadataFilters`` (operators ``==``, ``in``, ``>``, ``>=``, ``<``, ``<=``; conditions
    ``and``, ``or`` of equalities on one key; nested) as our filter model; None: no filter. ``store``: the
    keys are a store's node metadata (:func:`store_field`)."""
    if filters is None:
        return None
    if not hasattr(filters, "filters"):
        raise InvalidQuery(f"filters must be a MetadataFilters, got {type(filters).__name__}")
    return _translate(_llama_tree(filters), store_field if store else our_field)


def _haystack_tree(node: Any) -> tuple[Any, ...]:
    if not isinstance(node, Mapping) or "operator" not in node:
        raise InvalidQuery(f"a Haystack filter needs an 'operator', got {node!r}"[:200])
    op = node["operator"]
    if "conditions" in node:
        if op not in ("AND", "OR", "NOT"):
            raise InvalidQuery(f"the logical filter operator {op!r} is not supported: use AND or OR")
        conditions = node["conditions"]
        if not isinstance(conditions, list):
            raise InvalidQuery("a Haystack filter's 'conditions' must be a list")
        return (op, [_haystack_tree(c) for c in conditions])
    if "field" not in node or "value" not in node:
        raise InvalidQuery("a Haystack comparison needs 'field', 'operator' and 'value'")
    return ("cmp", node["field"], op, node["value"])


def haystack_filters(filters: Any) -> dict[str, Any] | None:
    """Haystack's filter syntax as our filter model; a mapping without ``operator`` is taken as our model
    already (what our retriever's options always took); None: no filter."""
    if filters is None:
        return None
    if not isinstance(filters, Mapping):
        raise InvalidQuery(f"filters must be a mapping, got {type(filters).__name__}")
    if not {"operator", "field", "conditions"} & set(filters):
        return dict(filters)
    return _translate(_haystack_tree(filters))
