"""A GPU worker runs jobs back to back in children it started ahead of them."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from evaluation.harness.release import load_release
from evaluation.protocol import job_spec
from evaluation.worker import jobs
from evaluation.worker.jobs import run_job_spec, warm_children
from evaluation.worker.stop import RunStopped
from tests.conftest import FIXTURE_RELEASE
from tests.evaluation.helpers import TEST_SETTINGS, sample_source


def spec(job_id: int, candidate: str) -> dict[str, Any]:
    op = load_release(FIXTURE_RELEASE).operator("rms_norm")
    files = {name: (op.public.directory / name).read_text()
             for name in ("reference.py", "input.py")}
    return job_spec(job_id=job_id, attempt=1, operator="rms_norm",
                    reference_py=files["reference.py"], input_py=files["input.py"],
                    shapes_json='{"dev-t3-h200": {"init_kwargs": null, "input_kwargs": '
                                '{"num_tokens": 3, "hidden_size": 200}}}',
                    candidate_source=sample_source("rms_norm", candidate), atol=1e-2,
                    rtol=5e-2, dsl="triton", dsl_ratio_threshold=0.95, hardware="H200", seed=7)


def test_each_job_takes_the_child_started_ahead_and_leaves_the_next_one_started() -> None:
    warm = warm_children("cpu", "triton", TEST_SETTINGS.sandbox)
    warm.prepare()
    events: list[tuple[str, dict[str, Any]]] = []
    try:
        for job_id, candidate in ((1, "triton_native"), (2, "torch_fallback")):
            ahead = warm._next
            assert ahead is not None and ahead._process is not None  # started before the job
            run_job_spec(spec(job_id, candidate), lambda kind, payload: events.append(
                (kind, payload)), TEST_SETTINGS, warm=warm)
            assert ahead._process is None  # used by this job, then closed: never reused
            assert warm._next is not None and warm._next is not ahead
    finally:
        warm.close()
    results = [payload["result"] for kind, payload in events if kind == "result"]
    assert [r["shapes"][0]["adoption"]["verdict"] for r in results] == ["native",
                                                                        "fallback-torch"]


def test_a_worker_says_where_it_evaluates_when_a_job_starts() -> None:
    events: list[tuple[str, dict[str, Any]]] = []
    run_job_spec(spec(3, "triton_native"), lambda kind, payload: events.append((kind, payload)),
                 TEST_SETTINGS)
    started = next(payload for kind, payload in events if kind == "started")
    result = next(payload["result"] for kind, payload in events if kind == "result")
    assert started["mode"] == result["mode"] == "cpu-interpreter"  # before the first shape


def test_a_fault_of_the_evaluator_fails_the_job_at_once_as_an_infrastructure_failure(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # as the H200 met it: the trusted side ran out of memory comparing a 6.3 G-element output,
    # and the job stayed "running" until the sweeper ran it again into the same fault
    def out_of_memory(*args: Any, **kwargs: Any) -> None:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 5.89 GiB")

    monkeypatch.setattr(jobs, "evaluate", out_of_memory)
    events: list[tuple[str, dict[str, Any]]] = []
    run_job_spec(spec(4, "triton_native"), lambda kind, payload: events.append((kind, payload)),
                 TEST_SETTINGS)
    assert [kind for kind, _ in events] == ["started", "failed"]
    failed = events[-1][1]
    assert failed["infrastructure"] is True and failed["job_id"] == 4
    assert failed["reason"] == ("the evaluator failed: OutOfMemoryError: CUDA out of memory. "
                                "Tried to allocate 5.89 GiB")


def test_a_stop_the_portal_asked_for_ends_the_run_unreported(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def stop() -> None:
        raise RunStopped("job 5 attempt 1 was cancelled")

    events: list[tuple[str, dict[str, Any]]] = []
    with pytest.raises(RunStopped):
        run_job_spec(spec(5, "triton_native"), lambda kind, payload: events.append(
            (kind, payload)), TEST_SETTINGS, check_stop=stop)
    assert [kind for kind, _ in events] == ["started"]
