"""Hardware profiles: an import never changes a stored one; an admin's change is a new version
that rescales every stored result on that hardware and rescores the boards, or changes nothing."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from evaluation.catalog.importing import HardwareProfileError, release_import
from evaluation.catalog.models import HardwareProfile, HardwareProfileVersion, Release
from evaluation.harness.release import ReleaseError
from leaderboard.hardware import hardware_profile_update
from leaderboard.models import SubmissionScore, WeightSet
from leaderboard.services import rescore_submission, weight_set_from_release
from portal.audit.models import AuditEntry
from submissions.jobs import record_event
from submissions.models import EvaluationJob, ShapeResult, Submission
from submissions.services import shape_result_review, submission_create
from tests.factories import TeamFactory, UserFactory
from tests.paths import FIXTURE_RELEASE, SAMPLE_CANDIDATES
from tests.world import import_fixture_release

pytestmark = pytest.mark.django_db

RESULT_FIELDS = ("sol_s", "attainment", "attainment_with_floor", "suspicious")


def stripped_h20_release(tmp_path: Path) -> Path:
    """The fixture release with an H20 YAML like the public release's: no arch, no fp8_e5m2."""
    copy = tmp_path / "atrex-fixture"
    shutil.copytree(FIXTURE_RELEASE, copy)
    yaml = copy / "configs" / "hardware" / "H20.yaml"
    yaml.write_text("\n".join(line for line in yaml.read_text().splitlines()
                              if "arch:" not in line and "fp8_e5m2_tc" not in line) + "\n")
    return copy


def h20_figures() -> tuple[Any, ...]:
    h20 = HardwareProfile.objects.get(name="H20")
    return h20.version, h20.arch, h20.peak_flops, h20.hbm_bytes_per_s, h20.launch_floor_s


def test_an_import_creates_a_missing_profile_as_its_version_1() -> None:
    release_import(path=FIXTURE_RELEASE)
    h200 = HardwareProfile.objects.get(name="H200")
    version = HardwareProfileVersion.objects.get(profile=h200)
    assert (h200.version, version.version) == (1, 1)
    assert (version.peak_flops, version.hbm_bytes_per_s) == (h200.peak_flops, 4.8e12)
    assert "atrex-fixture" in version.note


def test_reimporting_a_release_whose_yaml_lacks_a_path_and_arch_keeps_the_stored_profile(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    call_command("import_release", str(FIXTURE_RELEASE))
    before = h20_figures()
    assert before[1] == "sm_90" and "fp8_e5m2_tc" in before[2]
    stripped = stripped_h20_release(tmp_path)
    capsys.readouterr()

    call_command("import_release", str(stripped))  # new content: a new release version
    out = capsys.readouterr().out
    assert h20_figures() == before
    assert "hardware H20: the release's configs/hardware differs from the stored profile, " \
           "not applied" in out
    assert "  arch: stored sm_90, release none" in out
    assert "  p_peak.fp8_e5m2_tc: stored 2.96e+14, release none" in out
    assert "hardware H200" not in out  # identical figures: nothing to report

    call_command("import_release", str(stripped))  # the same content again
    out = capsys.readouterr().out
    assert "already imported, unchanged: atrex-fixture v2" in out
    assert "p_peak.fp8_e5m2_tc: stored 2.96e+14, release none" in out
    assert h20_figures() == before
    assert HardwareProfileVersion.objects.filter(profile__name="H20").count() == 1


def test_a_release_whose_w_needs_a_path_the_stored_profile_lacks_is_refused() -> None:
    HardwareProfile.objects.create(name="H20", arch="sm_90", peak_flops={"fp32_strict": 4.4e13},
                                   hbm_bytes_per_s=4e12, launch_floor_s=2e-6)
    with pytest.raises(ReleaseError, match=r"hardware profile H20 v1 \(stored\): p_peak\.fp16_tc: "
                                           r"missing, needed by data/causal_attention/roofline.json"):
        release_import(path=FIXTURE_RELEASE)
    assert Release.objects.count() == 0
    assert HardwareProfile.objects.get(name="H20").peak_flops == {"fp32_strict": 4.4e13}


# --- an admin's change ------------------------------------------------------------------


def report(shape_id: str, median_s: float | None, status: str = "passed") -> dict[str, Any]:
    return {"shape_id": shape_id, "status": status, "stage_reached": "performance",
            "adoption": {"verdict": "native", "dsl_ratio": 1.0},
            "timing": {"measured": median_s is not None, "median_s": median_s, "n": 20,
                       "method": "graph"}}


def evaluated(release: Release, hardware: str, times: dict[str, float | None],
              failed: tuple[str, ...] = ()) -> Submission:
    """An rms_norm submission whose job reported every shape (`times`: per shape, the
    measured median; default 1 ms, slower than any SOL) through the results consumer, then
    scored."""
    submission = submission_create(
        team=TeamFactory(), user=None, release=release,
        hardware=HardwareProfile.objects.get(name=hardware), filename="rms_norm.py",
        data=(SAMPLE_CANDIDATES / "rms_norm" / "triton_native.py").read_bytes())
    job = submission.candidates.get().job
    EvaluationJob.objects.filter(pk=job.pk).update(attempts=1)
    job.refresh_from_db()
    shapes = [report(s, times.get(s, 1e-3), "failed" if s in failed else "passed")
              for s in job.shape_ids]
    record_event("result", {"job_id": job.pk, "attempt": 1, "worker": "gpu-1",
                            "result": {"evaluator_version": "test", "shapes": shapes}})
    rescore_submission(submission)  # what the task enqueued on commit does
    return submission


def stored(submission: Submission) -> dict[str, tuple[Any, ...]]:
    return {shape_id: tuple(rest) for shape_id, *rest in ShapeResult.objects.filter(
        job__candidate__submission=submission).values_list("shape__shape_id", *RESULT_FIELDS)}


def score(submission: Submission) -> SubmissionScore:
    return SubmissionScore.objects.get(submission=submission, weight_set__active=True)


@pytest.fixture
def release() -> Release:
    release = import_fixture_release()
    weight_set_from_release(release)
    return release


def update(name: str, actor: Any = None, note: str = "test", **changes: Any) -> Any:
    profile = HardwareProfile.objects.get(name=name)
    figures = {"peak_flops": dict(profile.peak_flops), "hbm_bytes_per_s": profile.hbm_bytes_per_s,
               "launch_floor_s": profile.launch_floor_s, "arch": profile.arch, **changes}
    return hardware_profile_update(profile=profile, actor=actor, note=note, **figures)


def test_doubling_hbm_bandwidth_halves_sol_and_attainment_and_rescores_the_boards(
        release: Release) -> None:
    submission = evaluated(release, "H200", {}, failed=("llama8b-decode-t32-h4096",))
    unmeasured = evaluated(release, "H200", {"llama8b-decode-t1-h4096": None})
    h20_submission = evaluated(release, "H20", {})
    old, old_score = stored(submission), score(submission)
    old_unmeasured, old_h20 = stored(unmeasured), stored(h20_submission)
    assert old_score.aggregate is not None and old_score.aggregate > 0
    admin = UserFactory(username="admin", is_staff=True)

    result = update("H200", actor=admin, note="measured copy bandwidth",
                    hbm_bytes_per_s=2 * 4.8e12)

    new = stored(submission)
    memory_bound = [s for s in old if s != "llama8b-decode-t32-h4096"]
    assert len(memory_bound) == 5
    for shape_id in memory_bound:  # rms_norm is memory-bound on H200: SOL = Q / B
        assert new[shape_id][0] == old[shape_id][0] / 2
        assert new[shape_id][1] == pytest.approx(old[shape_id][1] / 2, rel=1e-12)
        floor = HardwareProfile.objects.get(name="H200").launch_floor_s
        assert new[shape_id][2] == pytest.approx(min(1.0, (new[shape_id][0] + floor) / 1e-3))
        assert new[shape_id][3] is False
    # No measured time: a SOL, no attainment. A failed shape: 0, as the consumer stores them.
    assert new["llama8b-decode-t32-h4096"] == (old["llama8b-decode-t32-h4096"][0] / 2, 0.0,
                                                None, False)
    assert stored(unmeasured)["llama8b-decode-t1-h4096"] == (
        old_unmeasured["llama8b-decode-t1-h4096"][0] / 2, None, None, False)
    assert stored(h20_submission) == old_h20  # other hardware: untouched
    # The boards' stored scores follow: S_op is the median of the halved attainments.
    assert score(submission).aggregate == pytest.approx(old_score.aggregate / 2, rel=1e-9)
    assert score(h20_submission).aggregate is not None

    h200 = HardwareProfile.objects.get(name="H200")
    assert (h200.version, h200.hbm_bytes_per_s) == (2, 9.6e12)
    assert result.version.version == 2 and result.version.author == admin
    assert result.version.note == "measured copy bandwidth"
    assert list(h200.versions.values_list("version", "hbm_bytes_per_s")) == [(2, 9.6e12),
                                                                             (1, 4.8e12)]
    assert (result.submissions, result.releases) == (2, ["atrex-fixture v1"])
    entry = AuditEntry.objects.get(action="hardware.update")
    assert (entry.actor, entry.target) == (admin, "hardware:H200")
    assert (entry.before["hbm_bytes_per_s"], entry.after["hbm_bytes_per_s"]) == (4.8e12, 9.6e12)
    assert (entry.before["version"], entry.after["version"]) == (1, 2)


def test_rescaled_results_equal_what_the_consumer_stores_under_the_new_figures(
        release: Release) -> None:
    earlier = evaluated(release, "H200", {"llama8b-decode-t1-h4096": 3e-6})
    update("H200", hbm_bytes_per_s=3.3e12, launch_floor_s=4e-6)
    later = evaluated(release, "H200", {"llama8b-decode-t1-h4096": 3e-6})
    assert stored(earlier) == stored(later)


def test_a_slower_profile_quarantines_a_result_faster_than_its_new_sol(release: Release) -> None:
    submission = evaluated(release, "H200", {})
    fast = "llama8b-prefill-t4096-h4096"
    sol = ShapeResult.objects.get(job__candidate__submission=submission,
                                  shape__shape_id=fast).sol_s
    other = evaluated(release, "H200", {fast: sol / 0.6})
    accepted = evaluated(release, "H200", {fast: sol / 1.5})  # suspicious, then accepted
    review = ShapeResult.objects.get(job__candidate__submission=accepted, shape__shape_id=fast)
    assert review.suspicious
    shape_result_review(result=review, accept=True, actor=None)
    rescore_submission(accepted)
    assert score(other).ranked and score(accepted).ranked

    update("H200", hbm_bytes_per_s=4.8e12 / 2)

    flagged = stored(other)[fast]
    assert flagged[1] == pytest.approx(1.2) and flagged[3] is True
    assert not score(other).ranked
    assert stored(accepted)[fast][3] is False and score(accepted).ranked  # review stands


INVALID: dict[str, tuple[dict[str, Any], str]] = {
    "negative peak": ({"peak_flops": {"fp32_strict": -1.0, "fp16_tc": 9.89e14}},
                      "H200: p_peak.fp32_strict: must be positive"),
    "zero bandwidth": ({"hbm_bytes_per_s": 0}, "H200: b_peak.hbm: must be positive"),
    "unknown precision path": ({"peak_flops": {"fp4_tc": 1e15, "fp32_strict": 6.7e13,
                                               "fp16_tc": 9.89e14}},
                               "H200: p_peak.fp4_tc: unknown precision path"),
    "negative launch floor": ({"launch_floor_s": -1e-6},
                              "H200: launch.floor_s: must not be negative"),
    "not a number": ({"hbm_bytes_per_s": float("nan")}, "H200: b_peak.hbm: must be a finite"),
    "dropping a path in use": ({"peak_flops": {"fp32_strict": 6.7e13}},
                               "H200: p_peak.fp16_tc: cannot be dropped, the W of "
                               "atrex-fixture v1 causal_attention/"),
    "no change": ({}, "H200: these are the figures of its current version v1"),
}


@pytest.mark.parametrize("case", sorted(INVALID))
def test_an_invalid_update_is_a_clear_error_and_changes_nothing(release: Release,
                                                                case: str) -> None:
    submission = evaluated(release, "H200", {})
    before = (stored(submission), score(submission).aggregate,
              list(HardwareProfile.objects.values()), HardwareProfileVersion.objects.count())
    changes, message = INVALID[case]
    with pytest.raises(HardwareProfileError) as error:
        update("H200", **changes)
    assert message in str(error.value)
    assert (stored(submission), score(submission).aggregate,
            list(HardwareProfile.objects.values()),
            HardwareProfileVersion.objects.count()) == before
    assert not AuditEntry.objects.filter(action="hardware.update").exists()


def test_a_failure_while_rescoring_leaves_nothing_half_applied(release: Release) -> None:
    submission = evaluated(release, "H200", {})
    before = (stored(submission), score(submission).aggregate, h20_figures(),
              list(HardwareProfile.objects.values()), HardwareProfileVersion.objects.count())
    with mock.patch("leaderboard.hardware.rescore_weight_set", side_effect=RuntimeError("boom")), \
            pytest.raises(RuntimeError):
        update("H200", hbm_bytes_per_s=9.6e12)
    assert (stored(submission), score(submission).aggregate, h20_figures(),
            list(HardwareProfile.objects.values()),
            HardwareProfileVersion.objects.count()) == before
    assert not AuditEntry.objects.filter(action="hardware.update").exists()


def test_the_command_shows_versions_and_applies_a_change(
        release: Release, capsys: pytest.CaptureFixture[str]) -> None:
    evaluated(release, "H200", {})
    UserFactory(username="admin", is_staff=True)
    call_command("hardware_profile", "H20", "--peak", "fp8_e5m2_tc=3e14", "--arch", "sm_90a",
                 "--note", "vendor errata", "--actor", "admin")
    h20 = HardwareProfile.objects.get(name="H20")
    assert (h20.version, h20.arch, h20.peak_flops["fp8_e5m2_tc"]) == (2, "sm_90a", 3e14)
    assert "H20: now v2; 0 stored results rescaled" in capsys.readouterr().out

    call_command("hardware_profile", "H20")
    out = capsys.readouterr().out
    assert "H20 v2: arch sm_90a" in out and "p_peak.fp8_e5m2_tc: 3e+14 FLOP/s" in out
    assert "admin: vendor errata" in out and "v1 " in out

    with pytest.raises(CommandError, match="not changed: H200: p_peak.fp4_tc: unknown precision"):
        call_command("hardware_profile", "H200", "--peak", "fp4_tc=1e15", "--note", "x")
    with pytest.raises(CommandError, match="--note is required"):
        call_command("hardware_profile", "H200", "--hbm", "5e12")
    with pytest.raises(CommandError, match=r"no hardware profile named 'B200' \(known: H100"):
        call_command("hardware_profile", "B200")
    assert HardwareProfile.objects.get(name="H200").version == 1
    assert WeightSet.objects.filter(release=release, active=True).count() == 1
