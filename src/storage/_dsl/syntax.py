"""An opt-in query syntax, parsed by us into safe query DSL (never ``query_string`` passthrough). Pure.

::

    query    := or_expr
    or_expr  := and_expr ("OR" and_expr)*
    and_expr := unary (["AND"] unary)*        juxtaposition means AND
    unary    := ("NOT" | "-") unary | primary
    primary  := "(" or_expr ")" | "\"phrase\"" | prefix ":" value | word

Operators are upper case (``and``/``or``/``not`` in lower case are ordinary words). Field prefixes map
onto the filter model and must stand at the top level, outside ``OR``/``NOT``/parentheses (they filter
both legs, kNN included, which has no boolean logic): ``ticker:AAPL``, ``type:10-K`` (doc_type),
``source:reuters``, ``date:2024`` / ``date:2024-06`` / ``date:2024-06-15`` (a range over published_at);
the same prefix twice means either value. Words and phrases become ``match`` / ``match_phrase`` clauses
over the text fields, so no user input is ever interpreted by Elasticsearch's own parsers. The kNN leg
embeds the positive words and phrases. Errors are :class:`QuerySyntaxError` with the offending token's
position.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .._errors import InvalidQuery
from .filters import Filter, Range, Term, Terms
from .queries import TIE_BREAKER

__all__ = ["PREFIXES", "ParsedQuery", "QuerySyntaxError", "parse_query"]

#: Query prefix -> document field.
PREFIXES: dict[str, str] = {"ticker": "ticker", "type": "doc_type", "source": "source", "date": "published_at"}
_MAX_DEPTH = 32
_TOKEN = re.compile(r'\s+|(?P<lp>\()|(?P<rp>\))|(?P<phrase>"[^"]*"?)|(?P<word>[^\s()"]+)')
_DATE = re.compile(r"^(\d{4})(?:-(\d{2})(?:-(\d{2}))?)?$")


class QuerySyntaxError(InvalidQuery):
    """The query does not follow the syntax; ``position`` (0-based) and ``token`` say where."""

    reason = "query_syntax"

    def __init__(self, message: str, *, text: str, position: int, token: str) -> None:
        pointer = f"{text}\n{' ' * position}^"
        super().__init__(f"{message} at position {position}: {token!r}\n{pointer}")
        self.position = position
        self.token = token


@dataclass(frozen=True, slots=True)
class ParsedQuery:
    #: The BM25 leg's query clause (bool / match / match_phrase).
    clause: dict[str, Any]
    #: What the kNN leg embeds: the positive words and phrases.
    embed_text: str
    filters: list[Filter] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Tok:
    kind: str  # word | phrase | lp | rp | AND | OR | NOT | field
    value: str
    pos: int


def _tokenize(text: str) -> list[_Tok]:
    out: list[_Tok] = []
    for m in _TOKEN.finditer(text):
        if m.group("lp"):
            out.append(_Tok("lp", "(", m.start()))
        elif m.group("rp"):
            out.append(_Tok("rp", ")", m.start()))
        elif (phrase := m.group("phrase")) is not None:
            if len(phrase) < 2 or not phrase.endswith('"'):
                raise QuerySyntaxError("unterminated quote", text=text, position=m.start(), token=phrase)
            out.append(_Tok("phrase", phrase[1:-1].strip(), m.start()))
        elif (word := m.group("word")) is not None:
            if word in ("AND", "OR", "NOT"):
                out.append(_Tok(word, word, m.start()))
            elif word.startswith("-") and len(word) > 1:
                out.append(_Tok("NOT", "-", m.start()))
                out.extend(_word(text, word[1:], m.start() + 1))
            else:
                out.extend(_word(text, word, m.start()))
    return out


def _word(text: str, word: str, pos: int) -> list[_Tok]:
    prefix, sep, value = word.partition(":")
    if sep and prefix and not prefix.isdigit():
        if prefix.lower() not in PREFIXES:
            raise QuerySyntaxError(
                f"unknown field prefix {prefix!r} (known: {', '.join(PREFIXES)}; quote the text to search it)",
                text=text,
                position=pos,
                token=word,
            )
        if not value:
            raise QuerySyntaxError(f"{prefix}: needs a value", text=text, position=pos, token=word)
        return [_Tok("field", f"{prefix.lower()}:{value}", pos)]
    return [_Tok("word", word, pos)]


class _Parser:
    def __init__(self, text: str, fields: Sequence[str]) -> None:
        self.text, self.fields = text, list(fields)
        #: What every text clause carries: the fields, scored like the BM25 leg (best field + tie breaker).
        self._fields: dict[str, Any] = {"fields": self.fields, "tie_breaker": TIE_BREAKER, "lenient": True}
        self.toks = _tokenize(text)
        self.i = 0
        self.filters: dict[str, list[tuple[str, int]]] = {}
        self.positive: list[str] = []
        self.field_toks: list[_Tok] = []

    def error(self, message: str, tok: _Tok | None) -> QuerySyntaxError:
        if tok is None:
            return QuerySyntaxError(message, text=self.text, position=len(self.text), token="<end>")
        return QuerySyntaxError(message, text=self.text, position=tok.pos, token=tok.value)

    def peek(self) -> _Tok | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self) -> _Tok:
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def parse(self) -> dict[str, Any] | None:
        clause = self.or_expr(depth=0, top=True)
        if (tok := self.peek()) is not None:
            raise self.error("unexpected " + ("')'" if tok.kind == "rp" else "token"), tok)
        return clause

    def or_expr(self, depth: int, top: bool) -> dict[str, Any] | None:
        seen = len(self.field_toks)
        parts = [self.and_expr(depth, top)]
        while (tok := self.peek()) is not None and tok.kind == "OR":
            self.take()
            parts.append(self.and_expr(depth, top=False))
        if len(parts) == 1:
            return parts[0]
        if len(self.field_toks) > seen:  # a prefix in the first branch of an OR is not a global filter
            raise self.error(
                "field prefixes must stand at the top level, outside OR, NOT and parentheses "
                "(put the OR in parentheses: type:10-K (a OR b))",
                self.field_toks[seen],
            )
        return {"bool": {"should": parts, "minimum_should_match": 1}}

    def and_expr(self, depth: int, top: bool) -> dict[str, Any] | None:
        must: list[dict[str, Any]] = []
        must_not: list[dict[str, Any]] = []
        first = True
        while (tok := self.peek()) is not None and tok.kind not in ("OR", "rp"):
            if tok.kind == "AND":
                if first:
                    raise self.error("AND needs something on its left", tok)
                self.take()
                nxt = self.peek()
                if nxt is None or nxt.kind in ("OR", "rp", "AND"):
                    raise self.error("AND needs something on its right", nxt or tok)
                continue
            negated = False
            if tok.kind == "NOT":
                self.take()
                negated = True
                nxt = self.peek()
                if nxt is None or nxt.kind in ("OR", "AND", "rp"):
                    raise self.error("NOT needs something after it", nxt or tok)
            clause = self.primary(depth, top and not negated, negated)
            first = False
            if clause is None:
                continue
            (must_not if negated else must).append(clause)
        if first:
            tok = self.peek()
            raise self.error("expected a word, a phrase or '('", tok)
        if not must and not must_not:
            return None  # only field prefixes
        if not must:
            raise self.error("a query needs at least one word or phrase that is not negated", None)
        if len(must) == 1 and not must_not:
            return must[0]
        return {"bool": {"must": must, "must_not": must_not}}

    def primary(self, depth: int, top: bool, negated: bool) -> dict[str, Any] | None:
        tok = self.take()
        if tok.kind == "lp":
            if depth >= _MAX_DEPTH:
                raise self.error("parentheses nested too deeply", tok)
            inner = self.or_expr(depth + 1, top=False)
            close = self.peek()
            if close is None or close.kind != "rp":
                raise self.error("'(' is never closed", tok)
            self.take()
            return inner
        if tok.kind == "rp":
            raise self.error("unexpected ')'", tok)
        if tok.kind == "field":
            if not top or negated:
                raise self.error(
                    "field prefixes must stand at the top level, outside OR, NOT and parentheses "
                    "(put the OR in parentheses: type:10-K (a OR b))",
                    tok,
                )
            self.field_toks.append(tok)
            prefix, _, value = tok.value.partition(":")
            self.filters.setdefault(prefix, []).append((value, tok.pos))
            return None
        if tok.kind == "phrase":
            if not tok.value:
                raise self.error("empty phrase", tok)
            if not negated:
                self.positive.append(tok.value)
            return {"multi_match": {"query": tok.value, "type": "phrase", **self._fields}}
        if tok.kind == "word":
            if not negated:
                self.positive.append(tok.value)
            return {"multi_match": {"query": tok.value, **self._fields}}
        raise self.error(f"unexpected {tok.value}", tok)

    def filter_list(self) -> list[Filter]:
        out: list[Filter] = []
        for prefix, values in self.filters.items():
            target = PREFIXES[prefix]
            if prefix == "date":
                if len(values) > 1:
                    raise QuerySyntaxError(
                        "date: may appear once", text=self.text, position=values[1][1], token=values[1][0]
                    )
                out.append(_date_range(self.text, *values[0]))
            elif len(values) == 1:
                out.append(Term(target, values[0][0]))
            else:
                out.append(Terms(target, tuple(v for v, _ in values)))
        return out


def _date_range(text: str, value: str, pos: int) -> Range:
    m = _DATE.match(value)
    try:
        if m is None:
            raise ValueError
        year, month, day = int(m.group(1)), m.group(2), m.group(3)
        if month is None:
            return Range("published_at", gte=f"{year:04d}-01-01", lte=f"{year:04d}-12-31")
        mon = int(month)
        last = calendar.monthrange(year, mon)[1]  # raises for a month outside 1-12
        if day is None:
            return Range("published_at", gte=f"{year:04d}-{mon:02d}-01", lte=f"{year:04d}-{mon:02d}-{last:02d}")
        if not 1 <= int(day) <= last:
            raise ValueError
        return Range("published_at", gte=f"{year:04d}-{mon:02d}-{day}", lte=f"{year:04d}-{mon:02d}-{day}")
    except ValueError:
        raise QuerySyntaxError(
            "date: takes YYYY, YYYY-MM or YYYY-MM-DD", text=text, position=pos, token=f"date:{value}"
        ) from None


def parse_query(text: str, *, fields: Sequence[str]) -> ParsedQuery:
    """Parse ``text`` (already cleaned of control characters) into a clause, the text to embed, and filters."""
    parser = _Parser(text, fields)
    if not parser.toks:
        raise QuerySyntaxError("empty query", text=text, position=0, token="")
    clause = parser.parse()
    if clause is None:
        raise QuerySyntaxError(
            "a query needs at least one word or phrase besides field prefixes", text=text, position=0, token=text
        )
    return ParsedQuery(clause=clause, embed_text=" ".join(parser.positive), filters=parser.filter_list())
