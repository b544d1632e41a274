"""The timing stage's defences on their own: fresh contents in place from the parent's seeds,
and checks the parent picks after each call returned."""

from __future__ import annotations

import random
import secrets
from collections.abc import Callable
from typing import Any

import pytest
import torch

from evaluation.harness.timed_calls import (
    CallPlan,
    FlowError,
    FreshInputs,
    TimedCall,
    TimedCallFlow,
    same_layout,
)


def draw_fixed(seed: int) -> dict[str, Any]:
    generator = torch.Generator().manual_seed(seed)
    return {"x": torch.randn(4, 8, generator=generator), "eps": 1e-6}


def test_fresh_contents_land_in_the_same_buffers_from_the_given_seed() -> None:
    buffers = [draw_fixed(1), draw_fixed(2)]
    address, version = buffers[0]["x"].data_ptr(), buffers[0]["x"]._version
    fresh = FreshInputs(draw_fixed, buffers, [1, 2])
    assert fresh.fresh
    seed_a, before_a = fresh.refill(0, 1234)
    contents_a = buffers[0]["x"].clone()
    seed_b, _ = fresh.refill(0, 5678)
    assert (seed_a, seed_b) == (1234, 5678)  # the parent's seeds, not the child's own
    assert buffers[0]["x"].data_ptr() == address  # graph replay needs the same address
    assert buffers[0]["x"]._version > version  # a cache keyed by the version misses
    assert torch.equal(contents_a, draw_fixed(1234)["x"])  # the parent can redraw them
    assert torch.equal(before_a["x"], contents_a)
    assert not torch.equal(buffers[0]["x"], contents_a)


def draw_varlen(seed: int) -> dict[str, Any]:
    length = 3 + seed % 5  # input.py whose shapes depend on the seed
    return {"x": torch.full((length,), float(seed))}


def test_seed_dependent_layouts_restore_each_set_from_its_own_draw() -> None:
    buffers = [draw_varlen(10), draw_varlen(11)]
    fresh = FreshInputs(draw_varlen, buffers, [10, 11])
    assert not fresh.fresh
    buffers[1]["x"].zero_()  # a candidate updated its input in place during the last call
    seed, before = fresh.refill(1, 999)
    assert seed == 11 and torch.equal(buffers[1]["x"], draw_varlen(11)["x"])
    assert torch.equal(before["x"], draw_varlen(11)["x"])


def test_same_layout_compares_tensor_layouts_and_scalar_values() -> None:
    a = {"x": torch.zeros(2, 3), "n": 3}
    assert same_layout(a, {"x": torch.ones(2, 3), "n": 3})
    assert not same_layout(a, {"x": torch.ones(3, 2), "n": 3})
    assert not same_layout(a, {"x": torch.ones(2, 3, dtype=torch.float16), "n": 3})
    assert not same_layout(a, {"x": torch.ones(2, 3), "n": 4})
    assert not same_layout(a, {"x": torch.ones(2, 3)})


def call(sample: int) -> TimedCall:
    return TimedCall(sample=sample, seed=100 + sample, inputs={}, before={}, result=None)


class Counting:
    """The parent's seed source in these tests: 0, 1, 2, ... scaled to the 63-bit range, so
    the picks are predictable (a value v/2**63 is compared with the probability)."""

    def __init__(self, values: list[int]) -> None:
        self.values = values
        self.index = 0

    def __call__(self) -> int:
        value = self.values[self.index % len(self.values)]
        self.index += 1
        return value


def run_calls(plan: CallPlan, count: int, pick_one_of: int = 0,
              between: Callable[[int], None] | None = None) -> tuple[TimedCallFlow, list[int]]:
    """A child's flow answered by `plan` directly, for `count` calls; the seeds it got."""
    buffers = [draw_fixed(1)]
    fresh = FreshInputs(draw_fixed, buffers, [1])
    flow = TimedCallFlow(fresh, plan.answer, lambda c: {"file": f"t{c.sample}"},
                         lambda thorough: None)
    if pick_one_of:
        flow.pick_one_of_next(pick_one_of)
    seeds = []
    for sample in range(count):
        seed, before = flow.before(0)
        seeds.append(seed)
        if between is not None:
            between(sample)
        flow.after(TimedCall(sample, seed, buffers[0], before, None))
    flow.finish()
    return flow, seeds


def test_seeds_come_from_the_parent_whatever_the_child_patches(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # the pinned-seeds attack: `secrets` in the child returns a constant
    monkeypatch.setattr(secrets, "randbits", lambda bits: 7)
    monkeypatch.setattr(secrets, "randbelow", lambda n: 0)
    plan = CallPlan(secrets_free_source(), probability=0.125, max_checks=3)
    _, seeds = run_calls(plan, 6)
    assert seeds == plan.given and len(set(seeds)) == 6


def secrets_free_source() -> Callable[[], int]:
    state = [2**62]

    def draw() -> int:
        state[0] = (state[0] * 6364136223846793005 + 1442695040888963407) % 2**63
        return state[0]
    return draw


def test_every_call_is_checked_at_probability_one_up_to_the_limit() -> None:
    plan = CallPlan(Counting([0]), probability=1.0, max_checks=2)
    flow, seeds = run_calls(plan, 5)
    assert [(s["sample"], s["seed"], s["file"]) for s in flow.saved] == \
        [(0, seeds[0], "t0"), (1, seeds[1], "t1")]
    assert plan.finished()


def test_the_last_call_is_checked_when_none_was_picked() -> None:
    plan = CallPlan(Counting([2**63 - 1]), probability=2**-32, max_checks=3)
    flow, _ = run_calls(plan, 10)
    assert [s["sample"] for s in flow.saved] == [9]


def test_one_call_of_a_batch_that_must_be_checked_is_checked_whatever_the_draw() -> None:
    plan = CallPlan(Counting([2**63 - 1]), probability=2**-32, max_checks=3)
    flow, _ = run_calls(plan, 6, pick_one_of=3)
    assert [s["sample"] for s in flow.saved] == [2]  # the batch's last; and not the last call


def test_a_checked_call_is_saved_before_the_next_contents_are_drawn() -> None:
    plan = CallPlan(Counting([0]), probability=1.0, max_checks=5)
    saved_before_call: list[int] = []
    flow: TimedCallFlow | None = None

    def between(sample: int) -> None:
        saved_before_call.append(len(flow.saved) if flow is not None else 0)
    buffers = [draw_fixed(1)]
    fresh = FreshInputs(draw_fixed, buffers, [1])
    flow = TimedCallFlow(fresh, plan.answer, lambda c: {}, lambda thorough: None)
    for sample in range(3):
        seed, before = flow.before(0)
        between(sample)
        flow.after(TimedCall(sample, seed, buffers[0], before, None))
    assert saved_before_call == [0, 1, 2]  # call k-1 saved by the time call k runs


def test_picks_are_random_and_near_the_asked_probability() -> None:
    picked: list[int] = []
    for run in range(200):
        plan = CallPlan(secrets_free_source_from(run), probability=0.125, max_checks=1000)
        flow, _ = run_calls(plan, 40)
        picked.append(len(flow.saved))
    mean = sum(picked) / len(picked)  # 5 expected per 40 calls; 200 runs put it within ±1
    assert 4.0 < mean < 6.0
    assert len(set(picked)) > 3


def secrets_free_source_from(seed: int) -> Callable[[], int]:
    generator = random.Random(seed)
    return lambda: generator.getrandbits(63)


def test_questions_out_of_order_are_refused() -> None:
    plan = CallPlan(Counting([0]), probability=1.0, max_checks=2)
    plan.answer({"returned": None, "next": 0, "chance": 0.0, "last": False, "fresh": True})
    with pytest.raises(FlowError):  # the next call's seed before this one was settled
        plan.answer({"returned": None, "next": 1, "chance": 0.0, "last": False, "fresh": True})
    with pytest.raises(FlowError):  # a call that was never given contents
        plan.answer({"returned": 3, "next": None, "chance": 0.0, "last": False, "fresh": True})


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError):
        CallPlan(Counting([0]), probability=0.0, max_checks=1)
    with pytest.raises(ValueError):
        FreshInputs(draw_fixed, [], [])


def test_the_flows_own_settings_are_watched_once_the_harness_set_them() -> None:
    plan = CallPlan(Counting([0]), probability=1.0, max_checks=2)
    buffers = [draw_fixed(1)]
    flow = TimedCallFlow(FreshInputs(draw_fixed, buffers, [1]), plan.answer, lambda c: {},
                         lambda thorough: None)
    flow.check_every(16)  # the harness's own change
    flow.check()
    flow.thorough_every = 10**9  # a candidate's, to skip the whole guard from now on
    with pytest.raises(FlowError, match="TimedCallFlow.thorough_every"):
        flow.check()
