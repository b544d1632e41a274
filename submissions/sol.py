"""SOL and attainment of stored results: the rules, and a rescale to a profile's new figures.

`shape_scores` is what the results consumer (submissions/results.py) stores with every new
result: SOL from the hidden roofline and the profile; a passed shape with a measured time gets
SOL / time, its floor variant and the suspicious flag; a failed one scores 0; a passed one
without a measured time has no attainment; a shape without a roofline entry has none of them.
`shape_results_rescale` applies the same rules to every stored result on a hardware profile
whose figures an admin changed, from the stored times. No kernel is run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evaluation.catalog.models import HardwareProfile, OperatorHidden, Shape
from evaluation.harness.release import HardwareSpec, stored_shape_roofline
from evaluation.harness.results import PASSED
from evaluation.harness.roofline import attainment, roofline_point
from submissions.models import ShapeResult

RESCALED_FIELDS = ("sol_s", "attainment", "attainment_with_floor", "suspicious")


@dataclass(frozen=True)
class Rescaled:
    results: int  # stored results on the hardware
    changed: int  # of them, those whose SOL or attainment changed
    submissions: set[int]  # every submission with a result on the hardware


def shape_results_rescale(*, hardware: HardwareProfile) -> Rescaled:
    """Every stored result on `hardware` (all attempts), recomputed from its stored time.

    A result an admin accepted in quarantine review stays accepted (not suspicious): the
    review judged the measurement, which has not changed. Raises the harness's ReleaseError
    when the profile lacks a precision path a stored roofline needs.
    """
    spec = hardware.as_spec()
    rows = list(ShapeResult.every_tier.filter(job__candidate__submission__hardware=hardware)
                .values_list("pk", "shape_id", "job__candidate__submission_id", "status",
                             "median_s", "raw__timing__measured", "review", *RESCALED_FIELDS))
    sol = _sol_by_shape({row[1] for row in rows}, spec)
    changed = []
    for pk, shape_pk, _, status, median_s, measured, review, *stored in rows:
        values = shape_scores(sol.get(shape_pk), status, median_s, measured, spec.launch_floor_s)
        if review == ShapeResult.Review.ACCEPTED:
            values["suspicious"] = False
        if tuple(values[f] for f in RESCALED_FIELDS) != tuple(stored):
            changed.append(ShapeResult(pk=pk, **values))
    ShapeResult.every_tier.bulk_update(changed, RESCALED_FIELDS, batch_size=2000)
    return Rescaled(results=len(rows), changed=len(changed), submissions={row[2] for row in rows})


def shape_scores(sol_s: float | None, status: str, median_s: float | None, measured: Any,
                 launch_floor_s: float) -> dict[str, Any]:
    """SOL, attainment (with its floor variant) and the suspicious flag of one result."""
    values: dict[str, Any] = {"sol_s": sol_s, "attainment": None, "attainment_with_floor": None,
                              "suspicious": False}
    if sol_s is None:
        return values  # no roofline entry: nothing to score against
    # `measured` absent (a result stored without the harness's timing): its median decides.
    if status == PASSED and (measured is None or bool(measured)) and median_s and median_s > 0:
        score = attainment(sol_s, median_s, launch_floor_s)
        values.update(attainment=score.attainment,
                      attainment_with_floor=score.attainment_with_floor,
                      suspicious=score.suspicious)
    elif status != PASSED:
        values["attainment"] = 0.0
    return values


def _sol_by_shape(shape_pks: set[int], spec: HardwareSpec) -> dict[int, float]:
    """SOL per shape (primary key) on `spec`, each roofline.json read once."""
    shapes = list(Shape.every_tier.filter(pk__in=shape_pks)
                  .values_list("pk", "shape_id", "operator_id"))
    rooflines = dict(OperatorHidden.objects.filter(operator_id__in={s[2] for s in shapes})
                     .values_list("operator_id", "roofline"))
    sol = {}
    for pk, shape_id, operator_id in shapes:
        shape = stored_shape_roofline(rooflines.get(operator_id), shape_id)
        if shape is not None:
            sol[pk] = roofline_point(shape, spec).sol_s
    return sol
