"""A submission declares the DSL of each file; the release says which DSLs it accepts; a
host that cannot evaluate a DSL says so for the job instead of crashing or guessing."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.test import Client

from evaluation.catalog.models import HardwareProfile, Release
from evaluation.harness.dsl import KNOWN_DSLS, SUPPORTED_DSLS
from evaluation.harness.release import ReleaseError, load_release
from evaluation.worker.jobs import run_job_spec
from portal.audit.models import AuditEntry
from submissions.models import Candidate, Submission
from submissions.services import submission_create
from submissions.upload import UploadRejected
from tests.factories import TeamFactory, member_of
from tests.paths import SAMPLE_CANDIDATES

pytestmark = pytest.mark.django_db

NATIVE = (SAMPLE_CANDIDATES / "rms_norm" / "triton_native.py").read_bytes()
SILU = (SAMPLE_CANDIDATES / "silu_and_mul" / "triton_native.py").read_bytes()
PUBLIC = Path(__file__).resolve().parents[3] / "shared" / "atrex-bench"  # beside the checkout


@pytest.fixture()
def sent() -> Any:
    with mock.patch("submissions.jobs.current_app.send_task") as send:
        yield send


def archive(**files: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as out:
        for name, data in files.items():
            out.writestr(f"{name}.py", data)
    return buffer.getvalue()


def create(release: Release, filename: str, data: bytes, dsl: str = "") -> Submission:
    return submission_create(team=TeamFactory(), user=None, release=release,
                             hardware=HardwareProfile.objects.get(name="H200"),
                             filename=filename, data=data, dsl=dsl)


def test_a_release_without_a_list_accepts_the_dsls_the_evaluator_supports(
        dev_release: Release) -> None:
    assert dev_release.accepted_dsls() == SUPPORTED_DSLS == ("triton", "gluon", "cute")


def test_the_public_layout_accepts_every_dsl_the_evaluator_supports() -> None:
    if not PUBLIC.is_dir():
        pytest.skip("the public release is not beside this checkout")
    assert load_release(PUBLIC).settings.accepted_dsls == SUPPORTED_DSLS


@pytest.fixture()
def every_dsl(dev_release: Release) -> Release:
    """The fixture release with every known DSL accepted, as an admin sets it."""
    Release.objects.filter(pk=dev_release.pk).update(dsls=list(KNOWN_DSLS))
    dev_release.refresh_from_db()
    return dev_release


def test_an_undeclared_file_gets_the_default_and_a_declared_one_its_dsl_in_the_job(
        every_dsl: Release, sent: Any, django_capture_on_commit_callbacks: Any) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        plain = create(every_dsl, "rms_norm.py", NATIVE)
        declared = create(every_dsl, "rms_norm.py", NATIVE, dsl="cute")
    assert plain.candidates.get().dsl == "triton"
    assert declared.candidates.get().dsl == "cute"
    specs = [call.kwargs["args"][0] for call in sent.call_args_list]
    assert [spec["dsl"] for spec in specs] == ["triton", "cute"]


def test_each_file_of_an_archive_may_declare_its_own(every_dsl: Release, sent: Any) -> None:
    submission = create(every_dsl, "kernels.zip", archive(rms_norm=NATIVE, silu_and_mul=SILU),
                        dsl="rms_norm=gluon")
    by_operator = {c.operator.name: c.dsl for c in Candidate.objects.filter(submission=submission)}
    assert by_operator == {"rms_norm": "gluon", "silu_and_mul": "triton"}


@pytest.mark.parametrize(("dsl", "message"), [
    ("gluon", "'gluon' (for rms_norm) is not a DSL atrex-fixture v1 accepts; it accepts triton, cute"),
    ("flydsl", "'flydsl' (for rms_norm) is not a DSL"),
    ("gemm=cute", "'gemm' is not a file of this upload (its files: rms_norm)"),
])
def test_a_dsl_the_release_does_not_accept_is_refused_with_nothing_stored(
        dev_release: Release, sent: Any, dsl: str, message: str) -> None:
    Release.objects.filter(pk=dev_release.pk).update(dsls=["triton", "cute"])
    dev_release.refresh_from_db()
    before = Submission.objects.count()
    with pytest.raises(UploadRejected, match=message.replace("(", r"\(").replace(")", r"\)")):
        create(dev_release, "rms_norm.py", NATIVE, dsl=dsl)
    assert Submission.objects.count() == before and not sent.called


def test_the_api_and_the_page_take_and_show_the_declared_dsl(every_dsl: Release,
                                                             sent: Any) -> None:
    dev_release = every_dsl
    team = TeamFactory()
    client = Client()
    client.force_login(member_of(team, "dee"))
    reply = client.post("/api/submissions/", {
        "file": SimpleUploadedFile("rms_norm.py", NATIVE), "release": dev_release.pk,
        "hardware": "H200", "dsl": "cute"})
    assert reply.status_code == 201, reply.content
    detail = client.get(f"/api/submissions/{reply.json()['id']}/").json()
    assert [job["dsl"] for job in detail["jobs"]] == ["cute"]
    page = client.get(f"/submissions/{reply.json()['id']}/").content.decode()
    assert 'class="badge dsl"' in page and ">cute</span>" in page
    refused = client.post("/api/submissions/", {
        "file": SimpleUploadedFile("rms_norm.py", NATIVE), "release": dev_release.pk,
        "hardware": "H200", "dsl": "cobol"})
    assert refused.status_code == 400 and "'cobol' (for rms_norm) is not a DSL" in \
        refused.content.decode()


def test_an_admin_sets_the_accepted_dsls_and_the_audit_log_keeps_it(dev_release: Release) -> None:
    out = io.StringIO()
    call_command("release_dsls", str(dev_release.pk), "--set", "cute,triton,flydsl",
                 "--note", "CuTe first for this round", stdout=out)
    dev_release.refresh_from_db()
    assert dev_release.accepted_dsls() == ("cute", "triton", "flydsl")
    entry = AuditEntry.objects.get(action="release.dsls")
    assert entry.before == {"dsls": ["triton", "gluon", "cute"]}
    assert "no adapter for flydsl yet" in out.getvalue()
    assert "for cute" not in out.getvalue()
    assert entry.after == {"dsls": ["cute", "triton", "flydsl"],
                           "note": "CuTe first for this round"}
    with pytest.raises(CommandError, match="name each DSL once"):
        call_command("release_dsls", str(dev_release.pk), "--set", "cute,rust", "--note", "x")
    with pytest.raises(CommandError, match="--note is required"):
        call_command("release_dsls", str(dev_release.pk), "--set", "triton")


def test_a_release_file_naming_an_unknown_dsl_is_refused(tmp_path: Path) -> None:
    import shutil

    from tests.paths import FIXTURE_RELEASE

    copy = tmp_path / "release"
    shutil.copytree(FIXTURE_RELEASE, copy)
    (copy / "release.json").write_text('{"dsl": "triton", "dsls": ["triton", "fortran"]}')
    with pytest.raises(ReleaseError, match="unknown DSL"):
        load_release(copy)


@pytest.mark.parametrize(("dsl", "reason"), [
    ("gluon", "this host cannot evaluate Gluon: its kernels need a GPU"),
    ("cute", "this host cannot evaluate CuTe DSL: its kernels need an NVIDIA GPU"),
])
def test_a_host_that_cannot_evaluate_the_dsl_says_so_for_the_job(dsl: str, reason: str) -> None:
    from evaluation.harness.evaluate import EvaluationSettings
    from evaluation.protocol import job_spec
    from tests.paths import FIXTURE_RELEASE

    operator = FIXTURE_RELEASE / "data" / "rms_norm"
    spec = job_spec(job_id=1, attempt=1, operator="rms_norm",
                    reference_py=(operator / "reference.py").read_text(),
                    input_py=(operator / "input.py").read_text(),
                    shapes_json=(operator / "shapes.json").read_text(),
                    candidate_source=NATIVE.decode(), atol=1e-2, rtol=1e-2, dsl=dsl,
                    dsl_ratio_threshold=0.95, hardware="H200", seed=1)
    events: list[tuple[str, dict[str, Any]]] = []
    run_job_spec(spec, lambda kind, payload: events.append((kind, payload)),
                 EvaluationSettings(device="cpu"))
    assert [kind for kind, _ in events] == ["failed"]
    assert events[0][1]["reason"].startswith(reason) and events[0][1]["infrastructure"] is False
