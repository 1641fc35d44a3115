"""The search pipeline: one module per stage, each with one input and one output.

::

    SearchRequest
      │  plan.py      validation, defaults, filters, query syntax (pure)          → Plan
      ▼
    retrieve.py       the legs: BM25 ∥ kNN (or one _msearch), budgets, recovery    → LegOutcome per leg
      ▼
    fuse.py           failed-leg policy, rank fusion, tenant re-check (pure)       → Fused
      ▼
    rerank.py         optional: the top candidates re-scored, fallback to fusion   → Ranked
      ▼
    enrich.py         the page's documents and highlights (one fetch)          → hit fields
      ▼
    respond.py        the SearchResponse, the log event, the span (pure)           → SearchResponse

``pipeline.py`` wires them; ``state.py`` is the per-request object that travels along (never stored on
the shared client).
"""

from .pipeline import SearchPipeline
from .plan import Plan, QuerySyntax, SearchRequest

__all__ = ["Plan", "QuerySyntax", "SearchPipeline", "SearchRequest"]
