"""What the API gives agents (issue 45): scoped tokens honoured and their use audited, an
idempotent upload, a long poll on a submission, an operator's problem with its tolerance,
and the history's best."""

from __future__ import annotations

import io
import json
import threading
import time
import zipfile
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.utils import timezone

from leaderboard.services import rescore_submission, weight_set_from_release
from portal.accounts.models import TokenScope, token_create
from portal.audit.models import AuditEntry
from submissions.models import Candidate, EvaluationJob, Submission
from tests.paths import SAMPLE_CANDIDATES
from tests.world import World

pytestmark = pytest.mark.django_db
NATIVE = (SAMPLE_CANDIDATES / "rms_norm" / "triton_native.py").read_bytes()


def api(token: str) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {token}")


def upload(client: Client, world: World, *, mode: str = "check", key: str | None = None,
           source: bytes = NATIVE, notes: str = "") -> Any:
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key is not None else {}
    return client.post("/api/submissions/", {
        "file": SimpleUploadedFile("rms_norm.py", source), "release": world.release.pk, "hardware": "H200",
        "operator": "rms_norm", "mode": mode, "notes": notes, "harness": "claude-code",
        "input_tokens": 900, "output_tokens": 120}, **headers)


def token(world: World, scope: str) -> str:
    return token_create(team=world.red, name=f"{scope}-token", created_by=world.ruby,
                        scope=scope)[1]


def test_a_checks_only_token_submits_checks_and_is_refused_a_ranked_submission(
        world: World) -> None:
    client = api(token(world, TokenScope.CHECK))
    refused = upload(client, world, mode="ranked")
    assert refused.status_code == 403
    assert "checks only" in refused.json()["detail"]
    assert not Submission.objects.exists()
    refusal = AuditEntry.objects.get(action="token.refused")
    assert refusal.after["scope"] == "check" and refusal.after["needed"] == "full"

    made = upload(client, world, mode="check")
    assert made.status_code == 201, made.content
    assert made.json()["harness"] == "claude-code" and made.json()["input_tokens"] == 900
    use = AuditEntry.objects.get(action="submission.create")
    assert use.target == f"submission:{made.json()['id']}" and use.after["scope"] == "check"
    assert use.actor == world.ruby


def test_a_read_only_token_reads_but_changes_nothing(world: World) -> None:
    client = api(token(world, TokenScope.READ))
    assert upload(client, world).status_code == 403
    submission = Submission.objects.create(team=world.red, release=world.release,
                                           hardware=world.h200, mode="check")
    assert client.get(f"/api/submissions/{submission.pk}/").status_code == 200
    assert client.post(f"/api/submissions/{submission.pk}/cancel/").status_code == 403
    assert client.get("/api/quota/").status_code == 200
    assert client.get("/api/token/").json() == {
        "team": "Red", "name": "read-token", "prefix": client.get("/api/token/").json()["prefix"],
        "scope": "read", "created_at": client.get("/api/token/").json()["created_at"]}


def test_a_checks_only_token_cancels_a_check_but_not_a_ranked_submission(world: World) -> None:
    client = api(token(world, TokenScope.CHECK))
    ranked = Submission.objects.create(team=world.red, release=world.release,
                                       hardware=world.h200, mode="ranked")
    check = Submission.objects.create(team=world.red, release=world.release,
                                      hardware=world.h200, mode="check")
    assert client.post(f"/api/submissions/{ranked.pk}/cancel/").status_code == 403
    assert client.post(f"/api/submissions/{check.pk}/cancel/").status_code == 200
    assert AuditEntry.objects.filter(action="submission.cancel",
                                     target=f"submission:{check.pk}").count() == 1


def test_a_token_made_on_the_team_page_has_the_scope_chosen(world: World) -> None:
    page = Client()
    page.force_login(world.ruby)
    answer = page.post("/team/", {"token_name": "agent", "token_scope": "check"})
    assert answer.status_code == 200
    made = world.red.tokens.get(name="agent")
    assert made.scope == "check"
    assert "checks only" in answer.content.decode()
    created = AuditEntry.objects.get(action="token.create")
    assert created.after["scope"] == "check" and created.actor == world.ruby
    # posted without a scope (older scripts): full, as every token was before scopes
    page.post("/team/", {"token_name": "old-script"})
    assert world.red.tokens.get(name="old-script").scope == "full"


def test_a_repeated_upload_with_one_idempotency_key_makes_one_submission(world: World) -> None:
    client = api(token(world, TokenScope.FULL))
    first = upload(client, world, mode="ranked", key="retry-1")
    again = upload(client, world, mode="ranked", key="retry-1")
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["id"] == first.json()["id"] and again["Idempotent-Replayed"] == "true"
    assert Submission.objects.count() == 1
    assert client.get("/api/quota/").json()["used_today"] == 1  # charged once
    other = upload(client, world, mode="ranked", key="retry-1", notes="another upload")
    assert other.status_code == 409 and "different upload" in other.json()["detail"]
    fresh = upload(client, world, mode="ranked", key="retry-2")
    assert fresh.status_code == 201 and Submission.objects.count() == 2
    assert AuditEntry.objects.filter(action="submission.create").count() == 2


def _scored_later(submission: Submission, after_s: float) -> threading.Thread:
    def finish() -> None:
        time.sleep(after_s)
        EvaluationJob.objects.filter(candidate__submission=submission).update(
            status="scored", attempts=1, finished_at=timezone.now())
        rescore_submission(submission)

    return threading.Thread(target=finish)


@pytest.mark.django_db(transaction=True)
def test_a_long_poll_answers_when_the_evaluation_settles_not_before(world: World) -> None:
    weight_set_from_release(world.release)
    client = api(token(world, TokenScope.READ))
    submission = Submission.objects.create(team=world.red, release=world.release,
                                           hardware=world.h200, mode="check")
    candidate = Candidate.objects.create(submission=submission, operator=world.release
                                         .operators.get(name="rms_norm"), source="x",
                                         sha256="0" * 64)
    EvaluationJob.objects.create(candidate=candidate, shapes_total=0)
    started = time.monotonic()
    waited = client.get(f"/api/submissions/{submission.pk}/?wait=1")
    assert waited.json()["status"] == "queued" and time.monotonic() - started >= 1.0
    finisher = _scored_later(submission, 1.5)
    finisher.start()
    started = time.monotonic()
    settled = client.get(f"/api/submissions/{submission.pk}/?wait=30")
    elapsed = time.monotonic() - started
    finisher.join()
    assert settled.json()["status"] == "scored" and settled.json()["score"]["current"]
    assert 1.0 <= elapsed < 10.0  # answered when it settled, not at the 30 s limit
    assert client.get(f"/api/submissions/{submission.pk}/?wait=-1").status_code == 400


def test_an_operators_problem_and_its_bundle_carry_the_portals_tolerance(world: World) -> None:
    hidden = world.release.operators.get(name="rms_norm").hidden
    problem = Client().get(f"/api/releases/{world.release.pk}/operators/rms_norm/").json()
    assert problem["tolerance"] == {"atol": hidden.atol, "rtol": hidden.rtol}
    assert set(problem["files"]) == {"reference.py", "input.py", "shapes.json"}
    shape = next(s for s in problem["shapes"] if not s["dev_tier"])
    assert "H200" in shape["regime"] and shape["regime"]["H200"] in ("memory", "compute")
    assert "roofline" not in json.dumps(problem["files"])  # hidden files stay hidden
    bundle = Client().get(f"/api/releases/{world.release.pk}/bundle/?operator=rms_norm")
    with zipfile.ZipFile(io.BytesIO(bundle.content)) as archive:
        tolerances = json.loads(archive.read(f"{world.release.name}/tolerances.json"))
        assert not any(n.endswith(("metadata.json", "roofline.json")) for n in archive.namelist())
    assert tolerances == {"rms_norm": {"atol": hidden.atol, "rtol": hidden.rtol}}
