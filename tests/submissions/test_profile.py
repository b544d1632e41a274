"""Profile feedback on a team's own submission: per shape the kernels that ran with their
device times and shares, the DSL ratio, the attainment with and without the launch floor and
the achieved fraction of peak, on the submission page and as JSON; nothing hidden."""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema
import pytest
from django.test import Client

from evaluation.catalog.models import HardwareProfile
from submissions.profile import kernels_of
from submissions.services import submission_create
from tests.factories import TeamFactory, member_of
from tests.paths import REPO
from tests.reports import GEMM_SHAPE, H200_ENVIRONMENT, RMS_SHAPE, gpu_shape, gpu_submission, native
from tests.world import import_fixture_release, signed_in

pytestmark = pytest.mark.django_db

RMS_SOL_S, GEMM_SOL_S = 13.98272e-6, 138.96759703943377e-6
# What `python -m evaluation evaluate` wrote on one H200 (2026-12-01, torch 2.11, triton 3.6)
# for the fixture's sample candidates: the adoption stage's `kernels` as a GPU records them.
H200_RESULTS = REPO / "tests" / "submissions" / "data" / "h200"
SCHEMA = REPO / "evaluation" / "harness" / "result_schema.json"
H200_HBM, H200_FP16 = 4.8e12, 989e12


@pytest.fixture
def profiled() -> dict[str, Any]:
    team = TeamFactory(name="Teal")
    submission = gpu_submission(team, {"rms_norm": native("rms_norm"),
                                       "gemm_fp16": native("gemm_fp16")}, {
        "rms_norm": [
            gpu_shape(RMS_SHAPE, median_s=20e-6, kernels=[
                ("_rms_norm_kernel", "dsl", 1, 15.0), ("Memset (Device)", "torch", 1, 5.0)],
                verdict="mixed"),
            gpu_shape("llama8b-decode-t1-h4096", median_s=None, passed=False, kernels=[
                ("_rms_norm_kernel", "dsl", 1, 2.0)])],
        "gemm_fp16": [gpu_shape(GEMM_SHAPE, median_s=200e-6, kernels=[
            ("_matmul_kernel", "dsl", 1, 180.0), ("_cast_kernel", "dsl", 2, 20.0)])],
    })
    return {"submission": submission, "team": team, "client": signed_in(member_of(team, "tia"))}


def shapes(profile: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["shape_id"]: s for op in profile["operators"] for s in op["shapes"]}


def test_each_shape_lists_the_kernels_that_ran_with_their_device_times_and_shares(
        profiled: dict[str, Any]) -> None:
    profile = profiled["client"].get(
        f"/api/submissions/{profiled['submission'].pk}/profile/").json()
    rms = shapes(profile)[RMS_SHAPE]
    assert [(k["name"], k["category"], k["launches"]) for k in rms["kernels"]] == [
        ("_rms_norm_kernel", "dsl", 1), ("Memset (Device)", "torch", 1)]
    assert rms["kernels"][0]["device_time_s"] == pytest.approx(15e-6)
    assert [k["share"] for k in rms["kernels"]] == pytest.approx([0.75, 0.25])
    assert rms["kernel_time_s"] == pytest.approx(20e-6)
    assert rms["dsl_ratio"] == pytest.approx(0.75) and rms["verdict"] == "mixed"
    assert rms["kernels_per_forward"] == 2.0 and rms["launch_method"] == "graph"
    assert rms["scored_as"] == "span"  # what the timed median is (graph replay: the span)
    assert rms["span_measured_by"] == "profiler"
    assert rms["median_s"] == pytest.approx(20e-6) and rms["wall_median_s"] == pytest.approx(35e-6)
    assert rms["busy_median_s"] == pytest.approx(19.4e-6)
    assert rms["environment"]["driver"] == "580.159.04"
    assert rms["environment"]["clocks_after"] == {"sm_mhz": 1965, "memory_mhz": 3201}
    gemm = shapes(profile)[GEMM_SHAPE]
    assert [k["launches"] for k in gemm["kernels"]] == [1, 2]
    assert [k["share"] for k in gemm["kernels"]] == pytest.approx([0.9, 0.1])


def test_the_achieved_fraction_of_peak_is_the_attainment_times_the_bounding_peak(
        profiled: dict[str, Any]) -> None:
    profile = profiled["client"].get(
        f"/api/submissions/{profiled['submission'].pk}/profile/").json()
    rms, gemm = shapes(profile)[RMS_SHAPE], shapes(profile)[GEMM_SHAPE]
    assert rms["bound"] == "memory" and rms["attainment"] == pytest.approx(RMS_SOL_S / 20e-6)
    assert rms["bandwidth_fraction"] == pytest.approx(rms["attainment"])
    assert rms["bandwidth_bytes_per_s"] == pytest.approx(RMS_SOL_S / 20e-6 * H200_HBM)
    assert rms["flop_rate_fraction"] is None  # it would need the hidden W
    assert rms["attainment_with_floor"] == pytest.approx((RMS_SOL_S + 2e-6) / 20e-6)
    assert gemm["bound"] == "compute" and gemm["peak_path"] == "fp16_tc"
    assert gemm["flop_rate_per_s"] == pytest.approx(GEMM_SOL_S / 200e-6 * H200_FP16)
    assert gemm["bandwidth_fraction"] is None
    failed = shapes(profile)["llama8b-decode-t1-h4096"]
    assert failed["status"] == "failed" and failed["bandwidth_fraction"] is None
    assert profile["hardware"] == {"name": "H200", "hbm_bytes_per_s": H200_HBM,
                                   "peak_flops": pytest.approx(profile["hardware"]["peak_flops"]),
                                   "launch_floor_s": 2e-6}


def test_the_profile_reveals_nothing_of_the_hidden_roofline(profiled: dict[str, Any]) -> None:
    body = profiled["client"].get(
        f"/api/submissions/{profiled['submission'].pk}/profile/").content.decode()
    for hidden in ("sol_s", "semantic", "w_flops", "q_read", "q_write", "roofline",
                   "provenance", "intensity", "compute_s", "memory_s"):
        assert hidden not in body.lower()
    assert "1.398272e-05" not in body and "0.000138967" not in body  # the SOLs themselves
    # The only number derived from the roofline is the attainment the team already reads
    # in its submission's API: every achieved rate divides back to it.
    for shape in shapes(json.loads(body)).values():
        if shape["bandwidth_fraction"] is not None:
            assert shape["bandwidth_fraction"] == shape["attainment"]


def test_an_h200_evaluations_kernels_reach_the_profile() -> None:
    """Real results: a torch fallback's eight at::native kernels and an honest Triton GEMM."""
    results = {path.stem: json.loads(path.read_text())
               for path in sorted(H200_RESULTS.glob("*.json"))}
    for result in results.values():  # stored results of the older schema are shown too
        if result["schema"] == "atrex.evaluation-result/2":
            jsonschema.validate(result, json.loads(SCHEMA.read_text()))
        else:
            assert result["schema"] == "atrex.evaluation-result/1"
    team = TeamFactory(name="Real")
    fallback = gpu_submission(team, {"rms_norm": native("rms_norm")}, {
        "rms_norm": results["rms_norm-torch_fallback"]["shapes"]})
    gemm = gpu_submission(team, {"gemm_fp16": native("gemm_fp16")}, {
        "gemm_fp16": results["gemm_fp16-triton_native"]["shapes"]})
    client = signed_in(member_of(team, "rae"))
    torch_shape = shapes(client.get(f"/api/submissions/{fallback.pk}/profile/").json())[RMS_SHAPE]
    assert torch_shape["verdict"] == "fallback-torch" and torch_shape["kernels_per_forward"] == 8
    assert len(torch_shape["kernels"]) == 8
    assert {k["category"] for k in torch_shape["kernels"]} == {"torch"}
    assert sum(k["share"] for k in torch_shape["kernels"]) == pytest.approx(1.0)
    assert torch_shape["kernels"][0]["name"].startswith("void at::native::elementwise_kernel")
    assert torch_shape["bound"] == "memory"
    assert torch_shape["bandwidth_fraction"] == pytest.approx(RMS_SOL_S / torch_shape["median_s"])
    gemm_shape = shapes(client.get(f"/api/submissions/{gemm.pk}/profile/").json())[GEMM_SHAPE]
    assert [(k["name"], k["category"], k["share"]) for k in gemm_shape["kernels"]] == [
        ("_gemm_kernel", "dsl", 1.0)]
    assert gemm_shape["bound"] == "compute" and gemm_shape["peak_path"] == "fp16_tc"
    assert gemm_shape["flop_rate_fraction"] == pytest.approx(0.71, abs=0.01)
    # schema 1 had CUDA events under the profiler where schema 2 has the wall time
    old = [s for s in results["gemm_fp16-triton_native"]["shapes"] if s["shape_id"] == GEMM_SHAPE]
    assert gemm_shape["wall_median_s"] == pytest.approx(old[0]["timing"]["event_median_s"])
    assert gemm_shape["environment"] is None


def test_an_h200_result_of_the_span_definition_carries_both_times_and_its_environment() -> None:
    """Real: the fixture's Triton RMSNorm through the sandboxed evaluator on one H200
    (benchmarks/results/h200-2026-12-01f/sanity-graph.json)."""
    result = json.loads((H200_RESULTS / "rms_norm-triton_native-2026-12-01f.json").read_text())
    jsonschema.validate(result, json.loads(SCHEMA.read_text()))
    team = TeamFactory(name="Span")
    submission = gpu_submission(team, {"rms_norm": native("rms_norm")},
                                {"rms_norm": result["shapes"]})
    client = signed_in(member_of(team, "sam"))
    shape = shapes(client.get(f"/api/submissions/{submission.pk}/profile/").json())[RMS_SHAPE]
    timing = next(s["timing"] for s in result["shapes"] if s["shape_id"] == RMS_SHAPE)
    assert shape["median_s"] == pytest.approx(timing["median_s"])  # the graph replay's span
    assert shape["wall_median_s"] == pytest.approx(timing["wall_median_s"])
    assert shape["wall_median_s"] > shape["median_s"] >= shape["busy_median_s"]
    assert shape["environment"]["gpu"] == "NVIDIA H200"
    assert shape["environment"]["clocks_before"]["sm_mhz"] > 0
    submission.refresh_from_db()
    assert submission.environment == ("NVIDIA H200 · driver 580.159.04 · CUDA 13.0 · "
                                      "torch 2.11.0+cu130 · triton 3.6.0")


def test_results_from_before_the_kernel_list_show_the_dsl_kernels_as_one_row() -> None:
    legacy = gpu_shape(RMS_SHAPE, median_s=20e-6, legacy=True, kernels=[
        ("_a", "dsl", 1, 9.0), ("_b", "dsl", 1, 3.0), ("nvjet_x", "vendor", 2, 8.0)])
    kernels, total = kernels_of(legacy["adoption"])
    assert total == pytest.approx(20e-6)
    assert [(k["name"], k["category"], k["launches"]) for k in kernels] == [
        ("_a, _b", "dsl", None), ("nvjet_x", "vendor", 2)]
    assert [k["share"] for k in kernels] == pytest.approx([0.6, 0.4])


def test_an_interpreter_run_names_its_kernels_without_times() -> None:
    kernels, total = kernels_of({"method": "launch-count", "time_by_category": {"dsl": 2.0},
                                 "dsl_kernels": ["_k"], "foreign_kernels": [
                                     {"name": "aten::mm", "category": "torch", "count": 1}]})
    assert total is None
    assert [(k["name"], k["device_time_s"], k["share"]) for k in kernels] == [
        ("aten::mm", None, None), ("_k", None, None)]


def test_the_submission_page_opens_a_profile_per_shape(profiled: dict[str, Any]) -> None:
    submission = profiled["submission"]
    html = profiled["client"].get(f"/submissions/{submission.pk}/").content.decode()
    sections = re.findall(r'<details class="profile" data-shape="([^"]+)"', html)
    assert sorted(sections) == sorted([RMS_SHAPE, "llama8b-decode-t1-h4096", GEMM_SHAPE])
    rms = html.split(f'data-shape="{RMS_SHAPE}"')[1].split("</details>")[0]
    assert "<code>_rms_norm_kernel</code>" in rms and "75.0%" in rms and "15.00 µs" in rms
    assert f"{RMS_SOL_S / 20e-6 * 4.8:.2f} TB/s of 4.80 TB/s" in rms
    # what the median measures, and the wall time of a call beside it
    assert ("graph: the device span, first device activity's start to the last one's end, "
            "from the profiler's device records") in rms
    assert "35.00 µs (one call end to end, no profiler" in rms
    assert "NVIDIA H200 · driver 580.159.04 · CUDA 13.0 · torch 2.11.0+cu130 · triton 3.6.0 · " \
           "SM 1980→1965 MHz, memory 3201→3201 MHz" in rms
    table = html.split('id="profile"')[0]
    assert "Span (scored)" in table and "Wall" in table
    assert "<td class=\"num\">20.00 µs</td>\n        <td class=\"num\">35.00 µs</td>" in table
    gemm = html.split(f'data-shape="{GEMM_SHAPE}"')[1].split("</details>")[0]
    assert "at the fp16_tc peak" in gemm
    assert f'href="/api/submissions/{submission.pk}/profile/"' in html


def test_no_profile_section_while_the_evaluation_runs() -> None:
    team = TeamFactory(name="Slow")
    release = import_fixture_release()
    submission = submission_create(team=team, user=None, release=release,
                                   hardware=HardwareProfile.objects.get(name="H200"),
                                   filename="rms_norm.py", data=native("rms_norm").encode())
    html = signed_in(member_of(team, "sam")).get(f"/submissions/{submission.pk}/").content.decode()
    assert 'class="profile"' not in html and 'id="profile"' not in html


def test_another_teams_profile_is_not_found(profiled: dict[str, Any]) -> None:
    other = signed_in(member_of(TeamFactory(name="Other"), "otto"))
    assert other.get(f"/api/submissions/{profiled['submission'].pk}/profile/").status_code == 404


def test_a_board_row_says_which_environment_measured_it(profiled: dict[str, Any]) -> None:
    submission = profiled["submission"]
    text = ("NVIDIA H200 · driver 580.159.04 · CUDA 13.0 · torch 2.11.0+cu130 · triton 3.6.0")
    assert submission.environment == text  # clocks are per shape, not per row
    release = submission.release.pk
    page = Client().get(f"/boards/{release}/H200/").content.decode()
    folded = re.search(r'<details class="legend" id="environments"><summary>Measured with 1 '
                       r"environment</summary>(.*?)</details>", page, flags=re.S)
    assert folded is not None and text in folded.group(1)
    # hovering its number: the environment, then how many shapes it covers per operator
    assert f'title="{text}\nscored-tier shapes covered: ' in page
    [row] = Client().get(f"/api/boards/{release}/H200/").json()["rows"]
    assert row["environment"] == text
    csv_text = Client().get(f"/api/boards/{release}/H200/?format=csv").content.decode()
    assert csv_text.splitlines()[0].endswith(",badges,interval_low,interval_high,environment")
    assert text in csv_text


def test_a_submission_measured_in_two_environments_says_so_per_shape_count() -> None:
    team = TeamFactory(name="Mixed")
    older = {**H200_ENVIRONMENT, "torch": "2.10.0+cu130"}
    submission = gpu_submission(team, {"rms_norm": native("rms_norm")}, {"rms_norm": [
        gpu_shape(RMS_SHAPE, median_s=20e-6, kernels=[("_rms_norm_kernel", "dsl", 1, 15.0)]),
        gpu_shape("llama8b-decode-t1-h4096", median_s=3e-6, environment=older,
                  kernels=[("_rms_norm_kernel", "dsl", 1, 2.0)]),
        gpu_shape("llama8b-prefill-t16384-h4096", median_s=70e-6, environment=None,
                  kernels=[("_rms_norm_kernel", "dsl", 1, 65.0)])]})
    parts = submission.environment.split(" | ")
    assert len(parts) == 3 and all(p.endswith("(1 shapes)") for p in parts)
    assert any("torch 2.10.0+cu130" in p for p in parts)
    assert "environment not recorded (1 shapes)" in parts
