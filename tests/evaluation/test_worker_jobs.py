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
from tests.evaluation.helpers import TEST_SETTINGS, sample_source
from tests.paths import FIXTURE_RELEASE


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
            ahead = warm._ready[0]
            assert ahead._process is not None  # started before the job
            run_job_spec(spec(job_id, candidate), lambda kind, payload: events.append(
                (kind, payload)), TEST_SETTINGS, warm=warm)
            assert ahead._process is None  # used by this job, then closed: never reused
            assert warm.waiting == warm.size and ahead not in warm._ready
        assert (warm.taken, warm.cold_takes) == (2, 0)
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


def test_a_pool_hands_out_its_oldest_children_once_each_and_stays_full(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from evaluation.harness.isolation.child_process import WarmChildren

    pool = WarmChildren(device="cpu", dsl="triton", masked_paths=(),
                        settings=TEST_SETTINGS.sandbox, size=2)
    try:
        pool.prepare()
        first, second = list(pool._ready)
        taken = pool.take()
        assert taken is first and pool.waiting == 2 and second in pool._ready
        assert pool.take() is second and first not in pool._ready
        # A waiting child that died is closed and passed over, not handed to a job.
        dead = pool._ready[0]
        assert dead._process is not None
        dead._process.kill()
        dead._process.wait()
        assert pool.take() is not dead and dead not in pool._ready
        assert (pool.taken, pool.cold_takes) == (3, 0)
    finally:
        for child in (first, second):
            child.close()
        pool.close()
    assert pool.waiting == 0


def test_the_pools_size_and_dsls_come_from_the_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert jobs.warm_pool_size("cuda") == 2 and jobs.warm_pool_size("cpu") == 1
    monkeypatch.setenv("ATREX_WARM_CHILDREN", "3")
    assert jobs.warm_pool_size("cuda") == 3
    monkeypatch.setenv("ATREX_WARM_CHILDREN", "0")
    with pytest.raises(ValueError, match="ATREX_WARM_CHILDREN"):
        jobs.warm_pool_size("cpu")
    assert jobs.warm_dsls("cpu") == ["triton"]  # the interpreter runs Triton only
    monkeypatch.setenv("ATREX_WARM_DSLS", "triton,gluon")
    assert jobs.warm_dsls("cuda") == ["triton", "gluon"]
    monkeypatch.setenv("ATREX_WARM_DSLS", "cobol")
    with pytest.raises(ValueError, match="unknown DSL"):
        jobs.warm_dsls("cuda")
