"""A team's ncu profile of one shape, as the team meets it: asked for on the API, the page
or the command line, sent to the GPU host with that public shape alone, refused for a hidden
shape, another team or an exhausted quota, and shown per kernel once a GPU worker's result
(recorded on the H200 with the candidate in its sandbox) comes back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from django.test import Client

from evaluation.catalog.importing import release_import
from evaluation.catalog.models import HardwareProfile, Release
from evaluation.harness.isolation.sandbox import SandboxSettings
from evaluation.protocol import NCU_PROFILE_TASK
from evaluation.worker.jobs import run_ncu_profile_spec
from portal.accounts.models import token_create
from submissions.models import EvaluationJob, NcuProfile, Submission
from submissions.ncu import record_ncu_profile
from submissions.services import submission_create
from tests.factories import TeamFactory, member_of
from tests.hidden_tier import (
    HIDDEN_DEV,
    hidden_tier_release,
    report_job,
    shape_report,
    without_hold,
)
from tests.paths import REPO, SAMPLE_CANDIDATES
from tests.world import World, build_world, extended

RECORDED = json.loads((Path(__file__).parents[1] / "evaluation" / "data" / "ncu" /
                       "ncu-sandboxed.json").read_text())
NATIVE = (SAMPLE_CANDIDATES / "rms_norm" / "triton_native.py").read_bytes()


@dataclass(frozen=True)
class ProfiledWorld(World):
    submission: Submission  # Red's honest rms_norm, evaluated on every shape


@pytest.fixture
def world(tmp_path: Path, settings: Any) -> ProfiledWorld:
    """The shared world on a release with a hidden tier."""
    settings.ATREX_SHAPE_FILTER = "dev-*"
    world = build_world(release=without_hold(
        release_import(path=hidden_tier_release(tmp_path)).release))
    with mock.patch("submissions.jobs.current_app.send_task"):
        submission = submission_create(team=world.red, user=None, release=world.release,
                                       hardware=world.h200, filename="rms_norm.py", data=NATIVE)
    job = submission.candidates.get().job
    EvaluationJob.objects.filter(pk=job.pk).update(attempts=1)
    job.refresh_from_db()
    with mock.patch("submissions.jobs.current_app.send_task"):
        report_job(job, [shape_report(shape_id, median_s=2e-6)
                         for shape_id in (*job.shape_ids, *job.hidden_shape_ids)])
    return extended(world, ProfiledWorld, submission=submission)


def ask(client: Client, submission: Submission, shape: str) -> Any:
    with mock.patch("submissions.ncu.current_app.send_task") as send:
        response = client.post(f"/api/submissions/{submission.pk}/ncu/",
                               {"operator": "rms_norm", "shape": shape})
    return response, send


@pytest.mark.django_db
def test_a_team_asks_for_one_public_shape_and_the_gpu_host_gets_that_shape_alone(
        world: ProfiledWorld, django_capture_on_commit_callbacks: Any) -> None:
    client = Client()
    client.force_login(world.ruby)
    with mock.patch("submissions.ncu.current_app.send_task") as send, \
            django_capture_on_commit_callbacks(execute=True):  # sent once the request commits
        response = client.post(f"/api/submissions/{world.submission.pk}/ncu/",
                               {"operator": "rms_norm", "shape": "dev-t3-h200"})
    assert response.status_code == 202, response.content
    assert response.json()["status"] == "queued"
    assert send.call_args.args[0] == NCU_PROFILE_TASK
    assert send.call_args.kwargs["queue"] == "eval.H200"
    spec = send.call_args.kwargs["args"][0]
    assert spec["shape_id"] == "dev-t3-h200"
    assert list(json.loads(spec["operator"]["shapes_json"])) == ["dev-t3-h200"]
    assert HIDDEN_DEV not in json.dumps(spec)
    # a GPU host without ncu answers with why, and the page says so
    result = run_ncu_profile_spec(spec, SandboxSettings())
    if result["kernels"] == []:  # this machine: no ncu, or no GPU
        record_ncu_profile({"profile_id": spec["profile_id"], "worker": "w", "result": result})
        assert NcuProfile.objects.get().status == "failed"
        assert NcuProfile.objects.get().error


@pytest.mark.django_db
def test_a_hidden_shape_another_team_and_a_spent_quota_are_refused(
        world: ProfiledWorld, settings: Any) -> None:
    member, other = Client(), Client()
    member.force_login(world.ruby)
    other.force_login(world.bert)
    response, send = ask(member, world.submission, HIDDEN_DEV)
    assert response.status_code == 404 and not send.called
    assert HIDDEN_DEV in response.content.decode()  # the team's own words, echoed: no more
    assert "no shape" in response.content.decode()
    response, _ = ask(other, world.submission, "dev-t3-h200")
    assert response.status_code == 404  # another team's submission: as if there were none
    settings.ATREX_NCU_PROFILES_PER_DAY = 1
    assert ask(member, world.submission, "dev-t3-h200")[0].status_code == 202
    response, _ = ask(member, world.submission, "dev-t4-h256")
    assert response.status_code == 429 and "daily quota of 1 ncu profiles" in response.content.decode()
    assert NcuProfile.objects.count() == 1


@pytest.mark.django_db
def test_a_recorded_h200_result_is_shown_per_kernel_on_the_page_and_the_api(
        world: ProfiledWorld) -> None:
    client = Client()
    client.force_login(world.ruby)
    made = ask(client, world.submission, "dev-t3-h200")[0].json()
    recorded = RECORDED["rms_norm-torch-fallback"]
    record_ncu_profile({"profile_id": made["id"], "worker": "gpu0@h200", "result": recorded})
    record_ncu_profile({"profile_id": made["id"], "worker": "late", "result": {}})  # ignored
    profile = NcuProfile.objects.get()
    assert profile.status == "done" and profile.worker == "gpu0@h200"
    [listed] = client.get(f"/api/submissions/{world.submission.pk}/ncu/").json()
    assert len(listed["kernels"]) == 8 and listed["clocks"] == recorded["clocks"]
    assert {k["limited_by"] for k in listed["kernels"]} >= {"L2", "latency"}
    page = client.get(f"/submissions/{world.submission.pk}/").content.decode()
    assert "Hardware counters (ncu)" in page and "reduce_kernel" in page
    assert "Limited by" in page and "Profile with ncu" in page
    assert HIDDEN_DEV not in page  # the form offers the public shapes the job covered


@pytest.mark.django_db(transaction=True)
def test_atrex_profile_ncu_asks_and_prints_the_counters(live_server: Any, tmp_path: Path,
                                                        settings: Any) -> None:
    settings.ATREX_SHAPE_FILTER = "dev-*"
    release: Release = without_hold(release_import(path=hidden_tier_release(tmp_path)).release)
    team = TeamFactory(name="Cli")
    _, token = token_create(team=team, name="cli", created_by=member_of(team, "cli-user"))
    with mock.patch("submissions.jobs.current_app.send_task"):
        submission = submission_create(team=team, user=None, release=release,
                                       hardware=HardwareProfile.objects.get(name="H200"),
                                       filename="rms_norm.py", data=NATIVE)
    env = {**os.environ, "ATREX_SERVER": live_server.url, "ATREX_TOKEN": token,
           "HOME": str(tmp_path / "home")}

    def atrex(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "atrex_cli", *args], env=env, cwd=REPO,
                              capture_output=True, text=True, timeout=120)

    asked = atrex("profile", str(submission.pk), "--ncu", "--operator", "rms_norm", "--shape",
                  "dev-t4-h256", "--json")
    assert asked.returncode == 0, asked.stderr
    made = json.loads(asked.stdout)
    assert made["status"] == "queued" and made["shape"] == "dev-t4-h256"
    record_ncu_profile({"profile_id": made["id"], "worker": "w",
                        "result": RECORDED["rms_norm-triton"]})
    shown = atrex("profile", str(submission.pk), "--ncu")
    assert shown.returncode == 0, shown.stderr
    assert "_rms_norm_kernel" in shown.stdout and "L2" in shown.stdout
    assert "SM clock seen 1.95 GHz" in shown.stdout
    refused = atrex("profile", str(submission.pk), "--ncu", "--operator", "rms_norm",
                    "--shape", HIDDEN_DEV)
    assert refused.returncode != 0 and "no shape" in refused.stderr


@pytest.mark.django_db
def test_a_portal_whose_workers_have_no_gpu_offers_no_ncu_profile(world: ProfiledWorld) -> None:
    from evaluation.catalog.capability import worker_announced

    worker_announced({"worker": "eval@cpu", "queues": ["eval.H200"], "mode": "cpu-interpreter",
                      "device": "cpu", "dsls": ["triton"]})
    member = Client()
    member.force_login(world.ruby)
    page = member.get(f"/submissions/{world.submission.pk}/").content.decode()
    assert 'id="ncu-unavailable"' in page and 'class="ncu-request"' not in page
    response, send = ask(member, world.submission, "dev-t3-h200")
    assert response.status_code == 400 and "need a GPU worker for H200" in response.content.decode()
    assert not send.called and not NcuProfile.objects.exists()
