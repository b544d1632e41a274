"""What the boards already make public about an operator, for its problem page: its phase,
each shape's regime per hardware profile and its importance weight.

These read the hidden tables (metadata, roofline) but hand back only the labels the boards
split by; W, Q, SOL and provenance stay in the web tier's hidden rows.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

from evaluation.catalog.models import HardwareProfile, Operator
from evaluation.catalog.selectors import DEV_TIER
from evaluation.harness.roofline import roofline_point


@dataclass(frozen=True)
class ShapeLabels:
    shape_id: str
    init_kwargs: dict[str, object]
    input_kwargs: dict[str, object]
    phase: str | None
    regimes: list[str | None]  # one per hardware profile, in the page's order
    dev_tier: bool  # a tiny CPU-check shape, never scored


@dataclass(frozen=True)
class OperatorLabels:
    phase: str | None
    weight: float | None  # in the active weight set; None without one
    weight_version: int | None
    hardware: list[str]
    shapes: list[ShapeLabels]


def operator_labels(operator: Operator) -> OperatorLabels:
    hidden = getattr(operator, "hidden", None)
    metadata = (hidden.metadata if hidden is not None else None) or {}
    shape_meta = metadata.get("shapes") or {}
    profiles = list(HardwareProfile.objects.order_by("name"))
    specs = [p.as_spec() for p in profiles]
    shapes = []
    for shape in operator.shapes.order_by("position"):
        roofline = hidden.shape_roofline(shape.shape_id) if hidden is not None else None
        regimes = [roofline_point(roofline, spec).regime if roofline is not None else None
                   for spec in specs]
        phase = (shape_meta.get(shape.shape_id) or {}).get("phase") or metadata.get("phase")
        shapes.append(ShapeLabels(shape.shape_id, shape.init_kwargs, shape.input_kwargs,
                                  phase, regimes, fnmatch.fnmatchcase(shape.shape_id, DEV_TIER)))
    active = operator.release.weight_sets.filter(active=True).first()
    weight = active.weights.get(operator.name) if active is not None else None
    return OperatorLabels(phase=metadata.get("phase"), weight=weight,
                          weight_version=active.version if active is not None else None,
                          hardware=[p.name for p in profiles], shapes=shapes)
