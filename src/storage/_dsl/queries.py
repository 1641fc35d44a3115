"""Pure request builders: the two legs, the page's fetch, counts and id lookups. Every read is built from a
:class:`~storage._dsl.tenancy.Scope` (the caller's filters and the tenant's), never from bare filters, so the
legs, the fetch and a walk's pages all carry the same clauses."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .tenancy import Scope

__all__ = [
    "BM25_FIELDS",
    "EXACT_CANDIDATES",
    "HEAD_FIRST_PASSAGE_CANDIDATES",
    "HIGHLIGHT_LIMIT",
    "PASSAGE_FIELDS",
    "PIT_SORT",
    "SOURCE_EXCLUDES",
    "TIE_BREAKER",
    "bm25_fuzzy_request",
    "bm25_request",
    "count_request",
    "facet_request",
    "fetch_request",
    "group_tail_requests",
    "ids_request",
    "knn_query_request",
    "knn_request",
    "msearch_body",
    "on_pit",
    "server_side",
]

#: The fields the BM25 leg searches, scored as BEIR scores Elasticsearch: the best field's score plus
#: ``TIE_BREAKER`` times the others' (a dis_max, Elasticsearch's ``best_fields``), title and text weighted
#: alike. Chosen on four collections (bench/bm25_queries.py; docs/benchmarks.md): it beat ``title^2`` summed
#: per term on every one (SciFact nDCG@10 0.633 -> 0.691).
BM25_FIELDS: tuple[str, ...] = ("title", "text")
TIE_BREAKER = 0.5
#: What a read of a document leaves out of its ``_source``: vectors, a long document's passages' texts (their
#: offsets stay: storage._search.enrich cuts the passages shown from the document's text) and its agreement
#: (the index's own figure, storage.passages: not the caller's document).
SOURCE_EXCLUDES: tuple[str, ...] = (
    "embedding",
    "passages.vector",
    "passages.text",
    "passages.title",
    "passage_agreement",
)
_SOURCE = {"excludes": list(SOURCE_EXCLUDES)}
#: A total order for paging on a point-in-time: score, then the PIT's own cheap tiebreaker.
PIT_SORT: list[dict[str, str]] = [{"_score": "desc"}, {"_shard_doc": "asc"}]
_HIGHLIGHT_TEXT = {"fragment_size": 160, "number_of_fragments": 2}
#: Elasticsearch's default ``index.highlight.max_analyzed_offset``: the characters of a text its highlighter
#: reads. A search whose fetch shows a longer text **fails** unless the request sets ``max_analyzed_offset``
#: (at most the index's own limit), which makes the highlighter read the first that many and stop.
HIGHLIGHT_LIMIT = 1_000_000


def bm25_request(
    text: str,
    *,
    scope: Scope,
    size: int,
    fields: Sequence[str] = BM25_FIELDS,
    clause: dict[str, Any] | None = None,
    passage_text: bool = False,
    head_vectors: bool = False,
) -> dict[str, Any]:
    """Keyword arguments for ``AsyncElasticsearch.search``: BM25 over ``fields`` inside ``bool.filter``.

    ``simple_query_string`` with only PHRASE and WHITESPACE: ``"exact phrase"`` works, every other
    character is literal, and no user text can cause a parse error. ``clause`` replaces it with a clause
    built by :mod:`storage._dsl.syntax` (the opt-in query syntax).

    Ids and scores only (no ``_source``, no highlights): the documents of the hits that are shown come from
    one :func:`fetch_request` after fusion. The scope's doc values (the tenant, for the second check) ride
    along cheaply.

    ``passage_text``: the index holds each passage's text (``storage._dsl.mapping``): a long document whose
    words meet in one section ranks above one that scatters them. A passage is read for its words only (its
    text has no positions since mapping version 7): a quoted phrase counts as a phrase in the whole text and
    as its words in a passage. In an index with flat heads
    (``head_vectors``: mapping version 4, where only long documents have passages) a document scores by the
    better of its whole text and its best passage (a ``dis_max``): a short document by its text, as without
    passages, and a long one by its best part of about a window's length, comparable with a short one. In an
    index before version 4 (every document has passages, the head among them) by its whole text **plus** its
    best passage (the same query over the passages' title and text, the best one's score).
    """
    query = _bm25_query(text, scope, fields, clause, passage_text=passage_text, best_of=head_vectors)
    return _ids_only({"query": query, "size": size}, scope.doc_values)


#: The fields of each passage that BM25 reads (a passage's title is its document's).
PASSAGE_FIELDS: tuple[str, ...] = ("passages.title", "passages.text")


def _bm25_query(
    text: str,
    scope: Scope,
    fields: Sequence[str],
    clause: dict[str, Any] | None,
    *,
    passage_text: bool = False,
    best_of: bool = False,
) -> dict[str, Any]:
    if clause is None and passage_text and fields == BM25_FIELDS:
        # (since mapping version 4 a passage holds its text only: its title is its document's)
        passage_fields = PASSAGE_FIELDS[1:] if best_of else PASSAGE_FIELDS
        # (a passage's text is indexed for its words, without positions: a quoted phrase is read as its words
        # there, and counts as a phrase in the whole text)
        words = text.replace('"', " ")
        best = {"nested": {"path": "passages", "score_mode": "max", "query": _keywords(words, passage_fields)}}
        whole = _keywords(text, fields)
        if best_of:
            return {"bool": {"must": [{"dis_max": {"queries": [whole, best]}}], "filter": list(scope.clauses)}}
        return {"bool": {"should": [whole, best], "minimum_should_match": 1, "filter": list(scope.clauses)}}
    return {"bool": {"must": [clause or _keywords(text, fields)], "filter": list(scope.clauses)}}


def group_tail_requests(
    text: str,
    *,
    scope: Scope,
    clause: dict[str, Any] | None,
    field: str,
    exclude: Sequence[str],
    per_group: int,
    passage_text: bool = False,
    head_vectors: bool = False,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The two streams of a grouped walk's tail (``storage._paging.groups``), without size or position:

    - the BM25 matches that have a value of ``field`` outside ``exclude`` (the head's groups), **collapsed**:
      one hit per value (its best), best first, with the value's best ``per_group`` hits and their count;
    - the BM25 matches without a value (each a group of its own), in BM25 order.
    """
    grouped = _bm25_query(text, scope, BM25_FIELDS, clause, passage_text=passage_text, best_of=head_vectors)
    grouped["bool"]["filter"] = [*grouped["bool"]["filter"], {"exists": {"field": field}}]
    if exclude:
        grouped["bool"]["must_not"] = [{"terms": {field: list(exclude)}}]
    inner: dict[str, Any] = {"name": "best", "size": per_group, "_source": False}
    if scope.doc_values:
        inner["docvalue_fields"] = list(scope.doc_values)
    collapsed = _ids_only({"query": grouped}, scope.doc_values)
    collapsed["collapse"] = {"field": field, "inner_hits": inner}
    loose = _bm25_query(text, scope, BM25_FIELDS, clause, passage_text=passage_text, best_of=head_vectors)
    loose["bool"]["must_not"] = [{"exists": {"field": field}}]
    return collapsed, _ids_only({"query": loose}, scope.doc_values)


def bm25_fuzzy_request(text: str, *, scope: Scope, size: int, fields: Sequence[str] = BM25_FIELDS) -> dict[str, Any]:
    """The zero-result retry: the same terms with ``fuzziness: AUTO`` (1 edit from 3 letters, 2 from 6),
    the first letter fixed (misspellings rarely change it, and it keeps the expansion cheap)."""
    match = {
        "multi_match": {
            "query": text,
            "fields": list(fields),
            "fuzziness": "AUTO",
            "prefix_length": 1,
            "max_expansions": 50,
            "operator": "or",
            "tie_breaker": TIE_BREAKER,
            "lenient": True,
        }
    }
    query = {"bool": {"must": [match], "filter": list(scope.clauses)}}
    return _ids_only({"query": query, "size": size}, scope.doc_values)


def _ids_only(body: dict[str, Any], docvalue_fields: Sequence[str]) -> dict[str, Any]:
    body["source"] = False
    body["track_total_hits"] = False
    if docvalue_fields:
        body["docvalue_fields"] = list(docvalue_fields)
    return body


#: num_candidates of a kNN restricted to a few ids (the fetch's passages, the similarity probe): the most
#: Elasticsearch takes. The filter leaves fewer, so the search is exact whether candidates count documents
#: (8.13+) or passages (8.12).
EXACT_CANDIDATES = 10_000
#: Head first (``passage_weight`` below 1): the passages' kNN clause gathers this share of the heads'
#: candidates. There a passage decides a document only where it beats the head by the weight's margin, i.e.
#: among the passages nearest the query, which a shorter list still holds; the passages' graph (several
#: vectors a long document) is where a kNN search of an index with passages spends most. Not applied to an
#: exact search (:data:`EXACT_CANDIDATES`). Measured on both head-first collections: docs/benchmarks.md.
HEAD_FIRST_PASSAGE_CANDIDATES = 0.5


def fetch_request(
    text: str,
    ids: Sequence[str],
    *,
    highlight: bool,
    scope: Scope,
    fields: Sequence[str] = BM25_FIELDS,
    clause: dict[str, Any] | None = None,
    passages_for: tuple[Sequence[float], int] | None = None,
    highlight_limit: int = HIGHLIGHT_LIMIT,
) -> dict[str, Any]:
    """The second phase: the documents of given ids and, if ``highlight``, their highlights for the query
    (``clause``, or ``text`` over ``fields``: the BM25 leg's own query, so the fragments are the ones it would
    have made; a leading snippet where no term matches, e.g. a hit only the kNN leg found). The scope (the
    search's filters, tenant included) applies again, so the fetch can never return more than the legs. The
    highlighter reads the first ``highlight_limit`` characters of each text (the target's own
    ``index.highlight.max_analyzed_offset``: one longer text would otherwise fail the whole fetch).

    ``passages_for`` (the query's vector, how many): each long document's best passages for that vector, as
    inner hits — a nested kNN query filtered to these ids, which Elasticsearch answers exactly (the filter
    leaves fewer documents than candidates: from 8.13 candidates count documents, before they count passages,
    so the most a query may ask for, 10,000, keeps it exact there too), so only the passages of the hits shown
    are read."""
    ids = list(ids)
    query: dict[str, Any] = {"bool": {"filter": [{"ids": {"values": ids}}, *scope.clauses]}}
    body: dict[str, Any] = {"query": query, "size": len(ids), "source": _SOURCE, "track_total_hits": False}
    should: list[dict[str, Any]] = []
    if passages_for is not None:
        vector, shown = passages_for
        knn = {"field": PASSAGE_VECTOR, "query_vector": list(vector), "num_candidates": EXACT_CANDIDATES}
        # (ids alone match the nested passages too on servers before 8.13, which refuse that as a parent filter;
        # every document has a flat head, no passage has one)
        knn["filter"] = [{"ids": {"values": ids}}, {"exists": {"field": "embedding"}}]
        nested = {"path": "passages", "score_mode": "max", "query": {"knn": knn}, "inner_hits": _inner_hits(shown)}
        should.append({"nested": nested})
    if highlight:
        should.append(clause or _keywords(text, fields))
        spec = _highlight()
        spec["fields"]["text"] = {**_HIGHLIGHT_TEXT, "no_match_size": 160}
        spec["max_analyzed_offset"] = highlight_limit
        body["highlight"] = spec
    if should:
        query["bool"]["should"] = should
    return body


def _keywords(text: str, fields: Sequence[str]) -> dict[str, Any]:
    """One ``simple_query_string`` per field under a ``dis_max`` (``best_fields`` scoring that keeps the
    ``"exact phrase"`` syntax); one field needs no ``dis_max``."""
    per_field = [
        {
            "simple_query_string": {
                "query": text,
                "fields": [field],
                "default_operator": "or",
                "flags": "PHRASE|WHITESPACE",
                "lenient": True,
            }
        }
        for field in fields
    ]
    if len(per_field) == 1:
        return per_field[0]
    return {"dis_max": {"queries": per_field, "tie_breaker": TIE_BREAKER}}


def _highlight() -> dict[str, Any]:
    return {"fields": {"title": {"number_of_fragments": 0}, "text": dict(_HIGHLIGHT_TEXT)}}


def knn_request(
    vector: Sequence[float],
    *,
    scope: Scope,
    k: int,
    num_candidates: int,
    similarity: float | None = None,
    passages: int = 0,
    head_vectors: bool = True,
    inner_hits: bool = True,
    passage_weight: float = 1.0,
) -> dict[str, Any]:
    """Keyword arguments for ``AsyncElasticsearch.search``: approximate kNN, filters applied *during* the
    HNSW search (pre-filtering), so it returns ``k`` matching documents when that many exist. Ids and
    scores only, like :func:`bm25_request`.

    ``passages``: the index is read in passages; a document scores by its best vector and brings its best
    ``passages`` along (offsets and scores). With ``head_vectors`` (mapping version 4: every head indexed
    flat, only long documents nested) that is the better of two kNN queries under a ``dis_max`` — the heads'
    flat field and the long documents' passages — in one request; before version 4 every vector is nested
    and one nested kNN section reads them all. Not ``inner_hits`` (with ``head_vectors``): the best passages
    are left to the fetch of the hits shown (:func:`fetch_request`'s ``passages_for``), not found for every
    hit of the leg. ``passage_weight`` (below 1: the index's long documents are read head first,
    ``storage.passages``): what the best passage's score is multiplied by against the head's."""
    if passages and head_vectors:
        shown = passages if inner_hits else 0
        query = _heads_and_passages(vector, scope, max(num_candidates, k), similarity, shown, passage_weight)
        return _ids_only({"query": query, "size": k}, scope.doc_values)
    knn = _knn_section(vector, scope, k, num_candidates, passages=bool(passages))
    if passages:
        knn["inner_hits"] = _inner_hits(passages)
    if similarity is not None:
        knn["similarity"] = similarity
    return _ids_only({"knn": knn, "size": k}, scope.doc_values)


def _knn_section(
    vector: Sequence[float], scope: Scope, k: int, num_candidates: int, *, passages: bool
) -> dict[str, Any]:
    """The top-level ``knn`` section: the ``k`` nearest documents (by their best vector when every vector is
    nested), the scope's filters applied during the HNSW search."""
    knn: dict[str, Any] = {
        "field": PASSAGE_VECTOR if passages else "embedding",
        "query_vector": list(vector),
        "k": k,
        "num_candidates": max(num_candidates, k),
    }
    if scope.clauses:
        knn["filter"] = list(scope.clauses)
    return knn


def _knn_query(
    field: str, vector: Sequence[float], scope: Scope, num_candidates: int, similarity: float | None
) -> dict[str, Any]:
    knn: dict[str, Any] = {"field": field, "query_vector": list(vector), "num_candidates": num_candidates}
    if scope.clauses:
        knn["filter"] = list(scope.clauses)
    if similarity is not None:
        knn["similarity"] = similarity
    return {"knn": knn}


def _heads_and_passages(
    vector: Sequence[float],
    scope: Scope,
    num_candidates: int,
    similarity: float | None,
    shown: int,
    passage_weight: float = 1.0,
) -> dict[str, Any]:
    """A document's best vector, in an index whose heads are flat and whose long documents are nested: the
    heads' kNN query and the passages' (a document: its best passage, and its best ``shown`` passages as
    inner hits; none when ``shown`` is 0), the better score of the two (``dis_max``: a maximum, not a sum),
    the passage's times ``passage_weight`` (below 1, head first: the passages' clause gathers fewer candidates,
    :data:`HEAD_FIRST_PASSAGE_CANDIDATES`)."""
    candidates = num_candidates
    if passage_weight < 1.0 and num_candidates < EXACT_CANDIDATES:
        candidates = max(1, round(num_candidates * HEAD_FIRST_PASSAGE_CANDIDATES))
    nested: dict[str, Any] = {
        "nested": {
            "path": "passages",
            "score_mode": "max",
            "query": _knn_query(PASSAGE_VECTOR, vector, scope, candidates, similarity),
        }
    }
    if shown:
        nested["nested"]["inner_hits"] = _inner_hits(shown)
    if passage_weight != 1.0:
        nested["nested"]["boost"] = passage_weight
    heads = _knn_query("embedding", vector, scope, num_candidates, similarity)
    return {"dis_max": {"queries": [heads, nested]}}


def knn_query_request(
    vector: Sequence[float],
    *,
    scope: Scope,
    depth: int,
    size: int,
    similarity: float | None = None,
    passages: int = 0,
    head_vectors: bool = True,
    passage_weight: float = 1.0,
) -> dict[str, Any]:
    """The ``knn`` *query* (not the top-level section): the ``depth`` nearest documents per shard as an
    ordinary scored query, so a point-in-time walk can page through them with ``search_after``
    (``passage_weight``: as :func:`knn_request`'s)."""
    if passages and head_vectors:
        query = _heads_and_passages(vector, scope, depth, similarity, passages, passage_weight)
    elif passages:  # a nested field's kNN query is asked through the nested query (a document: its best vector)
        inner = _knn_query(PASSAGE_VECTOR, vector, scope, depth, similarity)
        query = {
            "nested": {"path": "passages", "score_mode": "max", "query": inner, "inner_hits": _inner_hits(passages)}
        }
    else:
        query = _knn_query("embedding", vector, scope, depth, similarity)
    return _ids_only({"query": query, "size": size}, scope.doc_values)


#: The vectors of an index read in passages (the head first), and their offsets.
PASSAGE_VECTOR = "passages.vector"
PASSAGE_OFFSETS = ("passages.start", "passages.end")


def _inner_hits(size: int) -> dict[str, Any]:
    """A document's best ``size`` passages that the kNN search reached: their offsets (doc values) and scores."""
    return {"size": size, "_source": False, "docvalue_fields": list(PASSAGE_OFFSETS)}


def count_request(scope: Scope) -> dict[str, Any]:
    """Keyword arguments for ``AsyncElasticsearch.count``: the documents the scope sees."""
    return {"query": {"bool": {"filter": list(scope.clauses)}}}


def ids_request(ids: Sequence[str], scope: Scope) -> dict[str, Any]:
    """Which of ``ids`` the index holds (within the scope): ids only."""
    query = {"bool": {"filter": [{"ids": {"values": list(ids)}}, *scope.clauses]}}
    return {"query": query, "size": len(ids), "source": False, "track_total_hits": False}


def server_side(body: dict[str, Any], *, timeout_s: float, allow_partial: bool) -> dict[str, Any]:
    """``body`` with a server-side ``timeout`` (so Elasticsearch stops work the client has given up on) and,
    when partial results are not allowed, ``allow_partial_search_results: false`` (a request parameter, which
    an ``_msearch`` item moves into its header)."""
    out = {**body, "timeout": f"{max(int(timeout_s * 1_000_000), 1)}micros"}
    if not allow_partial:
        out["allow_partial_search_results"] = False
    return out


def on_pit(
    body: dict[str, Any], pit_id: str, keep_alive: str, search_after: Sequence[Any] | None = None
) -> dict[str, Any]:
    """``body`` run on a point-in-time (no index: the PIT names it), in a total order, ids only."""
    out = {**body, "pit": {"id": pit_id, "keep_alive": keep_alive}, "sort": PIT_SORT, "track_scores": True}
    if search_after is not None:
        out["search_after"] = list(search_after)
    return out


def msearch_body(body: dict[str, Any]) -> dict[str, Any]:
    """A ``search`` keyword-argument body as an ``_msearch`` item body (``source`` is ``_source`` there)."""
    out = dict(body)
    if "source" in out:
        out["_source"] = out.pop("source")
    return out


def facet_request(
    text: str,
    vector: Sequence[float] | None,
    *,
    scope: Scope,
    aggs: dict[str, Any],
    k: int,
    num_candidates: int,
    clause: dict[str, Any] | None = None,
    passages: bool = False,
    head_vectors: bool = True,
) -> dict[str, Any]:
    """Facets over a search's match set (``storage._dsl.aggregations``): no hits, only ``aggs``, over the BM25 query's
    matches (``text`` is not empty) and the ``k`` nearest documents (``vector`` is given) — with both,
    Elasticsearch aggregates over their union. The scope applies to both, as in the legs. In an index whose
    heads are flat (``head_vectors``) the nearest documents are the nearest heads."""
    body: dict[str, Any] = {"size": 0, "track_total_hits": False, "aggs": aggs}
    if text:
        body["query"] = _bm25_query(text, scope, BM25_FIELDS, clause)
    if vector is not None:
        body["knn"] = _knn_section(vector, scope, k, num_candidates, passages=passages and not head_vectors)
    return body
