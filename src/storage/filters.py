"""One filter model for both legs of a search (and the framework stores' filters): the list form.

A mapping is the short form (``{"ticker": "AAPL", "published_at": {"gte": "2024-01-01"}}``: every key must
match); these objects say the rest — a term, any of several, a range, a field being present, and any of them
combined with :class:`AllOf`, :class:`AnyOf` and :class:`Not`, nested. ``metadata.<key>`` values are compared
by the type the filter gives (a number, a date, a string). See ``storage._dsl.filters`` for the rules.
"""

from ._dsl.filters import AllOf, AnyOf, Exists, Filter, FilterInput, Not, Range, Term, Terms

__all__ = ["AllOf", "AnyOf", "Exists", "Filter", "FilterInput", "Not", "Range", "Term", "Terms"]
