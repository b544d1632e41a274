"""A submission's stored summary: written from its fields, read back with their types."""

from __future__ import annotations

import json
from dataclasses import fields

import pytest

from leaderboard.scoring import ShapeOutcome, SubmissionSummary, summarise


def test_every_field_of_a_summary_survives_the_stored_json() -> None:
    summary = SubmissionSummary(
        ranked=True, by_operator={"gemm": 0.5, "norm": None},
        by_subset={"memory": {"gemm": 0.25, "norm": None}, "compute": {}},
        shapes=7, correct=6, native=4, mixed=1, fallback=1, complete=False, unevaluated=2,
        lost_jobs=1, interpreter_jobs=3, errors={"all": {"gemm": 0.01, "norm": None}},
        hidden_by_operator={"gemm": 0.125}, floor_by_operator={"gemm": 0.75},
        hidden_floor_by_operator={"gemm": 0.5}, hidden_shapes=2, hidden_correct=1, library=1,
        hidden_siblings=[{"operator": "gemm", "hidden": 1, "public": "g1", "ok": True}])
    stored = json.loads(json.dumps(summary.as_json()))
    assert list(stored) == [f.name for f in fields(SubmissionSummary)]
    assert stored["by_subset"] == {"memory": {"gemm": 0.25, "norm": None}, "compute": {}}
    assert stored["hidden_siblings"] == [{"operator": "gemm", "hidden": 1, "public": "g1",
                                          "ok": True}]
    assert SubmissionSummary.from_json(stored) == summary
    assert SubmissionSummary.from_json(stored).as_json() == stored


def test_a_summary_from_summarise_reads_back_equal() -> None:
    summary = summarise([
        ShapeOutcome(operator="op", shape_id="a", correct=True, verdict="native",
                     attainment=0.5, regime="memory", phase="decode"),
        ShapeOutcome(operator="op", shape_id="b", correct=False, verdict="native",
                     attainment=None, regime="compute", phase="prefill")])
    assert SubmissionSummary.from_json(json.loads(json.dumps(summary.as_json()))) == summary


def test_an_old_summary_without_the_later_keys_loads_with_their_defaults() -> None:
    # as stored before the optional keys existed: only the required ones (and an int score)
    old = {"ranked": False, "by_operator": {"op": 1}, "by_subset": {"memory": {"op": 0.5}},
           "shapes": 3, "correct": 2, "native": 2}
    summary = SubmissionSummary.from_json(old)
    assert summary == SubmissionSummary(
        ranked=False, by_operator={"op": 1.0}, by_subset={"memory": {"op": 0.5}}, shapes=3,
        correct=2, native=2)
    assert (summary.mixed, summary.fallback, summary.complete, summary.unevaluated) == (0, 0, True, 0)
    assert (summary.lost_jobs, summary.interpreter_jobs, summary.library) == (0, 0, 0)
    assert (summary.hidden_shapes, summary.hidden_correct) == (0, 0)
    assert summary.errors == {} and summary.hidden_by_operator == {}
    assert summary.floor_by_operator == {} and summary.hidden_floor_by_operator == {}
    assert summary.hidden_siblings is None
    # a mapping stored as null reads as its default, as before
    assert SubmissionSummary.from_json({**old, "errors": None}).errors == {}


def test_a_summary_missing_a_required_key_is_refused() -> None:
    with pytest.raises(KeyError):
        SubmissionSummary.from_json({"ranked": True, "by_operator": {}, "by_subset": {},
                                     "shapes": 1, "correct": 1})


def test_a_malformed_stored_summary_is_refused_naming_what_is_wrong() -> None:
    stored = json.loads(json.dumps(summarise([
        ShapeOutcome(operator="op", shape_id="a", correct=True, verdict="native",
                     attainment=0.5, regime="memory", phase="decode")]).as_json()))
    with pytest.raises(TypeError, match="expected a number or null, got str"):
        SubmissionSummary.from_json({**stored, "by_operator": {"op": "0.5"}})
    with pytest.raises(TypeError, match="expected an object, got list"):
        SubmissionSummary.from_json({**stored, "by_subset": {"memory": [0.5]}})
    with pytest.raises(TypeError, match="expected an object, got list"):
        SubmissionSummary.from_json({**stored, "hidden_siblings": [["op", 1]]})


def test_stored_scores_of_another_type_are_read_as_floats() -> None:
    # a summary written by hand or by an older portal: ints (and JSON's true) are scores too
    summary = SubmissionSummary.from_json(
        {"ranked": True, "by_operator": {"a": 1, "b": 0.5, "c": None, "d": True},
         "by_subset": {}, "shapes": 1, "correct": 1, "native": 1})
    assert summary.by_operator == {"a": 1.0, "b": 0.5, "c": None, "d": 1.0}
    assert all(type(v) is float for v in summary.by_operator.values() if v is not None)
