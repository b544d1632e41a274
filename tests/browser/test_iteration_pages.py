"""Iterating in the browser: from the team page to an operator's history (chart and table),
from there and from a submission's page to two submissions compared with the source diff.
Scores come from stored shape results, as after real evaluations on a GPU."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from leaderboard.services import weight_set_from_release
from submissions.models import Submission
from tests.browser.conftest import canvas_painted_pixels, screenshot, sign_in
from tests.builders import scored_kernels
from tests.factories import TeamFactory, member_of
from tests.world import import_fixture_release

pytestmark = pytest.mark.django_db(transaction=True)

PASSWORD = "correct horse battery"  # tests.factories.UserFactory's
TORCH_FALLBACK = ("import torch\n\nclass Model(torch.nn.Module):\n"
                  "    def forward(self, x, weight):\n"
                  "        return torch.rms_norm(x, x.shape[-1:], weight)\n")
BLOCK = "        BLOCK = {block}\n"
KERNEL = """import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm(x_ptr, w_ptr, out_ptr, n, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + cols, mask=cols < n, other=0.0).to(tl.float32)
    rms = tl.sqrt(tl.sum(x * x, axis=0) / n + eps)
    w = tl.load(w_ptr + cols, mask=cols < n)
    tl.store(out_ptr + row * n + cols, (x / rms * w).to(out_ptr.dtype.element_ty), mask=cols < n)


class Model(torch.nn.Module):
    def forward(self, x, weight):
{block}        out = torch.empty_like(x)
        _rms_norm[(x.shape[0],)](x, weight, out, x.shape[1], self.eps, BLOCK=BLOCK{warps})
        return out
"""


def kernel(block: int, warps: int | None = None) -> str:
    return KERNEL.format(block=BLOCK.format(block=block),
                         warps=f", num_warps={warps}" if warps else "")


@pytest.fixture
def history() -> dict[str, Any]:
    """Teal's rms_norm over five submissions: better, a torch fallback, the same source
    again, then tuned; gemm_fp16 beside it twice."""
    release = import_fixture_release()
    weight_set_from_release(release)
    teal = TeamFactory(name="Teal")
    member_of(teal, "alice")
    gemm = "import triton\n\nclass Model:\n    pass\n"
    steps = [
        scored_kernels(teal, release, {"rms_norm": (kernel(1024), [0.31, 0.28, 0.35])},
                       seconds=[9.1e-6, 12.4e-6, 40.2e-6], minutes_ago=300),
        scored_kernels(teal, release, {"rms_norm": (kernel(4096), [0.48, 0.41, 0.52]),
                                       "gemm_fp16": (gemm, [0.55, 0.61, 0.58])},
                       seconds=[5.9e-6, 8.5e-6, 27.1e-6], minutes_ago=240),
        scored_kernels(teal, release, {"rms_norm": (TORCH_FALLBACK, [0.6, 0.6, 0.6])},
                       verdict="fallback-torch", seconds=[4.1e-6, 6.0e-6, 22.3e-6], minutes_ago=180),
        scored_kernels(teal, release, {"rms_norm": (kernel(4096), [0.47, 0.42, 0.52])},
                       seconds=[6.0e-6, 8.4e-6, 27.0e-6], minutes_ago=120),
        scored_kernels(teal, release, {"rms_norm": (kernel(4096, warps=8), [0.71, 0.66, 0.74]),
                                       "gemm_fp16": (gemm, [0.55, 0.61, 0.58])},
                       seconds=[4.0e-6, 5.3e-6, 19.0e-6], minutes_ago=60),
    ]
    for i, step in enumerate(steps):
        Submission.objects.filter(pk=step.pk).update(agent="claude-code", model_name="opus",
                                                     output_tokens=40_000 * (i + 1))
    return {"release": release, "steps": steps}


def test_a_team_follows_an_operators_history_and_compares_two_submissions(
        page: Page, history: dict[str, Any]) -> None:
    steps = history["steps"]
    sign_in(page, "alice", PASSWORD)
    page.locator("#operator-histories").get_by_role("link", name="rms_norm", exact=True).click()
    page.wait_for_url("**/team/history/rms_norm/")

    expect(page.locator("#history-chart-holder[data-rendered=yes]")).to_have_count(1)
    s_op = page.evaluate("Chart.getChart(document.getElementById('history-chart'))"
                         ".data.datasets[0].data")
    assert s_op == pytest.approx([0.31, 0.48, 0.0, 0.47, 0.71])  # the fallback scores 0
    assert canvas_painted_pixels(page, "#history-chart") > 0
    rows = page.locator("#history tr")
    expect(rows).to_have_count(1 + len(steps))
    expect(rows.nth(3)).to_contain_text("fallback-torch 3")
    expect(rows.nth(4)).to_contain_text("changed")  # back from the fallback to Triton
    expect(rows.nth(5)).to_contain_text("0.710")
    screenshot(page, "history")

    rows.nth(5).get_by_role("link", name=f"changed: compare with #{steps[3].pk}").click()
    page.wait_for_url(f"**/submissions/{steps[3].pk}/compare/{steps[4].pk}/")
    expect(page.locator("#compare-operators")).to_contain_text("+0.240")  # S_op 0.47 → 0.71
    shapes = page.locator("#op-rms_norm table.compare-shapes tr")
    expect(shapes.nth(1)).to_contain_text("1.50×")  # 6.0 µs → 4.0 µs
    expect(shapes.nth(1)).to_contain_text("+0.240")
    diff = page.locator("#op-rms_norm pre.diff")
    expect(diff.locator(".add")).to_have_count(1)
    expect(diff.locator(".add")).to_contain_text("num_warps=8")
    expect(diff.locator(".del")).to_contain_text("BLOCK=BLOCK)")
    expect(page.locator("#op-gemm_fp16 pre.diff .del")).to_have_count(0)  # new in B
    screenshot(page, "compare")

    # From a submission's page: the other submissions of the team, the older one as A.
    page.goto(f"/submissions/{steps[1].pk}/")
    page.locator("#iteration-links").get_by_role("link", name=f"#{steps[0].pk}", exact=True).click()
    page.wait_for_url(f"**/submissions/{steps[0].pk}/compare/{steps[1].pk}/")
    expect(page.locator("#compare-operators tr", has_text="gemm_fp16")).to_contain_text(
        "not submitted")
