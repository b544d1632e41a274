"""submission_create: nothing stored for a bad upload; quotas hold under concurrency."""

from __future__ import annotations

import re
import threading
from unittest import mock

import pytest
from django.db import connection

from evaluation.catalog.models import HardwareProfile, Release
from portal.accounts.models import Team
from submissions.models import Candidate, EvaluationJob, Submission
from submissions.services import QuotaExceeded, quota_status, submission_create
from submissions.upload import UploadRejected
from tests.factories import TeamFactory
from tests.paths import SAMPLE_CANDIDATES
from tests.uploads import make_tgz, make_zip
from tests.world import import_fixture_release

HONEST = (SAMPLE_CANDIDATES / "rms_norm" / "triton_native.py").read_bytes()


def upload(team: Team, release: Release, filename: str = "rms_norm.py", data: bytes = HONEST,
           **kwargs: object) -> Submission:
    return submission_create(team=team, user=None, release=release,
                             hardware=HardwareProfile.objects.get(name="H200"),
                             filename=filename, data=data, **kwargs)  # type: ignore[arg-type]


GOOD = b"class Model:\n    pass\n"
BAD_UPLOADS = [
    ("nope.py", HONEST, "no operator named 'nope'"),
    ("rms_norm.py", b"\xff\xfe", "not UTF-8"),
    ("rms_norm.py", b"def f(:\n", "syntax error"),
    ("rms_norm.py", b"x = 1\n", "no class Model"),
    ("a.zip", make_zip([("../rms_norm.py", GOOD)]), "'..'"),
    ("a.tar.gz", make_tgz([("/abs/rms_norm.py", GOOD)]), "absolute paths"),
    ("a.zip", make_zip([("rms_norm.py", GOOD)], symlink="gemm_fp16.py"), "symbolic links"),
    ("a.zip", make_zip([("inner.zip", b"PK")]), "archives inside archives"),
    ("a.tar.gz", make_tgz([("rms_norm.py", b"#" * (40 * 1024 * 1024))]), "decompression bomb"),
    ("a.zip", make_zip([("rms_norm.py", GOOD), ("rms_norm.py", GOOD)]), "appears twice"),
    ("a.zip", make_zip([]), "holds no files"),
    ("rms_norm.py", b"#" * (2 * 1024 * 1024), "limit is 1048576 bytes"),
    ("a.zip", make_zip([("rms_norm.py", GOOD), ("gemm_fp16.py", b"x = 1\n")]), "no class Model"),
]


@pytest.mark.parametrize(("filename", "data", "message"), BAD_UPLOADS,
                         ids=[m for _, _, m in BAD_UPLOADS])
def test_a_bad_upload_stores_nothing(release: Release, filename: str, data: bytes,
                                     message: str) -> None:
    team = TeamFactory()
    with pytest.raises(UploadRejected, match=re.escape(message)):
        upload(team, release, filename, data)
    assert Submission.objects.count() == Candidate.objects.count() == 0
    assert EvaluationJob.objects.count() == 0


def test_an_upload_creates_one_queued_job_per_operator(release: Release) -> None:
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for op in ("rms_norm", "silu_and_mul"):
            archive.writestr(f"{op}.py", (SAMPLE_CANDIDATES / op / "triton_native.py").read_bytes())
    submission = upload(TeamFactory(), release, "both.zip", buffer.getvalue(), agent="codex")
    jobs = EvaluationJob.objects.filter(candidate__submission=submission)
    totals = {j.candidate.operator.name: j.shapes_total for j in jobs}
    # The default filter is the scored tier: every shape but the two dev-* ones.
    assert totals == {"rms_norm": 6, "silu_and_mul": 5}
    assert not any(s.startswith("dev-") for j in jobs for s in j.shape_ids)
    assert sum(len(j.shape_ids) for j in jobs) == 11
    assert {j.status for j in jobs} == {"queued"}
    assert submission.agent == "codex"


def test_the_daily_quota_is_enforced_and_reported(release: Release) -> None:
    team = TeamFactory(daily_submission_quota=2, concurrent_job_quota=10)
    upload(team, release)
    upload(team, release)
    with pytest.raises(QuotaExceeded, match="daily quota of 2"):
        upload(team, release)
    status = quota_status(team)
    assert status.used_today == 2 and status.remaining_today == 0
    assert status.resets_at.hour == 0


def test_infrastructure_failures_do_not_count(release: Release) -> None:
    team = TeamFactory(daily_submission_quota=1, concurrent_job_quota=10)
    first = upload(team, release)
    EvaluationJob.objects.filter(candidate__submission=first).update(
        status="failed", infrastructure_failure=True)
    upload(team, release)  # the failed one does not use the quota
    assert quota_status(team).used_today == 1


def test_the_concurrent_quota_counts_submissions_still_evaluating(release: Release) -> None:
    team = TeamFactory(daily_submission_quota=10, concurrent_job_quota=1)
    first = upload(team, release)
    with pytest.raises(QuotaExceeded, match="still being evaluated"):
        upload(team, release)
    EvaluationJob.objects.filter(candidate__submission=first).update(status="scored")
    upload(team, release)


@pytest.mark.django_db(transaction=True)
def test_eight_concurrent_uploads_never_overrun_the_quota() -> None:
    release = import_fixture_release()
    team = TeamFactory(daily_submission_quota=3, concurrent_job_quota=100)
    outcomes: list[str] = []
    barrier = threading.Barrier(8)

    def one() -> None:
        barrier.wait()
        try:
            upload(team, release)
            outcomes.append("accepted")
        except QuotaExceeded:
            outcomes.append("quota")
        finally:
            connection.close()

    with mock.patch("submissions.jobs.dispatch_job"):
        threads = [threading.Thread(target=one) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
    assert sorted(outcomes) == ["accepted"] * 3 + ["quota"] * 5
    assert Submission.objects.filter(team=team).count() == 3
