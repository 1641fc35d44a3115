"""One request type per operation: what a search, a page of a walk, an answer and an ingest ask for. Pure.

Each operation's keyword list is written once, here. The client's methods take exactly these arguments
(:func:`operation` gives each method its request type's signature, so ``client.search("q", limit=5)`` is
type-checked against :class:`SearchRequest`), or one request object (``client.search(SearchRequest("q"))``);
the services below the client take the object. ``None`` means "the client's setting". Frozen: a request can
be kept, logged or run again as it is.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any, Generic, Literal, ParamSpec, TypeVar, cast, overload

from ._facets import FacetSpec
from ._filters import FilterInput
from ._fusion import FusionMethod
from ._models import Document, IndexProgress, SearchMode
from ._prompt import AnswerPrompt

__all__ = [
    "AnswerRequest",
    "IngestRequest",
    "PageRequest",
    "ProgressCallback",
    "QuerySyntax",
    "RoundTrip",
    "SearchRequest",
    "operation",
]

#: ``plain``: the text as words and "phrases" (default); ``boolean``: the query syntax of storage._syntax.
QuerySyntax = Literal["plain", "boolean"]
#: How a hybrid search reaches Elasticsearch: two concurrent requests, or one ``_msearch``.
RoundTrip = Literal["parallel", "msearch"]
#: Called with an :class:`IndexProgress` as documents are embedded and written.
ProgressCallback = Callable[[IndexProgress], None]


@dataclass(frozen=True)
class SearchRequest:
    """Everything one search asks for (see :meth:`SearchClient.search`)."""

    query: str
    _: KW_ONLY
    #: ``hybrid`` (both legs, fused), ``bm25`` or ``knn``.
    mode: SearchMode = "hybrid"
    #: One filter model for both legs: ``{"ticker": "AAPL", "published_at": {"gte": "2024-01-01"}}``.
    filters: FilterInput = None
    limit: int = 10
    offset: int = 0
    #: The tenant every result belongs to (required by a multi-tenant client).
    tenant_id: str | None = None
    fusion: FusionMethod | None = None
    rrf_k: int | None = None
    weights: Mapping[str, float] | None = None
    #: Candidates per leg fused; ``offset + limit`` must fit inside it.
    window: int | None = None
    num_candidates: int | None = None
    similarity: float | None = None
    #: A failed leg (or partial shards) raises instead of degrading the result.
    strict: bool = False
    highlight: bool = True
    #: Explicit index or alias names (comma-separated) instead of the client's alias.
    index: str | None = None
    #: Retry an empty BM25 leg with fuzzy matching.
    recover: bool = False
    #: Wider filter sets tried in order while nothing is found (the tenant is kept in each).
    scopes: Sequence[FilterInput] | None = None
    round_trip: RoundTrip | None = None
    syntax: QuerySyntax = "plain"
    rerank: bool | None = None
    rerank_candidates: int | None = None
    #: Counts over what the query matched, computed alongside the legs (``storage._facets``): ``"ticker"``,
    #: ``"published_at:month"``, ``"metadata.region"``, or :class:`~storage.FacetSpec` objects.
    facets: Sequence[str | FacetSpec] | None = None
    #: Collapse the ranked list to the best ``per_group`` hits of each value of this field (``ticker``,
    #: ``source``, ``doc_type`` or ``metadata.<key>``); ``limit`` and ``offset`` then count groups.
    group_by: str | None = None
    per_group: int = 1
    #: 0 (today's order) to 1: maximal marginal relevance over the ranked window, so near-duplicates do not
    #: fill a page.
    diversity: float = 0.0


@dataclass(frozen=True)
class PageRequest:
    """One page of a stable walk through the fused results (see :meth:`SearchClient.search_page`)."""

    query: str
    _: KW_ONLY
    #: ``page.next_cursor`` of the previous page; None starts a walk.
    cursor: str | None = None
    mode: SearchMode = "hybrid"
    filters: FilterInput = None
    tenant_id: str | None = None
    page_size: int = 10
    #: Each leg's depth fused into the walk's head (default ``settings.paging_depth``).
    depth: int | None = None
    fusion: FusionMethod | None = None
    rrf_k: int | None = None
    weights: Mapping[str, float] | None = None
    highlight: bool = True
    index: str | None = None
    syntax: QuerySyntax = "plain"
    #: Walk groups instead of hits (see :meth:`SearchClient.search_page`): ``page_size`` counts groups, and
    #: a group never comes back on a later page.
    group_by: str | None = None
    per_group: int = 1


@dataclass(frozen=True)
class AnswerRequest:
    """An answer with citations (see :meth:`SearchClient.answer`)."""

    question: str
    _: KW_ONLY
    mode: SearchMode = "hybrid"
    filters: FilterInput = None
    tenant_id: str | None = None
    #: Hits retrieved for the context (default ``settings.answer_limit``).
    limit: int | None = None
    rerank: bool | None = None
    #: The context's characters at most (default ``settings.answer_context_chars``).
    max_context_chars: int | None = None
    #: The whole call's deadline (default ``settings.answer_timeout_s``).
    timeout_s: float | None = None
    strict: bool = False
    index: str | None = None
    prompt: AnswerPrompt | None = None
    #: 0 to 1: the context's entries chosen by maximal marginal relevance (fewer copies of one story).
    diversity: float = 0.0


@dataclass(frozen=True)
class IngestRequest:
    """Documents to embed and index (see :meth:`SearchClient.index_documents`)."""

    documents: Iterable[Document | Mapping[str, Any]]
    _: KW_ONLY
    #: Wait until the documents are searchable.
    refresh: bool = False
    progress: ProgressCallback | None = None
    #: Another index (a new version) or alias to write to; default the client's alias.
    index: str | None = None
    #: Stamp every document with this tenant (a document of another tenant is refused).
    tenant_id: str | None = None
    #: The first invalid document raises and nothing is sent (else it is reported and the rest indexed).
    strict: bool = False
    #: False: write only documents whose id the index does not hold (Elasticsearch's ``create``: atomic, so two
    #: writers racing on one id cannot both win); one it holds is reported failed with reason ``exists``.
    overwrite: bool = True


P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")
S = TypeVar("S")


class BoundOperation(Generic[P, R, T]):
    """A client's operation: called with its request type's arguments, or with one request object."""

    def __init__(self, run: Callable[[R], T], make: Callable[P, R], doc: str | None, sig: Any) -> None:
        self._run, self._make, self._type = run, make, make
        self.__doc__, self.__signature__ = doc, sig

    @overload
    def __call__(self, request: R, /) -> T: ...
    @overload
    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> T: ...
    def __call__(self, *args: Any, **kwargs: Any) -> T:
        if kwargs or len(args) != 1 or type(args[0]) is not self._type:
            return self._run(self._make(*args, **kwargs))
        return self._run(cast(R, args[0]))


class Operation(Generic[S, P, R, T]):
    """A method taking one request object, exposed with the request type's signature (see :func:`operation`).
    The bound operation is made once per client and kept in its ``__dict__`` (a non-data descriptor, like
    ``functools.cached_property``): a call costs what a method call costs, plus one check."""

    def __init__(self, make: Callable[P, R], method: Callable[[S, R], T]) -> None:
        self._make, self._method = make, method
        functools.update_wrapper(cast(Callable[..., Any], self), method)
        params = list(inspect.signature(cast(Callable[..., Any], make)).parameters.values())
        self._signature = inspect.Signature(params)
        # On the class (help(), inspect.signature, API docs), the method's own parameters: self, then the
        # request type's. Set here, so inspect stops at it instead of unwrapping to ``method(self, request)``.
        self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
        self.__signature__ = inspect.Signature([self_param, *params])
        self._name = method.__name__

    def __set_name__(self, owner: type[S], name: str) -> None:
        self._name = name

    def __call__(self, obj: S, /, *args: Any, **kwargs: Any) -> T:
        """Called through the class (``SearchClient.search(client, "q")``), as a plain method would be."""
        bound: BoundOperation[P, R, T] = self.__get__(obj, type(obj))
        return bound(*args, **kwargs)

    @overload
    def __get__(self, obj: None, owner: type[S]) -> Operation[S, P, R, T]: ...
    @overload
    def __get__(self, obj: S, owner: type[S]) -> BoundOperation[P, R, T]: ...
    def __get__(self, obj: S | None, owner: type[S]) -> Any:
        if obj is None:
            return self
        run = self._method.__get__(obj, owner)
        bound = BoundOperation(run, self._make, self._method.__doc__, self._signature)
        obj.__dict__[self._name] = bound
        return bound


def operation(make: Callable[P, R]) -> Callable[[Callable[[S, R], T]], Operation[S, P, R, T]]:
    """Give a method ``m(self, request: R)`` (a coroutine function, or one returning an async iterator) the
    signature of ``R``'s constructor: callers pass the request's arguments (checked by mypy against ``R``), or
    one ``R``."""

    def wrap(method: Callable[[S, R], T]) -> Operation[S, P, R, T]:
        return Operation(make, method)

    return wrap
