"""The engine: one module per stage, each with one input and one output, and the entry points every read
path is built on (``engine.py``).

::

    SearchRequest
      │  plan.py      validation, defaults, fusion in force, scope (filters + tenant) (pure)  → Plan
      ▼
    retrieve.py       the legs: BM25 ∥ kNN (or one _msearch; or on a point-in-time), budgets   → LegOutcome per leg
      ▼
    fuse.py           failed-leg policy, rank fusion, tenant re-check (pure)                  → Fused
      ▼
    rerank.py         optional: the top candidates re-scored, fallback to fusion              → Ranked
      ▼
    enrich.py         the page's documents and highlights (one fetch)                         → hit fields
      ▼
    respond.py        the SearchResponse, the log event, the span (pure)                      → SearchResponse

``engine.py`` wires them; ``state.py`` is the per-request object that travels along (never stored on the
shared client).
"""

from .engine import Engine
from .fuse import Fused, pit_missing
from .plan import Plan
from .state import LegOutcome

__all__ = ["Engine", "Fused", "LegOutcome", "Plan", "pit_missing"]
