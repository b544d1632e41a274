"""The job and ncu specs: typed on both sides, a dict of the same keys on the wire."""

from __future__ import annotations

from typing import Any

from evaluation.protocol import JobSpec, NcuSpec, OperatorFiles, job_spec, ncu_profile_spec


def _job_wire() -> dict[str, Any]:
    return job_spec(job_id=7, attempt=2, operator="rms_norm", reference_py="ref", input_py="inp",
                    shapes_json='{"a": {}}', candidate_source="src", atol=1e-3, rtol=1e-2,
                    dsl="triton", dsl_ratio_threshold=0.9, hardware="H200", seed=42,
                    heartbeat_s=5, hidden_shapes_json='{"h": {}}', hidden_budget_s=2,
                    hidden_quantum_s=1, hidden_budget_per_public=3)


def test_a_job_spec_reads_back_as_the_web_tier_sent_it() -> None:
    wire = _job_wire()
    spec = JobSpec.from_wire(wire)
    assert spec.to_wire() == wire
    assert spec.operator.hidden_shapes_json == '{"h": {}}' and (spec.atol, spec.rtol) == (1e-3, 1e-2)
    assert sorted(wire) == ["attempt", "candidate_source", "dsl", "dsl_ratio_threshold",
                            "hardware", "heartbeat_s", "hidden_budget_per_public",
                            "hidden_budget_s", "hidden_quantum_s", "job_id", "operator",
                            "seed", "tolerance", "version"]
    assert sorted(wire["operator"]) == ["hidden_shapes_json", "input_py", "name",
                                        "reference_py", "shapes_json"]


def test_a_job_spec_without_the_hidden_budgets_reads_them_as_zero() -> None:
    wire = _job_wire()
    for key in ("heartbeat_s", "hidden_budget_s", "hidden_quantum_s", "hidden_budget_per_public"):
        del wire[key]
    del wire["operator"]["hidden_shapes_json"]
    spec = JobSpec.from_wire(wire)
    assert (spec.heartbeat_s, spec.hidden_budget_s, spec.hidden_quantum_s,
            spec.hidden_budget_per_public) == (0, 0, 0, 0)
    assert spec.operator.hidden_shapes_json == ""


def test_an_ncu_spec_carries_the_public_files_only() -> None:
    wire = ncu_profile_spec(profile_id=3, operator="rms_norm", reference_py="ref",
                            input_py="inp", shapes_json="{}", shape_id="s1",
                            candidate_source="src", dsl="triton", hbm_bytes_per_s=4.8e12)
    spec = NcuSpec.from_wire(wire)
    assert spec.to_wire() == wire and "hidden_shapes_json" not in wire["operator"]
    assert spec.operator == OperatorFiles("rms_norm", "ref", "inp", "{}")
    assert spec.operator.public_files() == {"reference.py": "ref", "input.py": "inp",
                                            "shapes.json": "{}"}
