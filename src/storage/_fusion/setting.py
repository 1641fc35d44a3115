"""The fusion setting a search uses: its parameters, where each comes from, and its stored form. Pure.

A setting is a method, RRF ``k``, per-leg weights and the candidate window (:class:`FusionSetting`). Each
parameter of a search's setting comes from the first of (highest precedence first):

1. ``call``: the search's own argument (``fusion=``, ``rrf_k=``, ``weights=``, ``window=``);
2. ``settings``: a setting given explicitly (``ES_FUSION``..., or a field passed to ``SearchSettings``);
3. ``index``: the setting stored with the index (``_meta.fusion``, written by ``tune(apply=True)``);
4. ``default``: the library's defaults (RRF, k=10, 1:1, window 50; see ``storage._fusion.methods``).

The cache of stored settings (what each client read from each index, refreshed in the background) is the
I/O side: ``storage._transport.targets``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, get_args

from .._dsl.mapping import index_meta
from .methods import DEFAULT_RRF_K, FusionMethod

__all__ = [
    "DEFAULT_WINDOW",
    "FusionInForce",
    "FusionSetting",
    "FusionSource",
    "configured_fusion",
    "fusion_in_force",
    "stored_setting",
]

#: Candidates per leg fused by default: the systems this replaces fetched 50 per leg, and on four collections
#: no window beat it by more than the build-to-build noise (docs/benchmarks.md).
DEFAULT_WINDOW = 50
#: Where a search's fusion parameter came from, highest precedence first; ``limit``: the window widened to
#: hold ``offset + limit`` (a call that asks for more results than the window, and passes no window of its own).
FusionSource = Literal["call", "settings", "index", "default", "limit"]
#: The fusion parameters, each with what a stored or explicit setting names it.
PARAMETERS: tuple[str, ...] = ("method", "k", "weights", "window")
_METHODS: tuple[str, ...] = get_args(FusionMethod)


@dataclass(frozen=True, slots=True)
class FusionSetting:
    """One fusion setting: what a search fuses with (and what a tuned index stores)."""

    method: FusionMethod = "rrf"
    k: int = DEFAULT_RRF_K
    bm25_weight: float = 1.0
    knn_weight: float = 1.0
    window: int = DEFAULT_WINDOW

    @property
    def weights(self) -> dict[str, float]:
        return {"bm25": self.bm25_weight, "knn": self.knn_weight}

    def label(self) -> str:
        k = f" k={self.k}" if self.method == "rrf" else ""
        return f"{self.method}{k} window={self.window} bm25:knn={self.bm25_weight:g}:{self.knn_weight:g}"

    def to_meta(self) -> dict[str, Any]:
        """The stored form (an index's ``_meta.fusion``)."""
        return {"method": self.method, "k": self.k, "weights": self.weights, "window": self.window}

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any]) -> FusionSetting:
        """A stored setting (an index's ``_meta.fusion``); ``ValueError`` when it is not a valid one."""
        if not isinstance(meta, Mapping):
            raise ValueError(f"not a fusion setting: {meta!r}")
        method, weights = meta.get("method"), meta.get("weights") or {}
        if method not in _METHODS or not isinstance(weights, Mapping):
            raise ValueError(f"not a fusion setting: {dict(meta)!r}")
        setting = cls(
            method=method,
            k=int(meta.get("k", DEFAULT_RRF_K)),
            bm25_weight=float(weights.get("bm25", 1.0)),
            knn_weight=float(weights.get("knn", 1.0)),
            window=int(meta.get("window", DEFAULT_WINDOW)),
        )
        values = (setting.bm25_weight, setting.knn_weight)
        if setting.k < 1 or not 1 <= setting.window <= 10_000 or not all(0 <= w < math.inf for w in values):
            raise ValueError(f"not a fusion setting: {dict(meta)!r}")
        return setting


class FusionInForce(NamedTuple):
    """The fusion a search uses and where each of its parameters came from (``sources``: ``method``, ``k``,
    ``weights``, ``window`` -> :data:`FusionSource`). A tuple: ``setting, sources = ...`` unpacks it."""

    setting: FusionSetting
    sources: dict[str, FusionSource]


def configured_fusion(
    configured: FusionSetting, explicit: frozenset[str], stored: FusionSetting | None
) -> FusionInForce:
    """The fusion below the call: each parameter from the client's settings when set explicitly (its name in
    ``explicit``; ``configured`` holds their values), else the setting stored with the index, else the
    default (``configured``'s value, the settings' default). The same for every search of a client and a
    stored value (the engine keeps it)."""
    sources: dict[str, FusionSource] = {
        param: "settings" if param in explicit else "index" if stored is not None else "default" for param in PARAMETERS
    }
    index = stored if stored is not None else FusionSetting()

    def pick(param: str) -> FusionSetting:
        return index if sources[param] == "index" else configured

    weights = pick("weights")
    setting = FusionSetting(
        method=pick("method").method,
        k=pick("k").k,
        bm25_weight=weights.bm25_weight,
        knn_weight=weights.knn_weight,
        window=pick("window").window,
    )
    return FusionInForce(setting, sources)


def fusion_in_force(
    below: FusionInForce,
    *,
    method: FusionMethod | None = None,
    k: int | None = None,
    weights: Mapping[str, float] | None = None,
    window: int | None = None,
) -> FusionInForce:
    """The fusion a search uses, parameter by parameter: the call's argument, else ``below`` (see
    :func:`configured_fusion`). The call's weights (a partial override, validated by the plan) are not merged
    in here; their source is."""
    base, sources_below = below
    if method is None and k is None and weights is None and window is None:
        return below  # (shared, never written to)
    sources = dict(sources_below)
    for param, value in (("method", method), ("k", k), ("weights", weights), ("window", window)):
        if value is not None:
            sources[param] = "call"
    setting = FusionSetting(
        method=method or base.method,
        k=k if k is not None else base.k,
        bm25_weight=base.bm25_weight,
        knn_weight=base.knn_weight,
        window=window if window is not None else base.window,
    )
    return FusionInForce(setting, sources)


def stored_setting(mappings: Mapping[str, Any]) -> FusionSetting | None:
    """The fusion setting stored in a get-mapping (or get-index) answer: the newest version's that is valid."""
    for name in sorted(mappings, reverse=True):
        meta = index_meta(mappings, name).get("fusion")
        if isinstance(meta, dict):
            try:
                return FusionSetting.from_meta(meta)
            except (TypeError, ValueError):
                continue
    return None
