"""Whether a captured CUDA graph is trusted (issue 43): the decision, on the CPU, from the
outputs a replay left against the eager call's (graph_capture.graph_mismatch), and the
timing thread's pinning."""

from __future__ import annotations

import os

import pytest
import torch

pytest.importorskip("triton")

from evaluation.harness.graph_capture import (  # noqa: E402
    OUTSIDE_CAPTURE_NOTE,
    POISON_BYTE,
    graph_mismatch,
)
from evaluation.harness.timing_host import pinned_thread


def poisoned_like(tensor: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(tensor)
    out.view(torch.uint8).fill_(POISON_BYTE)
    return out


def test_a_replay_that_recomputed_the_outputs_is_trusted() -> None:
    eager = torch.randn(8, 16)
    replayed = eager + 1e-4  # a reduction order of its own: within the tolerance
    assert graph_mismatch(eager, replayed, atol=1e-2, rtol=5e-2) is None


def test_a_kernel_missing_from_the_graph_leaves_the_poison_and_the_forward_goes_eager() -> None:
    # a CuTe DSL kernel launched without stream= ran once at capture, outside the graph:
    # its replay writes nothing, and the outputs poisoned before it stay NaN
    eager = {"out": torch.randn(8, 16), "scale": torch.rand(8)}
    replayed = {"out": poisoned_like(eager["out"]), "scale": eager["scale"].clone()}
    problem = graph_mismatch(eager, replayed, atol=1e-2, rtol=5e-2)
    assert problem is not None and "out" in problem
    note = OUTSIDE_CAPTURE_NOTE.format(detail=problem)
    assert "Timed eagerly" in note and "stream=" in note


def test_a_replay_that_computed_something_else_is_not_trusted() -> None:
    eager = torch.randn(8, 16)
    assert graph_mismatch(eager, eager * 2, atol=1e-2, rtol=5e-2) is not None


def test_the_timing_thread_is_pinned_while_it_samples_and_let_go_after() -> None:
    before = os.sched_getaffinity(0)
    with pinned_thread(True):
        inside = os.sched_getaffinity(0)
    assert len(inside) == 1 and inside <= before
    assert os.sched_getaffinity(0) == before
    with pinned_thread(False):
        assert os.sched_getaffinity(0) == before
