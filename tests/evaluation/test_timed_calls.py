"""The timing stage's defences on their own: fresh contents in place, and spot checks."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from evaluation.harness.timed_calls import FreshInputs, TimedCall, TimedCallChecks, same_layout


def draw_fixed(seed: int) -> dict[str, Any]:
    generator = torch.Generator().manual_seed(seed)
    return {"x": torch.randn(4, 8, generator=generator), "eps": 1e-6}


def test_fresh_contents_land_in_the_same_buffers_from_a_new_seed_each_time() -> None:
    buffers = [draw_fixed(1), draw_fixed(2)]
    address, version = buffers[0]["x"].data_ptr(), buffers[0]["x"]._version
    fresh = FreshInputs(draw_fixed, buffers, [1, 2])
    assert fresh.fresh
    seed_a, before_a = fresh.refill(0)
    contents_a = buffers[0]["x"].clone()
    seed_b, _ = fresh.refill(0)
    assert seed_a != seed_b
    assert buffers[0]["x"].data_ptr() == address  # graph replay needs the same address
    assert buffers[0]["x"]._version > version  # a cache keyed by the version misses
    assert torch.equal(contents_a, draw_fixed(seed_a)["x"])  # the parent can redraw them
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
    seed, before = fresh.refill(1)
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


def test_every_call_is_checked_at_probability_one_up_to_the_limit() -> None:
    checks = TimedCallChecks(lambda c: {"file": f"t{c.sample}"}, probability=1.0, max_checks=2)
    for sample in range(5):
        checks.after(call(sample))
    saved = checks.finish()
    assert [(s["sample"], s["seed"], s["file"]) for s in saved] == [(0, 100, "t0"), (1, 101, "t1")]


def test_the_last_call_is_checked_when_none_was_picked() -> None:
    checks = TimedCallChecks(lambda c: {"file": f"t{c.sample}"}, probability=2**-32, max_checks=3)
    for sample in range(10):
        checks.after(call(sample))
    assert [s["sample"] for s in checks.finish()] == [9]


def test_a_call_the_timing_stage_must_have_checked_is_checked_whatever_the_draw() -> None:
    checks = TimedCallChecks(lambda c: {"file": f"t{c.sample}"}, probability=2**-32, max_checks=3)
    for sample in range(6):
        picked = call(sample)
        picked.must_check = sample == 2
        checks.after(picked)
    assert [s["sample"] for s in checks.finish()] == [2]  # and not the last one besides


def test_picks_are_random_and_near_the_asked_probability() -> None:
    picked: list[int] = []
    for _ in range(200):
        checks = TimedCallChecks(lambda c: {}, probability=0.125, max_checks=1000)
        for sample in range(40):
            checks.after(call(sample))
        picked.append(len(checks.finish()))
    mean = sum(picked) / len(picked)  # 5 expected per 40 calls; 200 runs put it within ±1
    assert 4.0 < mean < 6.0
    assert len(set(picked)) > 3


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError):
        TimedCallChecks(lambda c: {}, probability=0.0, max_checks=1)
    with pytest.raises(ValueError):
        FreshInputs(draw_fixed, [], [])
