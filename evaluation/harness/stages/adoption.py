"""The adoption stage: one call observed for fallback detection, its result judged like a
trial's, its kernels and aten ops read into an adoption report (harness/adoption.py).
"""

from __future__ import annotations

import dataclasses

from .. import adoption as adoption_mod
from ..isolation.sandbox import CandidateError
from .shape import ShapeRunState, _kernel_names


class AdoptionStage(ShapeRunState):
    """One recorded call: which DSL did the work, and was it right."""

    def _adoption(self) -> None:
        self.stage = "adoption"
        seed = self.seeds.draw()
        done = self._request({"cmd": "adoption", **self.base, "seed": seed},
                             self.settings.call_timeout_s)
        call = done.get("call")
        if not isinstance(call, dict):
            raise CandidateError("adoption", "the result channel sent no output of the "
                                             "recorded call")
        reference = self._reference()
        check = self._check_trial(reference, seed, call)
        if not check.passed:
            raise CandidateError("adoption", "the call observed for fallback detection gave a "
                                             f"different result from the checked ones: {check.reason}")
        try:
            evidence = adoption_mod.AdoptionEvidence(
                dsl_kernel_names=frozenset(str(n) for n in done["dsl_kernel_names"]),
                foreign_dsl_launches=tuple(str(n) for n in done["foreign_dsl_launches"]),
                kernels=tuple(adoption_mod.KernelRecord(str(n), float(t)) for n, t in done["kernels"]),
                aten_ops={str(k): int(v) for k, v in dict(done["aten_ops"]).items()},
                dsl_launch_count=int(done["dsl_launch_count"]),
                compiled_frames=int(done["compiled_frames"]),
                device_timed=bool(done["device_timed"]),
                dsl=self.job.dsl,
                other_dsl_kernels={str(k): str(v) for k, v in
                                   dict(done.get("other_dsl_kernels") or {}).items()},
                other_dsl_launch_count=int(done.get("other_dsl_launch_count") or 0),
                library_kernels={str(k): str(v) for k, v in
                                 dict(done.get("library_kernels") or {}).items()},
                library_launch_count=int(done.get("library_launch_count") or 0),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise CandidateError("adoption", "the result channel sent a malformed adoption "
                                             f"report ({type(exc).__name__})") from exc
        self.observed_kernels |= _kernel_names(done.get("kernel_names"), "adoption")
        report = adoption_mod.adoption_report(evidence, self.job.dsl_ratio_threshold)
        self.result.adoption = dataclasses.asdict(report)
        self.result.stage_reached = "adoption"
