"""Worker faults with real Celery workers: a killed worker, a quiet worker, a broker
restart, a lost database connection and a cancel. No result is lost or stored twice, and
no job is left running.

Each test starts its own workers; the job is an honest Triton RMSNorm slowed down by a
sleep in `forward`, so that a fault lands in the middle of it.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection, transaction
from django.test import Client, override_settings

from evaluation.catalog.models import HardwareProfile, Release
from portal.audit.models import AuditEntry
from submissions.jobs import attempt_task_id
from submissions.models import EvaluationJob, ShapeResult
from submissions.services import submission_create
from tests.factories import TeamFactory, member_of
from tests.paths import SAMPLE_CANDIDATES
from tests.worker import broker, celery_worker, descendants

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("dev_shapes")]
ON_REDIS = settings.CELERY_BROKER_URL.startswith("redis://")
ON_POSTGRES = connection.vendor == "postgresql"
needs_redis = pytest.mark.skipif(not ON_REDIS, reason="needs Redis (CELERY_BROKER_URL=redis://…); "
                                 "the embedded filesystem broker keeps unacknowledged "
                                 "messages in the dead worker's memory")
SHAPES = 2  # the fixture's dev tier of rms_norm


def slow_candidate(seconds: float) -> bytes:
    """The honest Triton RMSNorm, sleeping `seconds` in every forward call."""
    honest = (SAMPLE_CANDIDATES / "rms_norm" / "triton_native.py").read_text()
    return (honest + "\n\nimport time as _time\n_Honest = Model\n\n\n"
            "class Model(_Honest):  # type: ignore[no-redef]\n"
            "    def forward(self, x, weight):\n"
            f"        _time.sleep({seconds})\n"
            "        return super().forward(x, weight)\n").encode()


@pytest.fixture
def dev_shapes() -> Iterator[None]:
    with override_settings(ATREX_SHAPE_FILTER="dev-*"):
        yield


def upload(release: Release, data: bytes) -> EvaluationJob:
    submission = submission_create(
        team=TeamFactory(concurrent_job_quota=10), user=None, release=release,
        hardware=HardwareProfile.objects.get(name="H200"), filename="rms_norm.py", data=data)
    return submission.candidates.get().job


def wait_until(check: Callable[[], bool], seconds: float, what: str, log: Path | None = None) \
        -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            tail = log.read_text()[-4000:] if log is not None and log.exists() else ""
            raise AssertionError(f"not {what} after {seconds} s\n{tail}")
        time.sleep(0.5)


def job_state(job: EvaluationJob) -> EvaluationJob:
    job.refresh_from_db()
    return job


def assert_completed_once(job: EvaluationJob, attempts: int = 1) -> None:
    job.refresh_from_db()
    assert job.status == "scored" and job.attempts == attempts, job.error
    current = ShapeResult.objects.filter(job=job, attempt=attempts)
    assert current.count() == SHAPES == job.shapes_done == job.shapes_total
    assert sorted(current.values_list("shape__shape_id", flat=True)) == ["dev-t3-h200",
                                                                         "dev-t4-h256"]
    assert set(current.values_list("status", "verdict")) == {("passed", "unverified-cpu")}


@contextmanager
def results_worker(tmp_path: Path, env: dict[str, str] | None = None,
                   beat_schedule: Path | None = None) -> Iterator[Path]:
    """The web-side worker; it sends new attempts too, so it evaluates the same shapes."""
    log = tmp_path / "results.log"
    with celery_worker("results", log, name="results", beat_schedule=beat_schedule,
                       env={"ATREX_SHAPE_FILTER": "dev-*", **(env or {})}):
        yield log


@needs_redis
def test_a_killed_worker_s_job_is_delivered_again_and_completes_once(
        tmp_path: Path, release: Release) -> None:
    fast_redelivery = {"ATREX_BROKER_VISIBILITY_TIMEOUT": "2"}
    with results_worker(tmp_path):
        with celery_worker("eval.H200", tmp_path / "a.log", name="eval-a",
                           env=fast_redelivery) as worker_a:
            job = upload(release, slow_candidate(0.3))
            wait_until(lambda: job_state(job).shapes_done >= 1, 120, "half done",
                       tmp_path / "a.log")
            first_run = job.run
            # A host crash: the worker and its sandboxed child die at once, unacknowledged.
            for pid in [worker_a.pid, *descendants(worker_a.pid)]:
                os.kill(pid, signal.SIGKILL)
            worker_a.wait()
        assert ShapeResult.objects.filter(job=job).count() == 1
        with celery_worker("eval.H200", tmp_path / "b.log", name="eval-b", purge=False,
                           env=fast_redelivery):
            wait_until(lambda: job_state(job).status == "scored", 120, "scored",
                       tmp_path / "b.log")
    assert_completed_once(job)
    assert job.run != first_run and job.worker.startswith("eval-b")


@override_settings(ATREX_JOB_HEARTBEAT_SECONDS=1)  # what this process puts in the spec
def test_a_quiet_worker_s_job_is_requeued_by_the_sweeper_and_its_late_reports_ignored(
        tmp_path: Path, release: Release) -> None:
    sweeper = {"ATREX_SWEEP_INTERVAL_SECONDS": "1", "ATREX_JOB_HEARTBEAT_SECONDS": "1",
               "ATREX_JOB_STALE_SECONDS": "10", "ATREX_JOB_MAX_ATTEMPTS": "3"}
    eval_log = tmp_path / "eval.log"
    with results_worker(tmp_path, env=sweeper, beat_schedule=tmp_path / "beat"), \
            celery_worker("eval.H200", eval_log, name="eval") as worker:
        job = upload(release, slow_candidate(0.3))
        wait_until(lambda: job_state(job).shapes_done >= 1, 120, "half done", eval_log)
        worker.send_signal(signal.SIGSTOP)  # alive, holding its message, silent
        try:
            wait_until(lambda: job_state(job).attempts == 2, 60, "requeued", tmp_path /
                       "results.log")
            assert job.status == "queued"
            stored_before = list(ShapeResult.objects.filter(job=job).values_list("pk", flat=True))
        finally:
            worker.send_signal(signal.SIGCONT)
        # It resumes attempt 1: told to stop, it drops it and takes attempt 2.
        wait_until(lambda: job_state(job).status == "scored", 120, "scored", eval_log)
    assert_completed_once(job, attempts=2)
    late = ShapeResult.objects.filter(job=job, attempt=1).exclude(pk__in=stored_before)
    assert not late.exists()
    assert AuditEntry.objects.filter(action="job.sweep", target=f"job:{job.pk}").count() == 1
    assert "stop requested" in eval_log.read_text()


@contextmanager
def private_redis(folder: Path) -> Iterator[Callable[[], None]]:
    """A redis-server of our own (never the shared one): yields a function that restarts it."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [shutil.which("redis-server") or "redis-server", "--port", str(port),
               "--bind", "127.0.0.1", "--dir", str(folder), "--save", "", "--appendonly", "no"]

    def start() -> subprocess.Popen[bytes]:
        server = subprocess.Popen(command, stdout=subprocess.DEVNULL)
        wait_until(lambda: _answers(port), 20, f"redis on port {port}")
        return server

    servers = [start()]

    def restart() -> None:
        # A clean restart: the server saves its data set (queued messages included).
        subprocess.run(["redis-cli", "-p", str(port), "shutdown", "save"], check=False,
                       capture_output=True)
        servers[-1].wait(timeout=30)
        time.sleep(1)
        servers.append(start())

    os.environ["ATREX_TEST_PRIVATE_REDIS"] = f"redis://127.0.0.1:{port}/0"
    try:
        yield restart
    finally:
        os.environ.pop("ATREX_TEST_PRIVATE_REDIS", None)
        servers[-1].terminate()
        servers[-1].wait(timeout=30)


def _answers(port: int) -> bool:
    return subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True,
                          check=False).stdout.strip() == b"PONG"


@pytest.mark.skipif(not ON_REDIS, reason="needs Redis (CELERY_BROKER_URL=redis://…): the "
                    "embedded filesystem broker has no server to restart")
@pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server")
def test_jobs_running_and_queued_survive_a_broker_restart(tmp_path: Path,
                                                          release: Release) -> None:
    with ExitStack() as stack:
        restart = stack.enter_context(private_redis(tmp_path))
        url = os.environ["ATREX_TEST_PRIVATE_REDIS"]
        stack.enter_context(broker(url))
        stack.enter_context(results_worker(tmp_path, env={"CELERY_BROKER_URL": url}))
        stack.enter_context(celery_worker("eval.H200", tmp_path / "eval.log", name="eval",
                                          env={"CELERY_BROKER_URL": url}))
        running = upload(release, slow_candidate(0.3))
        queued = upload(release, slow_candidate(0.3))  # one solo worker: this one waits
        wait_until(lambda: job_state(running).shapes_done >= 1, 120, "half done",
                   tmp_path / "eval.log")
        restart()
        for job in (running, queued):
            wait_until(lambda job=job: job_state(job).status in ("scored", "failed"), 150,
                       "finished", tmp_path / "eval.log")
    assert_completed_once(running)
    assert_completed_once(queued)


@pytest.mark.skipif(not ON_POSTGRES, reason="needs PostgreSQL (pg_terminate_backend)")
def test_a_lost_database_connection_fails_only_the_report_in_flight(
        tmp_path: Path, release: Release) -> None:
    with results_worker(tmp_path) as log, celery_worker("eval.H200", tmp_path / "eval.log",
                                                        name="eval"):
        job = upload(release, slow_candidate(0.3))
        wait_until(lambda: job_state(job).status == "running", 120, "running", log)
        with transaction.atomic(), connection.cursor() as cursor:
            # Hold the job's row: the consumer's next report waits on it, mid-transaction,
            # and that is where its connection is cut.
            EvaluationJob.objects.select_for_update().get(pk=job.pk)
            blocked: list[int] = []

            def consumer_waits() -> bool:
                cursor.execute("SELECT pg_stat_clear_snapshot()")  # fresh within a transaction
                cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = "
                               "current_database() AND pid <> pg_backend_pid() AND "
                               "wait_event_type = 'Lock'")
                blocked[:] = [row[0] for row in cursor.fetchall()]
                return bool(blocked)

            wait_until(consumer_waits, 120, "waiting on the row", log)
            cursor.execute("SELECT pg_terminate_backend(%s)", [blocked[0]])
        wait_until(lambda: job_state(job).status == "scored", 120, "scored", log)
    assert_completed_once(job)
    assert "Retry in" in log.read_text()  # the cut report was tried again


def test_a_cancelled_job_stops_and_its_sandboxed_child_is_gone(tmp_path: Path,
                                                               release: Release) -> None:
    eval_log = tmp_path / "eval.log"
    with results_worker(tmp_path), celery_worker("eval.H200", eval_log, name="eval") as worker:
        job = upload(release, slow_candidate(3600))  # never finishes on its own
        # two sandboxes below the worker: the job's child and the one kept for the next job
        wait_until(lambda: job_state(job).status == "running"
                   and len(_direct_children(worker.pid)) == 2, 120, "running in a child",
                   eval_log)
        # each sandbox's whole tree, taken now (the warm one may still be starting processes)
        sandboxes = {child: [child, *descendants(child)]
                     for child in _direct_children(worker.pid)}
        client = Client()
        client.force_login(member_of(job.candidate.submission.team, "erin"))
        response = client.post(f"/api/submissions/{job.candidate.submission_id}/cancel/")
        assert response.status_code == 200 and response.json()["status"] == "cancelled"
        # The task ends once its child is gone: the PID namespace's first process outlives
        # unshare (and stops being the worker's descendant) while it tears down, and the
        # sandbox waits for it.
        wait_until(lambda: f"{attempt_task_id(job.pk, 1)}] succeeded" in eval_log.read_text(),
                   60, "the task ended", eval_log)
        # The job's sandbox is gone, every process of it; the warm one waits for the next job.
        survivors = _direct_children(worker.pid)
        assert len(survivors) == 1 and survivors[0] in sandboxes
        (job_sandbox,) = [tree for child, tree in sandboxes.items() if child not in survivors]
        assert len(job_sandbox) >= 2  # unshare and what runs inside it
        assert all(not Path(f"/proc/{pid}").exists() or _zombie(pid) for pid in job_sandbox)
    job.refresh_from_db()
    assert job.status == "cancelled" and not ShapeResult.objects.filter(job=job).exists()


def _direct_children(pid: int) -> list[int]:
    parents = {int(p.name): _parent(int(p.name)) for p in Path("/proc").iterdir()
               if p.name.isdigit()}
    return [child for child, parent in parents.items() if parent == pid and not _zombie(child)]


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True
