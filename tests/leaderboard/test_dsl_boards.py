"""Boards per DSL: each row's declared DSL (each file's where they mix), a DSL filter, and
per DSL the share of shapes correct beside the share correct and native."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from django.test import Client

from evaluation.catalog.models import Release
from leaderboard.services import weight_set_activate, weight_set_create
from tests.builders import scored_submission
from tests.world import import_fixture_release

pytestmark = pytest.mark.django_db


@pytest.fixture
def release() -> Release:
    release = import_fixture_release()
    scored_submission(release, "Red", {"rms_norm": 0.8, "gemm_fp16": 0.2})
    scored_submission(release, "Green", {"rms_norm": 0.5, "gemm_fp16": 0.9}, dsl="cute")
    # correct everywhere, but its work ran outside the DSL it declared
    scored_submission(release, "Blue", {"rms_norm": 0.2, "gemm_fp16": 0.6}, dsl="gluon",
                      verdict="mixed")
    scored_submission(release, "Mixed", {"rms_norm": 0.3, "gemm_fp16": 0.3},
                      dsl={"rms_norm": "gluon", "gemm_fp16": "cute"})
    weights = weight_set_create(release=release, weights={"rms_norm": 1, "gemm_fp16": 1},
                                source="manual")
    weight_set_activate(weight_set=weights, actor=None)
    return release


def export(release: Release, query: str = "") -> dict[str, Any]:
    reply = Client().get(f"/api/boards/{release.pk}/H200/{query}")
    assert reply.status_code == 200, reply.content
    data: dict[str, Any] = reply.json()
    return data


def test_every_row_names_its_dsl_and_a_mixed_submission_each_files(release: Release) -> None:
    rows = {r["team"]: r["dsl"] for r in export(release)["rows"]}
    assert rows == {"Red": "triton", "Green": "cute", "Blue": "gluon",
                    "Mixed": "gemm_fp16: cute, rms_norm: gluon"}
    table = list(csv.DictReader(io.StringIO(Client().get(
        f"/api/boards/{release.pk}/H200/?format=csv").content.decode())))
    assert {r["team"]: r["dsl"] for r in table if r["rank"]}["Green"] == "cute"


def test_the_dsl_filter_keeps_the_submissions_with_a_file_in_that_dsl(release: Release) -> None:
    assert sorted(r["team"] for r in export(release, "?dsl=cute")["rows"]) == ["Green", "Mixed"]
    assert sorted(r["team"] for r in export(release, "?dsl=gluon")["rows"]) == ["Blue", "Mixed"]
    assert [r["team"] for r in export(release, "?dsl=triton")["rows"]] == ["Red"]
    assert Client().get(f"/api/boards/{release.pk}/H200/?dsl=cobol").status_code == 404


def test_per_dsl_correctness_sits_beside_adoption(release: Release) -> None:
    rates = {r["dsl"]: r for r in export(release)["dsl_rates"]}
    assert set(rates) == {"triton", "cute", "gluon"}
    assert rates["triton"]["correctness_rate"] == rates["triton"]["adoption_rate"] == 1.0
    # Blue's gluon files were all correct and none native; Mixed's gluon file native
    gluon = rates["gluon"]
    assert gluon["files"] == 3 and gluon["correctness_rate"] == 1.0
    assert 0 < gluon["adoption_rate"] < 1 and gluon["dsl_name"] == "Gluon"
    assert rates["cute"]["files"] == 3


def test_the_board_page_shows_the_filter_and_the_per_dsl_table(release: Release) -> None:
    page = Client().get(f"/boards/{release.pk}/H200/").content.decode()
    assert 'id="dsl-filter"' in page and "&dsl=cute" in page
    assert page.count('<tr data-dsl="') == 3
    analysis = Client().get(f"/boards/{release.pk}/H200/analysis/").content.decode()
    assert 'id="dsl-rates-table"' in analysis
