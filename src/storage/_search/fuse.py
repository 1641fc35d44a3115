"""Stage 3, **fuse**: the legs' outcomes in, one ranked list out. Pure: no I/O.

Decides first whether there is anything to fuse: every leg failed (or one did with ``strict=True``) is a
:class:`SearchFailed` (or the set-up error they share). Then the surviving legs are fused
(:func:`storage._fusion.methods.fused_list`), and the second tenant check (``storage._dsl.tenancy``) drops any hit of
another tenant.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .._dsl.tenancy import keep_tenant, tenants_of
from .._errors import (
    ClientClosed,
    ConfigurationError,
    DependencyError,
    IndexNotFound,
    PartialResults,
    SearchError,
    SearchFailed,
)
from .._fusion.methods import FusedList, fused_list
from .plan import Plan
from .state import LegOutcome

__all__ = ["Fused", "fuse_legs", "pit_missing", "raise_if_failed"]


@dataclass(frozen=True, slots=True)
class Fused:
    """The fused candidates with what the later stages need about them."""

    #: Best first; hit objects are built when read (a page of ten out of up to 2 × window).
    hits: FusedList
    #: Documents both legs found.
    overlap: int
    #: leg -> its error, for the legs that failed (the result is then degraded).
    failed: dict[str, SearchError]
    #: Hits of another tenant the second check dropped (logged as an error by the engine; should be 0).
    dropped: int = 0


def raise_if_failed(plan: Plan, outcomes: Mapping[str, LegOutcome]) -> None:
    """Nothing acceptable to fuse: every leg failed, or one did (or answered from only some shards) and the
    search is strict. A partial leg is not a failed leg: it takes part in fusion, the response says
    ``partial``."""
    failed = {leg: o.error for leg, o in outcomes.items() if o.error is not None}
    if not failed or not (plan.strict or len(failed) == len(outcomes)):
        partial = {leg: o.shards for leg, o in outcomes.items() if o.partial}
        if partial and plan.strict:
            raise PartialResults(
                "; ".join(
                    f"{leg} leg answered from {s.successful} of {s.total} shards" for leg, s in partial.items() if s
                )
                + " (strict=True does not accept partial results)",
                shards=partial,
            )
        return
    errors = list(failed.values())
    if all(isinstance(e, IndexNotFound) for e in errors):
        raise errors[0]
    if expired := [e for e in errors if pit_missing(e)]:
        raise expired[0]  # a walk's point-in-time expired: the caller says so (CursorExpired)
    if all(isinstance(e, ConfigurationError) for e in errors):
        raise errors[0]  # credentials, privileges, TLS: a set-up problem, not a search outcome
    if closed := [e for e in errors if isinstance(e, ClientClosed)]:
        raise closed[0]  # closing is the caller's act, not a dependency failure
    every = len(failed) == len(outcomes)
    messages = {str(err) for err in errors}
    if len(failed) > 1 and len(messages) == 1:  # one cause (Elasticsearch down): said once
        raise SearchFailed(f"every leg failed: {messages.pop()}", leg_errors=failed)
    said = "; ".join(f"{leg} leg failed: {err}" for leg, err in failed.items())
    raise SearchFailed(
        said if every else f"{said} (strict: a failed leg fails the search)", leg_errors=failed, every_leg=every
    )


def fuse_legs(plan: Plan, outcomes: Mapping[str, LegOutcome]) -> Fused:
    """Fuse the legs that succeeded (call :func:`raise_if_failed` first)."""
    failed = {leg: o.error for leg, o in outcomes.items() if o.error is not None}
    ok = {leg: o for leg, o in outcomes.items() if o.error is None}
    hits = fused_list(
        {leg: (o.ids, o.scores) for leg, o in ok.items()},
        method=plan.method,
        k=plan.k,
        weights={leg: plan.weights[leg] for leg in ok},
    )
    overlap = hits.overlap()
    dropped = 0
    if plan.tenant_id is not None:
        hits, dropped = keep_tenant(hits, tenants_of(h for o in ok.values() for h in o.kept()), plan.tenant_id)
    return Fused(hits=hits, overlap=overlap, failed=failed, dropped=dropped)


def pit_missing(error: SearchError) -> bool:
    """Elasticsearch's answer for an expired or closed point-in-time."""
    return isinstance(error, DependencyError) and error.status == 404 and "search_context_missing" in str(error)
