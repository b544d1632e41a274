"""Claims: one run holds a job's attempt; a redelivery takes over; parallel workers never share."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any
from unittest import mock

import pytest
from django.db import connection

from evaluation.catalog.models import HardwareProfile
from submissions.jobs import RESCORE_TASK, record_event
from submissions.models import EvaluationJob, ShapeResult
from submissions.services import submission_create
from tests.factories import TeamFactory
from tests.paths import SAMPLE_CANDIDATES
from tests.reports import event, timed_shape
from tests.world import import_fixture_release

SHAPES = ("dev-t4-h256", "dev-t3-h200")


def marked(shape_id: str, run: int) -> dict[str, Any]:
    """A shape report that says which run produced it."""
    return {**timed_shape(shape_id), "max_abs_error": float(run)}


@pytest.mark.django_db
def test_a_redelivered_run_takes_over_and_starts_the_attempt_afresh(
        job: EvaluationJob, django_capture_on_commit_callbacks: Callable[..., Any]) -> None:
    with mock.patch("submissions.jobs.publish_stop") as stop, \
            mock.patch("submissions.jobs.current_app"), \
            django_capture_on_commit_callbacks(execute=True):
        record_event("started", event(job, run="dead"))
        record_event("progress", event(job, run="dead", shape=marked(SHAPES[0], 1)))
        record_event("started", event(job, run="fresh"))  # the same attempt, delivered again
        job.refresh_from_db()
        assert job.run == "fresh" and job.shapes_done == 0
        assert not ShapeResult.objects.filter(job=job).exists()

        record_event("progress", event(job, run="dead", shape=marked(SHAPES[1], 1)))
        assert not ShapeResult.objects.filter(job=job).exists()
        record_event("result", event(job, run="fresh", result={
            "shapes": [marked(s, 2) for s in SHAPES]}))
    job.refresh_from_db()
    assert job.status == "scored" and job.attempts == 1 and job.shapes_done == 2
    assert sorted(ShapeResult.objects.filter(job=job).values_list("max_abs_error", flat=True)) \
        == [2.0, 2.0]
    # The run that lost the job is told to stop, when it loses it and when it reports again.
    assert [c.args[1] for c in stop.call_args_list] == [
        {"job_id": job.pk, "up_to_attempt": 1, "run": "dead"}] * 2


@pytest.mark.django_db(transaction=True)
def test_parallel_workers_reporting_on_one_job_never_both_hold_it() -> None:
    release = import_fixture_release()
    with mock.patch("submissions.jobs.dispatch_job"):
        submission = submission_create(
            team=TeamFactory(), user=None, release=release,
            hardware=HardwareProfile.objects.get(name="H200"), filename="rms_norm.py",
            data=(SAMPLE_CANDIDATES / "rms_norm" / "triton_native.py").read_bytes())
    job = submission.candidates.get().job
    EvaluationJob.objects.filter(pk=job.pk).update(attempts=1)
    job.refresh_from_db()
    workers = 6
    barrier = threading.Barrier(workers)
    errors: list[BaseException] = []

    def worker(number: int) -> None:
        ids = event(job, run=f"run-{number}", worker=f"gpu-{number}")
        try:
            barrier.wait()
            record_event("started", ids)
            for shape_id in SHAPES:
                record_event("progress", {**ids, "shape": marked(shape_id, number)})
            record_event("result", {**ids, "result": {
                "shapes": [marked(s, number) for s in SHAPES]}})
        except BaseException as exc:  # noqa: BLE001 - asserted on below
            errors.append(exc)
        finally:
            connection.close()

    with mock.patch("submissions.jobs.publish_stop"), \
            mock.patch("submissions.jobs.current_app") as app:
        threads = [threading.Thread(target=worker, args=(n,)) for n in range(workers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
    assert errors == []
    job.refresh_from_db()
    holder = int(job.run.removeprefix("run-"))
    assert job.status == "scored" and job.worker == f"gpu-{holder}" and job.shapes_done == 2
    rows = list(ShapeResult.objects.filter(job=job).values_list("attempt", "max_abs_error"))
    assert rows == [(1, float(holder))] * 2  # every stored shape from the one holder
    rescores = [c for c in app.send_task.call_args_list if c.args[0] == RESCORE_TASK]
    assert len(rescores) == 1  # scored exactly once
