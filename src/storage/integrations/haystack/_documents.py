"""The Haystack store's documents and errors: what a Haystack ``Document`` keeps in our index (its whole
serialized form, in ``payload``), how a written list is checked, Haystack's filters on the store's fields, and
the errors that are Haystack's and ours at once (a ``FilterError`` and an :class:`~storage.InvalidQuery`...).
Re-exported by :mod:`storage.integrations.haystack`, the package it belongs to."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from typing import Any

from haystack import Document
from haystack.document_stores.errors import DocumentStoreError, DuplicateDocumentError
from haystack.document_stores.types import FilterPolicy
from haystack.errors import FilterError

from ..._dsl.filters import Filter
from ..._errors import ConfigurationError, InvalidDocument, InvalidQuery
from .._dialects import haystack_filters
from .._store import Stored, our_documents

__all__ = [
    "DuplicateDocuments",
    "EmbeddingSizes",
    "FilterNotSupported",
    "NotDocuments",
    "as_filter_error",
    "checked",
    "ours",
    "payload",
    "peer_retriever_options",
    "scaled_score",
    "store_filters",
    "stored_document",
]


class FilterNotSupported(InvalidQuery, FilterError):
    """A Haystack filter that is malformed or that our filter model refuses (names what and why)."""


class DuplicateDocuments(InvalidDocument, DuplicateDocumentError):
    """``write_documents`` with ``DuplicatePolicy.FAIL`` (or ``NONE``) met ids the store holds (or a batch
    that repeats one): nothing was written. ``.ids``: those ids."""

    def __init__(self, ids: Sequence[str], *, written: int = 0) -> None:
        self.ids = list(ids)
        shown = ", ".join(self.ids[:5]) + (" ..." if len(self.ids) > 5 else "")
        what = f"the other {written} were written" if written else "nothing was written"
        super().__init__(
            f"{len(self.ids)} document id(s) already in the store or given twice: {shown}; {what} "
            "(policy=DuplicatePolicy.OVERWRITE replaces them, SKIP leaves them)"
        )


class EmbeddingSizes(InvalidDocument, DocumentStoreError):
    """Documents whose own embeddings differ in length, written together (as the peer's index refuses them)."""


class NotDocuments(InvalidDocument, ValueError):
    """``write_documents`` was given something other than a list of Haystack ``Document`` objects."""


@contextlib.contextmanager
def as_filter_error() -> Iterator[None]:
    try:
        yield
    except FilterNotSupported:
        raise
    except InvalidQuery as exc:
        raise FilterNotSupported(str(exc)) from None


def store_filters(filters: dict[str, Any] | None) -> list[Filter] | None:
    """Haystack's filter syntax, for a store (fields ``id`` and ``meta.<key>``), as our filters."""
    with as_filter_error():
        ours = haystack_filters(filters, store=True)
    return ours if isinstance(ours, list) else None


#: The key of a Haystack document's serialized form in our ``payload``.
_PAYLOAD_KEY = "haystack"


def stored_document(found: Stored, *, scale_score: bool = False) -> Document:
    """A stored Haystack document as it was written (with the hit's score), or one our own API wrote.
    ``scale_score``: the score in [0, 1] (:func:`scaled_score`) instead of the one that ordered the list."""
    score = scaled_score(found) if scale_score else found.score
    kept = found.metadata.get(_PAYLOAD_KEY)
    if isinstance(kept, dict) and set(found.metadata) == {_PAYLOAD_KEY}:
        return Document.from_dict({**kept, "score": score})
    return Document(id=found.id, content=found.content, meta=found.metadata, score=score)


def scaled_score(found: Stored) -> float | None:
    """A hit's score in [0, 1], as the peer's retrievers scale theirs (``scale_score=True``): the query's
    similarity to it (Elasticsearch's kNN score) where there are vectors; in ``bm25`` mode the peer's own
    scaling of a BM25 score, a logistic of score / 8."""
    if found.similarity is not None:
        return found.similarity
    if found.bm25_score is not None:
        return 1.0 / (1.0 + math.exp(-found.bm25_score / 8.0))
    return found.relevance


def payload(doc: Document) -> dict[str, Any]:
    """What a Haystack document keeps in our ``payload``: the whole of it (but a search's score)."""
    return {_PAYLOAD_KEY: {**doc.to_dict(flatten=False), "score": None}}


def ours(documents: Sequence[Document]) -> list[Any]:
    return our_documents([(d.id, d.content or "", d.meta) for d in documents], [payload(d) for d in documents])


def checked(documents: Any) -> list[Document]:
    if not isinstance(documents, list):
        raise NotDocuments(
            f"param 'documents' must contain a list of objects of type Document, got {type(documents).__name__}"
        )
    for position, d in enumerate(documents):
        if not isinstance(d, Document):
            raise NotDocuments(
                f"param 'documents' must contain a list of objects of type Document: document {position} is a "
                f"{type(d).__name__}",
                position=position,
            )
    sizes = {len(d.embedding) for d in documents if d.embedding is not None}
    if len(sizes) > 1:
        raise EmbeddingSizes(f"the documents' own embeddings differ in length ({sorted(sizes)}): nothing written")
    return documents


def peer_retriever_options(options: dict[str, Any]) -> tuple[FilterPolicy, bool]:
    """The peer retrievers' own arguments, taken out of ``options``: ``filter_policy`` (a ``FilterPolicy`` or
    its name), ``scale_score``, and ``fuzziness`` — taken when it is 0 (words as written, as here), refused
    otherwise with what to pass instead."""
    policy = options.pop("filter_policy", FilterPolicy.REPLACE)
    if not isinstance(policy, FilterPolicy):
        try:
            policy = FilterPolicy.from_str(str(policy))
        except ValueError:
            raise ConfigurationError(f"filter_policy must be 'replace' or 'merge', got {policy!r}") from None
    scale = options.pop("scale_score", False)
    if not isinstance(scale, bool):
        raise ConfigurationError(f"scale_score must be True or False, got {scale!r}")
    fuzziness = options.pop("fuzziness", 0)
    if str(fuzziness) != "0":
        raise ConfigurationError(
            f"fuzziness={fuzziness!r} is not taken: this store's BM25 matches the words as written (pass "
            "fuzziness=0, or leave it out); recover=True retries a query that finds nothing with fuzzy matching"
        )
    return policy, scale


# The errors are the public module's, where users import and catch them (their tracebacks say so).
for _error in (DuplicateDocuments, EmbeddingSizes, FilterNotSupported, NotDocuments):
    _error.__module__ = "storage.integrations.haystack"
