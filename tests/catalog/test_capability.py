"""What the portal can evaluate, from what its workers announce: which hardware they serve,
on a GPU or in Triton's CPU interpreter, and which releases have shapes the jobs here
evaluate. The upload form, the release API and the refusals say it in plain words."""

from __future__ import annotations

import html
import re
import shutil
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.utils import timezone

from evaluation.catalog.capability import portal_capability, worker_announced
from evaluation.catalog.importing import release_import
from evaluation.catalog.models import EvaluationWorker, Release
from evaluation.protocol import Announcement, decode_announcement
from submissions.models import Submission
from tests.paths import FIXTURE_RELEASE, SAMPLE_CANDIDATES
from tests.worker import pipeline_workers
from tests.world import World, signed_in

CPU_WORKER = Announcement(worker="eval@cpu", queues=("eval.H200", "eval.H100", "eval.H200.low"),
                          mode="cpu-interpreter", device="cpu", dsls=("triton",))
GPU_WORKER = Announcement(worker="eval@gpu0", queues=("eval.H200", "eval.H200.low"), mode="gpu",
                          device="NVIDIA H200", dsls=("triton", "gluon", "cute"))


def without_dev_tier(tmp_path: Path) -> Release:
    """A release like atrex-bench: no dev-tier shape, so nothing for a CPU portal to run."""
    import json

    copy = tmp_path / "no-dev-release"
    shutil.copytree(FIXTURE_RELEASE, copy)
    for shapes in copy.glob("data/*/shapes.json"):
        doc = json.loads(shapes.read_text())
        shapes.write_text(json.dumps({k: v for k, v in doc.items() if not k.startswith("dev-")}))
    for hidden in [*copy.glob("data/*/roofline.json"), *copy.glob("data/*/metadata.json")]:
        doc = json.loads(hidden.read_text())
        if isinstance(doc.get("shapes"), dict):
            doc["shapes"] = {k: v for k, v in doc["shapes"].items() if not k.startswith("dev-")}
        hidden.write_text(json.dumps(doc))
    return release_import(path=copy).release


def test_an_announcement_names_the_hardware_of_its_team_queues() -> None:
    decoded = decode_announcement(CPU_WORKER.payload())
    assert decoded == CPU_WORKER and decoded.hardware == ("H200", "H100")
    assert decode_announcement({"queues": ["eval.H200"]}) is None  # no worker name
    assert decode_announcement({"worker": "w", "queues": "eval.H200"}) is None


@pytest.mark.django_db
def test_a_cpu_portal_says_it_has_no_gpu_worker_and_what_it_checks(world: World,
                                                                   settings: Any) -> None:
    settings.ATREX_SHAPE_FILTER = "dev-*"
    worker_announced(CPU_WORKER.payload())
    capability = portal_capability()
    assert capability.workers_known and not capability.gpu
    assert capability.interpreter == ("H100", "H200")
    assert not capability.can_rank("H200") and capability.serves("H100")
    assert capability.summary().startswith(
        "This portal has no GPU worker: it checks atrex-fixture on the dev tier")


@pytest.mark.django_db
def test_a_gpu_worker_makes_its_hardware_rankable(world: World) -> None:
    worker_announced(CPU_WORKER.payload())
    worker_announced(GPU_WORKER.payload())
    capability = portal_capability()
    assert capability.gpu == {"H200": "NVIDIA H200"} and capability.interpreter == ("H100",)
    assert capability.can_rank("H200") and not capability.can_rank("H100")
    assert capability.summary() == ("GPU workers serve H200 (NVIDIA H200); they evaluate "
                                    "atrex-fixture on the scored tier.")


@pytest.mark.django_db
def test_a_worker_silent_for_the_stale_time_no_longer_counts(world: World,
                                                             settings: Any) -> None:
    worker_announced(GPU_WORKER.payload(),
                     now=timezone.now() - timedelta(seconds=settings.ATREX_JOB_STALE_SECONDS + 1))
    capability = portal_capability()
    assert not capability.workers_known and capability.can_rank("H200")  # unknown: no refusal
    assert "No evaluation worker has reported" in capability.summary()


@pytest.mark.django_db
def test_an_upload_nothing_here_can_evaluate_is_refused_in_plain_words(
        world: World, settings: Any, tmp_path: Path) -> None:
    settings.ATREX_SHAPE_FILTER = "dev-*"
    bench = without_dev_tier(tmp_path)
    worker_announced(CPU_WORKER.payload())
    reply = signed_in(world.ruby).post("/submit/", {
        "release": bench.pk, "hardware": "H200", "mode": "check",
        "file": SimpleUploadedFile("rms_norm.py", (SAMPLE_CANDIDATES / "rms_norm" /
                                                   "triton_native.py").read_bytes())})
    page = html.unescape(reply.content.decode())
    assert reply.status_code == 400
    assert ("This portal has no GPU worker: it checks atrex-fixture on the dev tier, and "
            "no-dev-release v1 (rms_norm) has no shape there.") in page
    assert re.search(r'<label id="field-release" class="invalid">', page)
    assert "shape filter" not in page and not Submission.objects.exists()


@pytest.mark.django_db
def test_a_cpu_portals_form_offers_checks_only_on_what_it_evaluates(
        world: World, settings: Any, tmp_path: Path) -> None:
    settings.ATREX_SHAPE_FILTER = "dev-*"
    bench = without_dev_tier(tmp_path)
    worker_announced(CPU_WORKER.payload())
    page = signed_in(world.ruby).get("/submit/").content.decode()
    assert 'value="ranked"' not in page and 'id="no-ranked"' in page
    assert re.search(r'<input type="radio" name="mode" value="check" checked>', page)
    assert re.search(rf'<option value="{world.release.pk}" selected>atrex-fixture v1 \(newest\)',
                     page)
    assert re.search(rf'<option value="{bench.pk}" disabled>no-dev-release v1 \(newest; not '
                     r"evaluated here\)", page)
    assert re.search(r'<option value="H200" selected>H200 \(no GPU: Triton', page)
    assert re.search(r'<option value="MI300X" disabled>MI300X \(no worker\)', page)
    assert "Interpreter checks do not count against a quota" in page


@pytest.mark.django_db
def test_a_gpu_portals_form_offers_ranked_on_the_gpus_hardware(world: World) -> None:
    worker_announced(GPU_WORKER.payload())
    page = signed_in(world.ruby).get("/submit/").content.decode()
    assert re.search(r'<input type="radio" name="mode" value="ranked" checked>', page)
    assert re.search(r'<option value="H200" selected>H200 \(GPU: NVIDIA H200\)', page)


@pytest.mark.django_db
def test_the_release_api_says_what_is_evaluated_here_and_which_version_is_newest(
        world: World, settings: Any, tmp_path: Path) -> None:
    settings.ATREX_SHAPE_FILTER = "dev-*"
    bench = without_dev_tier(tmp_path)
    worker_announced(CPU_WORKER.payload())
    releases = {r["name"]: r for r in Client().get("/api/releases/").json()}
    fixture = releases["atrex-fixture"]
    dev_shapes = sum(op.shapes.filter(shape_id__startswith="dev-").count()
                     for op in world.release.operators.all())
    assert (fixture["evaluated_shapes"], fixture["ranked_on"], fixture["checked_on"]) == (
        dev_shapes, [], ["H100", "H200"])
    assert fixture["newest"] and fixture["superseded_by"] is None
    assert releases[bench.name]["evaluated_shapes"] == 0
    capability = Client().get("/api/capability/").json()
    assert capability["interpreter"] == ["H100", "H200"] and capability["gpu"] == {}
    assert capability["summary"].startswith("This portal has no GPU worker")


@pytest.mark.django_db(transaction=True)
def test_a_real_worker_announces_itself_when_it_starts(tmp_path: Path) -> None:
    with pipeline_workers(tmp_path):
        deadline = time.monotonic() + 60
        while not EvaluationWorker.objects.exists() and time.monotonic() < deadline:
            time.sleep(0.5)
    worker = EvaluationWorker.objects.get()
    assert worker.hardware == ["H200"] and worker.mode == "cpu-interpreter"
    assert worker.device == "cpu" and "triton" in worker.dsls and "cute" not in worker.dsls
