"""The output area: a call's tensors cross from the child's writer to the parent's reader
bit for bit, the parent reads only what it expects from where it may, and nobody can
resize the area under the parent's mapping."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import torch

from evaluation.harness.isolation.output_area import (
    AreaFull,
    AreaWriter,
    LayoutRefused,
    OutputArea,
    check_layout,
)


@pytest.fixture
def area() -> Iterator[OutputArea]:
    made = OutputArea(1 << 20)
    yield made
    made.close()


def _writer(area: OutputArea) -> AreaWriter:
    # the child's side maps the same memory through a descriptor of its own, as after exec
    return AreaWriter(os.dup(area.fd), area.nbytes)


def test_a_call_arrives_bit_for_bit_and_the_parent_keeps_a_copy_of_its_own(
        area: OutputArea) -> None:
    torch.manual_seed(0)
    outputs = {"out": torch.randn(3, 5, dtype=torch.float16),
               "index": torch.arange(7, dtype=torch.int64),
               "mask": torch.tensor([[True, False], [False, True]]),
               "empty": torch.empty(0, 4, dtype=torch.bfloat16),
               "strided": torch.randn(6, 4)[:, ::2]}  # not contiguous
    changed = {"x": torch.randn(2, 3, dtype=torch.float32)}
    writer = _writer(area)
    writer.write_call({"first": torch.ones(5, dtype=torch.uint8)}, {})  # the next starts later
    offset, layout = writer.write_call(outputs, changed)
    assert offset > 0 and offset % 4096 == 0
    checked = check_layout(layout, outputs, changed)
    got = area.read_call(offset, checked, torch.device("cpu"))
    for name, tensor in outputs.items():
        assert got.outputs[name].dtype == tensor.dtype
        assert torch.equal(got.outputs[name], tensor), name
    assert torch.equal(got.modified_inputs["x"], changed["x"])
    # what the parent judges is its copy: the child writing the area again changes nothing
    writer.start_request()
    writer.write_call({"out": torch.zeros(1 << 16, dtype=torch.float32)}, {})
    writer.write_call({"out": torch.zeros(1 << 16, dtype=torch.float32)}, {})
    assert torch.equal(got.outputs["out"], outputs["out"])


@pytest.mark.parametrize("offset", [-4096, 1, 4095, (1 << 20), "0", 0.0, True, None])
def test_a_call_placed_outside_the_area_or_off_a_page_is_refused_unread(
        area: OutputArea, offset: object) -> None:
    expected = {"out": torch.zeros(8, dtype=torch.float32)}
    checked = check_layout([["output", "out", "torch.float32", [8]]], expected, {})
    with pytest.raises(LayoutRefused, match="outside the output area"):
        area.read_call(offset, checked, torch.device("cpu"))


def test_a_call_that_would_end_past_the_area_is_refused(area: OutputArea) -> None:
    expected = {"out": torch.zeros(1024, dtype=torch.float32)}  # 4 KiB
    checked = check_layout([["output", "out", "torch.float32", [1024]]], expected, {})
    area.read_call(area.nbytes - 4096, checked, torch.device("cpu"))  # the last page fits
    with pytest.raises(LayoutRefused, match="outside the output area"):
        area.read_call(area.nbytes - 4096, checked * 2, torch.device("cpu"))  # 8 KiB


def test_nobody_can_shrink_or_grow_the_area_the_parent_has_mapped(area: OutputArea) -> None:
    writer = _writer(area)
    writer.write_call({"out": torch.ones(16)}, {})
    for size in (0, area.nbytes // 2, area.nbytes * 2):
        with pytest.raises(PermissionError):
            os.ftruncate(area.fd, size)
    assert os.fstat(area.fd).st_size == area.nbytes


def test_outputs_larger_than_what_is_left_fail_the_call_and_a_new_request_starts_at_zero(
        area: OutputArea) -> None:
    writer = _writer(area)
    half = torch.zeros((1 << 19) // 4, dtype=torch.float32)  # 512 KiB: two fill the area
    assert writer.write_call({"out": half}, {})[0] == 0
    assert writer.write_call({"out": half}, {})[0] == 1 << 19
    with pytest.raises(AreaFull, match=r"do not fit in the sandbox's output area \(1 MiB"):
        writer.write_call({"out": half}, {})
    writer.start_request()
    assert writer.write_call({"out": half}, {})[0] == 0


def test_a_call_taken_at_its_hand_over_is_judged_from_the_parents_copy(
        area: OutputArea) -> None:
    """Shapes judged one side at a time: the parent copies a handed-over call while the child
    waits; what the child writes over the area afterwards changes nothing."""
    writer = _writer(area)
    outputs = {"out": torch.arange(16, dtype=torch.float32)}
    offset, layout = writer.write_call(outputs, {})
    checked = check_layout(layout, outputs, {})
    with pytest.raises(LayoutRefused, match="did not hand over"):
        area.read_call(offset, checked, torch.device("cpu"), taken=True)
    area.take(offset, layout)
    writer.start_request()  # the candidate runs again and rewrites the area over the call
    writer.write_call({"out": torch.full((16,), float("nan"))}, {})
    got = area.read_call(offset, checked, torch.device("cpu"), taken=True)
    assert torch.equal(got.outputs["out"], outputs["out"])
    area.forget_taken()  # the next request
    with pytest.raises(LayoutRefused, match="did not hand over"):
        area.read_call(offset, checked, torch.device("cpu"), taken=True)


def test_a_malformed_or_oversized_hand_over_copies_nothing(area: OutputArea) -> None:
    writer = _writer(area)
    outputs = {"out": torch.ones(16)}
    offset, layout = writer.write_call(outputs, {})
    checked = check_layout(layout, outputs, {})
    for raw in ([["output", "out", "float32", [16]]], [["output", "out", "torch.nope", [16]]],
                "junk", [["output", "out", "torch.float32", [1 << 40]]]):
        area.take(offset, raw)  # a dtype that is none, a size past the area: nothing taken
        with pytest.raises(LayoutRefused, match="did not hand over"):
            area.read_call(offset, checked, torch.device("cpu"), taken=True)


def test_a_non_contiguous_output_is_written_in_element_order_by_copies_alone() -> None:
    area = OutputArea(1 << 20)
    writer = AreaWriter(area.fd, area.nbytes)
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    view = base[1:, ::2].t()  # strided, offset into its storage
    offset, layout = writer.write_call({"out": view}, {})
    checked = check_layout(layout, {"out": torch.empty(view.shape)}, {})
    read = area.read_call(offset, checked, torch.device("cpu"))
    assert torch.equal(read.outputs["out"], view.contiguous())
