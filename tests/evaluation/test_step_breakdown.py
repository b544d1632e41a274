"""Where a shape's seconds go: the result carries each step's seconds and count, the trusted
side's steps and round trips account for the shape's time, and the child's own account is
merged in, checked as untrusted numbers."""

from __future__ import annotations

import json

import jsonschema
import pytest

from evaluation.harness.results import SCHEMA_PATH
from evaluation.harness.steps import MAX_CHILD_STEPS, Steps, checked_child_steps
from tests.evaluation.helpers import run_candidate, sample_source

SCHEMA = json.loads(SCHEMA_PATH.read_text())


def test_each_shape_says_where_its_seconds_went() -> None:
    result = run_candidate("rms_norm", sample_source("rms_norm", "triton_native"))
    jsonschema.validate(result.to_dict(), SCHEMA)
    for shape in result.shapes:
        seconds, counts = shape.steps["seconds"], shape.steps["counts"]
        assert set(seconds) == set(counts)
        # the trusted side: each trial judged (5 correctness, 1 adoption, 3 spot checks)
        assert counts["reference"] == counts["compare"] == counts["output_read"] == 9
        for request in ("correctness", "adoption", "timing"):
            assert counts[f"child.{request}"] == 1
            assert seconds[f"in_child.{request}.total"] > 0
        assert counts["in_child.correctness.trial_calls"] == 4
        assert counts["in_child.correctness.first_call"] == 1
        assert counts["in_child.timing.timing.sample.call"] == 3  # the unmeasured calls
        # the parent's own steps and its waits on the child are the shape's time, nearly all
        parent = sum(v for k, v in seconds.items() if not k.startswith("in_child."))
        assert 0.8 * shape.seconds <= parent <= shape.seconds * 1.001, (parent, shape.seconds)


def test_a_childs_account_is_used_only_where_it_is_numbers() -> None:
    good = {"seconds": {"total": 0.5, "inputs": 0.1}, "counts": {"total": 1, "inputs": 5}}
    assert checked_child_steps(good) == ({"total": 0.5, "inputs": 0.1}, {"total": 1, "inputs": 5})
    forged = {"seconds": {"total": float("nan"), "calls": -1.0, "x": "1", "ok": True,
                          "inputs": 0.25}, "counts": {"inputs": 2.5, "total": -3}}
    assert checked_child_steps(forged) == ({"inputs": 0.25}, {})
    flood = {"seconds": {f"s{i}": 1.0 for i in range(MAX_CHILD_STEPS + 1)}, "counts": {}}
    assert checked_child_steps(flood) == ({}, {})
    assert checked_child_steps("nonsense") == ({}, {})
    steps = Steps()
    steps.merge("in_child.timing.", *checked_child_steps(good))
    steps.add("in_child.timing.inputs", 0.05)
    report = steps.as_report()
    assert report["seconds"] == {"in_child.timing.total": 0.5,
                                 "in_child.timing.inputs": pytest.approx(0.15)}
    assert report["counts"] == {"in_child.timing.total": 1, "in_child.timing.inputs": 6}
