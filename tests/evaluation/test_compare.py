"""Output comparison on the trusted side."""

from __future__ import annotations

import pytest
import torch

from evaluation.harness.compare import as_output_dict, compare_outputs


def test_values_within_atol_plus_rtol_pass() -> None:
    ref = torch.tensor([1.0, 100.0])
    cand = torch.tensor([1.0 + 0.0109, 100.0 + 5.0])  # 0.01 + 0.05*1 = 0.06 ; 0.01 + 5 = 5.01
    result = compare_outputs({"out": cand}, {"out": ref}, atol=1e-2, rtol=5e-2)
    assert result.passed and result.max_abs_error == pytest.approx(5.0)


def test_one_element_outside_fails_and_reports_the_error() -> None:
    ref = torch.zeros(100)
    cand = ref.clone()
    cand[7] = 0.5
    result = compare_outputs({"out": cand}, {"out": ref}, atol=1e-2, rtol=5e-2)
    assert not result.passed and result.max_abs_error == pytest.approx(0.5)
    assert "1 of 100 elements" in (result.reason or "")


def test_nan_where_the_reference_is_finite_fails() -> None:
    cand = torch.tensor([1.0, float("nan")])
    result = compare_outputs({"out": cand}, {"out": torch.ones(2)}, atol=1e9, rtol=1e9)
    assert not result.passed and "NaN/Inf" in (result.reason or "")


def test_matching_nan_in_the_reference_is_accepted() -> None:
    ref = torch.tensor([1.0, float("nan"), float("-inf")])
    assert compare_outputs({"out": ref.clone()}, {"out": ref}, atol=0, rtol=0).passed


@pytest.mark.parametrize(("cand", "message"), [
    ({"out": torch.zeros(3, dtype=torch.float16)}, "dtype"),
    ({"out": torch.zeros(4)}, "shape"),
    ({"other": torch.zeros(3)}, "keys"),
])
def test_structure_shape_and_dtype_must_match(cand: dict[str, torch.Tensor], message: str) -> None:
    result = compare_outputs(cand, {"out": torch.zeros(3)}, atol=1, rtol=1)
    assert not result.passed and message in (result.reason or "")


def test_integer_outputs_must_match_exactly_within_atol() -> None:
    ref = torch.tensor([3, 1], dtype=torch.int32)
    cand = torch.tensor([1, 3], dtype=torch.int32)
    assert not compare_outputs({"ids": cand}, {"ids": ref}, atol=1e-2, rtol=0).passed


def test_only_tensors_and_dicts_or_tuples_of_tensors_are_outputs() -> None:
    assert as_output_dict(torch.zeros(1)) is not None
    assert as_output_dict({"a": torch.zeros(1)}) is not None
    assert set(as_output_dict((torch.zeros(1),)) or {}) == {"out0"}
    assert as_output_dict(()) is None
    assert as_output_dict((torch.zeros(1), 2)) is None
    assert as_output_dict({"a": 1}) is None
    assert as_output_dict({}) is None
