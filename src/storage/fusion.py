"""Rank fusion as a library: what a search does to its two ranked lists, for use on lists of your own
(evaluation, the workbench's re-fusion). Pure: lists in, a new list out.

``fuse(legs, method=..., k=..., weights=...)`` fuses each leg's ranked :class:`LegHit` list into
:class:`FusedHit` objects; a :class:`FusionSetting` names a method and its parameters (what ``tune`` stores
with an index), :data:`FusionSource` says where a search's parameter came from, and
:class:`FusionInForce` is what ``client.indices.fusion_in_force()`` answers: the setting and those sources.
"""

from ._fusion.methods import DEFAULT_RRF_K, FusedHit, FusionMethod, LegHit, fuse
from ._fusion.setting import FusionInForce, FusionSetting, FusionSource

__all__ = [
    "DEFAULT_RRF_K",
    "FusedHit",
    "FusionInForce",
    "FusionMethod",
    "FusionSetting",
    "FusionSource",
    "LegHit",
    "fuse",
]
