"""The hidden tier has no clock a team can read: while a ranked job's hidden shapes run,
nothing a team reaches changes (progress, heartbeat, status, counts, scores, webhooks), and
the job ends at a release time fixed when they began, whatever they took; past the budget,
at the next quantum. Admins see the real progress.

The attack it answers (issue 40): a candidate that slept `tokens x 1 s` in its first call on
a non-public size let its team read a 24-token hidden shape from the API's `shapes_done` and
heartbeat (28.1 s against 5.3 s for the control).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from django.test import Client
from django.utils import timezone

from evaluation.catalog.importing import release_import
from evaluation.catalog.models import HardwareProfile, Release
from evaluation.harness.results import ShapeReport
from evaluation.protocol import hidden_budget, job_spec, release_delay
from evaluation.worker.jobs import HiddenTierClock, hold_until_release, run_job_spec
from leaderboard.services import rescore_submission, weight_set_from_release
from portal.accounts.models import Team
from submissions.jobs import (
    HIDDEN_FAILURE,
    RELEASE_TASK,
    RESCORE_TASK,
    dispatch_job,
    job_cancel,
    job_release,
    jobs_sweep,
    record_event,
)
from submissions.models import EvaluationJob
from submissions.services import submission_create
from tests.factories import TeamFactory, UserFactory, member_of
from tests.hidden_tier import (
    HIDDEN_DEV,
    HIDDEN_SCORED,
    HIDDEN_SHAPES,
    hidden_tier_release,
    shape_report,
)
from tests.paths import FIXTURE_RELEASE, SAMPLE_CANDIDATES

pytestmark = pytest.mark.django_db

NATIVE = (SAMPLE_CANDIDATES / "rms_norm" / "triton_native.py").read_bytes()
BUDGET_S, QUANTUM_S = 60.0, 900.0


class Clock:
    """The web tier's clock, moved by the test."""

    def __init__(self) -> None:
        self.now = timezone.now()

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock() -> Iterator[Clock]:
    moving = Clock()
    with mock.patch("django.utils.timezone.now", moving):
        yield moving


@pytest.fixture
def release(tmp_path: Path) -> Release:
    imported = release_import(path=hidden_tier_release(tmp_path)).release
    weight_set_from_release(imported)
    Release.objects.filter(pk=imported.pk).update(hidden_shape_budget_s=BUDGET_S,
                                                  hidden_release_quantum_s=QUANTUM_S)
    imported.refresh_from_db()
    return imported


@pytest.fixture
def capture(django_capture_on_commit_callbacks: Callable[..., Any]) -> Callable[..., Any]:
    return django_capture_on_commit_callbacks


@pytest.fixture
def sent() -> Iterator[mock.MagicMock]:
    """Every task the life cycle sends (rescores, which call the webhook and change the
    boards; releases; job specs), captured."""
    with mock.patch("submissions.jobs.current_app") as app, \
            mock.patch("submissions.jobs.publish_stop"):
        yield app.send_task


def ranked_job(release: Release, team: Team) -> EvaluationJob:
    submission = submission_create(team=team, user=None, release=release,
                                   hardware=HardwareProfile.objects.get(name="H200"),
                                   filename="rms_norm.py", data=NATIVE)
    job = submission.candidates.get().job
    EvaluationJob.objects.filter(pk=job.pk).update(attempts=1)
    job.refresh_from_db()
    assert job.hidden_shape_ids == [HIDDEN_SCORED] and len(job.shape_ids) > 2
    return job


class Run:
    """One worker run of a job's attempt, reporting at the test clock's times (what each
    report sends after commit is run, into the captured `sent`)."""

    def __init__(self, job: EvaluationJob, capture: Callable[..., Any]) -> None:
        self.job, self.capture = job, capture
        self.ids = {"job_id": job.pk, "attempt": job.attempts, "worker": "gpu0@test",
                    "run": "run-1"}
        self.done = 0

    def report(self, kind: str, **payload: Any) -> None:
        with self._on_commit():
            record_event(kind, {**self.ids, **payload})

    def started(self) -> None:
        self.report("started", shapes_total=self.job.shapes_total, mode="gpu")

    def shape(self, shape: dict[str, Any]) -> None:
        self.done += 1
        self.report("progress", done=self.done, total=self.job.shapes_total, shape=shape)

    def public_shapes(self) -> list[dict[str, Any]]:
        shapes = [shape_report(shape_id, median_s=1e-5) for shape_id in self.job.shape_ids]
        for shape in shapes:
            self.shape(shape)
        return shapes

    def _on_commit(self) -> Any:
        return self.capture(execute=True)


SECRETS = re.compile(rb'(csrfmiddlewaretoken" value="|csrf_token": ")[^"]+|'
                     rb'"X-CSRFToken": "[^"]+"')


def team_view(client: Client, submission_id: int) -> dict[str, bytes]:
    """Everything the team reads of its submission, by every road (CSRF tokens aside, which
    change with every page)."""
    views = {}
    for url, headers in ((f"/api/submissions/{submission_id}/", {}),
                         ("/api/submissions/", {}),
                         (f"/api/submissions/{submission_id}/profile/", {}),
                         (f"/submissions/{submission_id}/", {}),
                         (f"/submissions/{submission_id}/", {"HTTP_HX_REQUEST": "true"}),
                         ("/team/", {})):
        response = client.get(url, **headers)
        assert response.status_code == 200, url
        views[f"{url} {headers}"] = SECRETS.sub(b"", response.content)
    return views


def assert_same(before: dict[str, bytes], after: dict[str, bytes], when: str) -> None:
    changed = [url for url in before if before[url] != after[url]]
    assert not changed, f"{when}: a team could time the hidden tier through {changed}"


def rescores(sent: mock.MagicMock) -> int:
    return sum(call.args[0] == RESCORE_TASK for call in sent.call_args_list)


def test_nothing_a_team_reads_changes_while_the_hidden_shapes_run_until_the_release(
        release: Release, clock: Clock, sent: mock.MagicMock,
        capture: Callable[..., Any]) -> None:
    team = TeamFactory()
    job = ranked_job(release, team)
    client = Client()
    client.force_login(member_of(team, "owner"))
    run = Run(job, capture)
    run.started()
    public = run.public_shapes()
    hidden_began = clock.now
    before = team_view(client, job.candidate.submission_id)
    rescored = rescores(sent)
    # the hidden shape runs 28 s: heartbeats, its progress report, then the result
    for _ in range(4):
        clock.advance(7)
        run.report("heartbeat")
        assert_same(before, team_view(client, job.candidate.submission_id), "a heartbeat")
    run.shape(shape_report(HIDDEN_SCORED, median_s=2e-5))
    assert_same(before, team_view(client, job.candidate.submission_id), "a hidden shape's report")
    clock.advance(1)
    run.report("result", result={"mode": "gpu", "evaluator_version": "test",
                                 "shapes": [*public, shape_report(HIDDEN_SCORED, median_s=2e-5)]})
    assert_same(before, team_view(client, job.candidate.submission_id), "the worker's end")
    assert rescores(sent) == rescored  # no rescore: no board change, no webhook
    job.refresh_from_db()
    assert job.status == "running" and job.worker_ended_at == clock.now
    assert job.release_at == hidden_began + timedelta(seconds=BUDGET_S)
    release_sent = [c for c in sent.call_args_list if c.args[0] == RELEASE_TASK]
    assert release_sent and release_sent[-1].kwargs["countdown"] == pytest.approx(BUDGET_S - 29)
    clock.advance(BUDGET_S - 30)  # a second before the release time
    assert job_release(job.pk) is False and jobs_sweep().requeued == []
    assert_same(before, team_view(client, job.candidate.submission_id), "the wait")
    clock.advance(1)
    with Run(job, capture)._on_commit():
        assert job_release(job.pk) is True
    job.refresh_from_db()
    assert job.status == "scored" and job.finished_at == job.release_at
    assert rescores(sent) == rescored + 1
    api = client.get(f"/api/submissions/{job.candidate.submission_id}/").json()["jobs"][0]
    assert api["status"] == "scored" and api["shapes_done"] == job.shapes_total
    assert api["hidden_shapes"] == {"shapes": 1, "evaluated": 1, "passed": 1, "held": False}


def test_the_jobs_end_tells_only_which_release_time_it_was(
        release: Release, clock: Clock, sent: mock.MagicMock,
        capture: Callable[..., Any]) -> None:
    """The attack's numbers: a hidden tier of 5.3 s (the control), 28.1 s (the candidate that
    slept 24 tokens x 1 s), and two that overran the budget by different amounts."""
    ends = {}
    for name, hidden_s in (("control", 5.3), ("sleeper", 28.1), ("slow", 75.0),
                           ("slower", 610.0)):
        team = TeamFactory(name=name)
        job = ranked_job(release, team)
        run = Run(job, capture)
        run.started()
        public = run.public_shapes()
        began = clock.now
        clock.advance(hidden_s)
        run.report("result", result={"mode": "gpu", "evaluator_version": "test", "shapes": [
            *public, shape_report(HIDDEN_SCORED, median_s=2e-5)]})
        clock.advance(QUANTUM_S + BUDGET_S)
        with Run(job, capture)._on_commit():
            jobs_sweep()
        job.refresh_from_db()
        assert job.status == "scored" and job.finished_at is not None
        ends[name] = (job.finished_at - began).total_seconds()
    assert ends == {"control": BUDGET_S, "sleeper": BUDGET_S, "slow": BUDGET_S + QUANTUM_S,
                    "slower": BUDGET_S + QUANTUM_S}


def test_a_failure_among_the_hidden_shapes_is_held_and_told_at_the_release(
        release: Release, clock: Clock, sent: mock.MagicMock,
        capture: Callable[..., Any]) -> None:
    team = TeamFactory()
    job = ranked_job(release, team)
    client = Client()
    client.force_login(member_of(team, "owner"))
    run = Run(job, capture)
    run.started()
    run.public_shapes()
    before = team_view(client, job.candidate.submission_id)
    clock.advance(3)
    run.report("failed", reason=f"the child died while it ran {HIDDEN_SCORED}",
               infrastructure=False)
    assert_same(before, team_view(client, job.candidate.submission_id), "a hidden failure")
    clock.advance(BUDGET_S)
    with Run(job, capture)._on_commit():
        jobs_sweep()
    job.refresh_from_db()
    assert job.status == "failed" and job.error == HIDDEN_FAILURE
    assert HIDDEN_SCORED in job.hidden_error and job.finished_at == job.release_at


def test_a_held_job_is_not_swept_as_silent_and_a_cancel_drops_its_hidden_results(
        release: Release, clock: Clock, sent: mock.MagicMock,
        capture: Callable[..., Any]) -> None:
    release.hidden_shape_budget_s = 3600.0
    release.save(update_fields=["hidden_shape_budget_s"])
    held, cancelled = ranked_job(release, TeamFactory()), ranked_job(release, TeamFactory())
    for job in (held, cancelled):
        run = Run(job, capture)
        run.started()
        public = run.public_shapes()
        run.shape(shape_report(HIDDEN_SCORED, median_s=2e-5))
        run.report("result", result={"mode": "gpu", "evaluator_version": "test", "shapes": [
            *public, shape_report(HIDDEN_SCORED, median_s=2e-5)]})
    clock.advance(1800)  # no heartbeat for far longer than ATREX_JOB_STALE_SECONDS
    assert jobs_sweep().requeued == []
    with Run(cancelled, capture)._on_commit():
        assert job_cancel(job=cancelled)
    with capture(execute=False):
        rescore_submission(cancelled.candidate.submission)
    client = Client()
    client.force_login(member_of(cancelled.candidate.submission.team, "owner"))
    api = client.get(f"/api/submissions/{cancelled.candidate.submission_id}/").json()
    assert api["jobs"][0]["hidden_shapes"]["evaluated"] == 0
    # as if no hidden shape had run, however far they had come when it was cancelled
    assert api["score"]["hidden_by_operator"] == {"rms_norm": 0.0}
    held.refresh_from_db()
    assert held.status == "running"


def test_admins_see_the_hidden_tiers_real_progress(
        release: Release, clock: Clock, sent: mock.MagicMock,
        capture: Callable[..., Any]) -> None:
    team = TeamFactory()
    job = ranked_job(release, team)
    run = Run(job, capture)
    run.started()
    run.public_shapes()
    began = clock.now
    clock.advance(12)
    run.shape(shape_report(HIDDEN_SCORED, median_s=2e-5))
    run.report("heartbeat")
    admin, member = Client(), Client()
    admin.force_login(UserFactory(username="root", is_staff=True, is_superuser=True))
    member.force_login(member_of(team, "owner"))
    url = f"/api/submissions/{job.candidate.submission_id}/"
    seen = admin.get(url).json()["jobs"][0]
    assert seen["heartbeat_at"] == clock.now.isoformat()
    assert seen["hidden_tier"]["reported"] == 1
    assert seen["hidden_tier"]["release_at"] == (began + timedelta(seconds=BUDGET_S)).isoformat()
    theirs = member.get(url).json()["jobs"][0]
    assert theirs["heartbeat_at"] == began.isoformat() and "hidden_tier" not in theirs
    assert theirs["shapes_done"] == len(job.shape_ids)
    page = admin.get(f"/submissions/{job.candidate.submission_id}/").content.decode()
    assert "1 of 1 hidden shapes reported" in page


def test_the_job_spec_carries_the_hidden_tiers_budget_and_quantum(
        release: Release, sent: mock.MagicMock) -> None:
    job = ranked_job(release, TeamFactory())
    EvaluationJob.objects.filter(pk=job.pk).update(attempts=0)
    dispatch_job(job.pk)
    spec = sent.call_args.kwargs["args"][0]
    assert spec["hidden_budget_s"] == BUDGET_S * 1 and spec["hidden_quantum_s"] == QUANTUM_S


def test_the_release_delay_is_the_budget_then_whole_quanta_past_it() -> None:
    assert release_delay(5.3, 60, 900) == release_delay(28.1, 60, 900) == 60
    assert release_delay(60.5, 60, 900) == release_delay(959, 60, 900) == 960
    assert release_delay(961, 60, 900) == 1860
    assert release_delay(75, 60, 0) == 75  # no quantum: the end itself


class FakeTime:
    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_the_worker_waits_out_the_release_time_before_its_next_job() -> None:
    fake = FakeTime()
    clock = HiddenTierClock(BUDGET_S, QUANTUM_S, clock=fake.monotonic)
    clock.start()
    fake.now += 28.1  # the hidden tier ran
    hold_until_release(clock, None, sleep=fake.sleep)
    assert fake.now == pytest.approx(1000 + BUDGET_S)
    clock = HiddenTierClock(BUDGET_S, QUANTUM_S, clock=fake.monotonic)
    clock.start()
    fake.now += 75
    hold_until_release(clock, None, sleep=fake.sleep)
    assert clock.started is not None
    assert fake.now - clock.started == pytest.approx(BUDGET_S + QUANTUM_S)


def test_the_budget_follows_the_jobs_slowest_public_shape_on_both_sides() -> None:
    """A minimum of 2 s a hidden shape, or 3 times the slowest public shape: the worker waits
    seconds, not the minutes a fixed budget big enough for the slowest operator would cost."""
    assert hidden_budget(4.0, 2, 3.0, 0.5) == 4.0  # 2 x 3 x 0.5 = 3 s: the minimum
    assert hidden_budget(4.0, 2, 3.0, 1.5) == 9.0
    assert hidden_budget(0.0, 2, 0.0, 1.5) == 0.0  # no hold at all (tests, or by choice)
    fake = FakeTime()
    clock = HiddenTierClock(4.0, QUANTUM_S, clock=fake.monotonic, hidden_count=2,
                            per_public=3.0)
    for seconds in (0.2, 1.5, 0.7):  # the public shapes, as the worker ran them
        clock.public_shape(seconds)
    clock.start()
    fake.now += 2.0  # the hidden shapes ran
    hold_until_release(clock, None, sleep=fake.sleep)
    assert clock.started is not None and fake.now - clock.started == pytest.approx(9.0)


def test_a_stop_ends_the_workers_wait() -> None:
    fake = FakeTime()
    clock = HiddenTierClock(BUDGET_S, QUANTUM_S, clock=fake.monotonic)
    clock.start()

    def stop() -> None:
        if fake.slept:
            raise RuntimeError("stopped by the portal")

    with pytest.raises(RuntimeError):
        hold_until_release(clock, stop, sleep=fake.sleep)
    assert sum(fake.slept) == pytest.approx(1.0)


def test_run_job_spec_reports_at_once_and_returns_at_the_release_time() -> None:
    """The worker's whole path with the evaluation itself replaced: the public shapes, then
    the hidden one taking 28.1 s; the result is published when it ends, and the task returns
    (the worker takes its next job) only at the hidden tier's start + its budget."""
    fake = FakeTime()
    published: list[tuple[str, float]] = []
    operator = FIXTURE_RELEASE / "data" / "rms_norm"
    spec = job_spec(job_id=1, attempt=1, operator="rms_norm",
                    reference_py=(operator / "reference.py").read_text(),
                    input_py=(operator / "input.py").read_text(),
                    shapes_json=json.dumps({k: v for k, v in json.loads(
                        (operator / "shapes.json").read_text()).items() if k.startswith("dev-")}),
                    candidate_source=NATIVE.decode(), atol=1e-2, rtol=5e-2, dsl="triton",
                    dsl_ratio_threshold=0.95, hardware="H200", seed=1,
                    hidden_shapes_json=json.dumps({HIDDEN_DEV: HIDDEN_SHAPES[HIDDEN_DEV]}),
                    hidden_budget_s=BUDGET_S, hidden_quantum_s=QUANTUM_S)

    def evaluate(job: Any, settings: Any, progress: Any, warm: Any = None) -> Any:
        shapes = [*job.operator.shapes, *job.hidden_shapes]
        for done, shape in enumerate(shapes, start=1):
            fake.now += 28.1 if shape.id == HIDDEN_DEV else 2
            progress(ShapeReport(shape_id=shape.id), done, len(shapes))
        return mock.MagicMock(to_dict=lambda: {"shapes": []})

    with mock.patch("evaluation.worker.jobs.time", fake), \
            mock.patch("evaluation.worker.jobs.evaluate", evaluate):
        run_job_spec(spec, lambda kind, payload: published.append((str(kind), fake.now)),
                     worker="w", run="r")
    hidden_began = 1000 + 2 * 2
    assert [kind for kind, _ in published] == ["started", "progress", "progress", "progress",
                                               "result"]
    assert published[-1][1] == pytest.approx(hidden_began + 28.1)
    assert fake.now == pytest.approx(hidden_began + BUDGET_S)
