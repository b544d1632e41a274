"""The API against its own OpenAPI schema, fuzzed by schemathesis on a live server.

Every operation in /api/schema/ gets generated requests (valid and invalid), once with a team
token and once anonymous; no response may be a 5xx, and every response must match the schema
(status code, content type, body). The number of examples is bounded (ATREX_FUZZ_EXAMPLES, default 25
per operation and credential) and the run derandomized, so CI stays fast and a failure
reproduces. Rate limits and quotas are raised for the test, so no 429 depends on timing, and
accepted uploads and cancels are stored but not sent to a broker.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any
from unittest import mock

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir
from schemathesis import GenerationMode
from schemathesis.checks import positive_data_acceptance

from evaluation.catalog.models import HardwareProfile, Shape
from leaderboard.services import weight_set_from_release
from portal.accounts.models import token_create
from submissions.models import Candidate, EvaluationJob, ShapeResult, Submission
from tests.factories import TeamFactory, member_of
from tests.paths import SAMPLE_CANDIDATES
from tests.world import import_fixture_release

HONEST = (SAMPLE_CANDIDATES / "rms_norm" / "triton_native.py").read_bytes()
EXAMPLES = int(os.environ.get("ATREX_FUZZ_EXAMPLES", "25"))
# Limits far above what the fuzzer sends: a 429 from a limit would say nothing about the API.
NO_LIMITS = {"login": 10**6, "token": 10**6, "upload": 10**6}


@pytest.fixture(autouse=True, scope="module")
def _hypothesis_files_in_tmp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Hypothesis caches what it learns in ./.hypothesis unless told otherwise."""
    set_hypothesis_home_dir(tmp_path_factory.mktemp("hypothesis"))
    yield
    set_hypothesis_home_dir(None)


@pytest.fixture
def fuzz_world(transactional_db: None, settings: Any,
               rate_limits: Callable[..., None]) -> Iterator[dict[str, Any]]:
    rate_limits(**NO_LIMITS)
    settings.ATREX_SHAPE_FILTER = "dev-*"
    settings.ATREX_LONG_POLL_MAX_SECONDS = 0  # ?wait= on a running job: no minute-long holds
    release = import_fixture_release()
    weight_set_from_release(release)
    team = TeamFactory(name="Red", daily_submission_quota=10**6, concurrent_job_quota=10**6)
    alice = member_of(team, "alice")
    submission = Submission.objects.create(team=team, release=release, created_by=alice,
                                           hardware=HardwareProfile.objects.get(name="H200"))
    operator = release.operators.get(name="rms_norm")
    candidate = Candidate.objects.create(submission=submission, operator=operator,
                                         source="class Model: pass", sha256="0" * 64)
    job = EvaluationJob.objects.create(candidate=candidate, status="running", attempts=1,
                                       shapes_total=2)
    for shape in Shape.objects.filter(operator=operator)[:2]:
        ShapeResult.objects.create(job=job, attempt=1, shape=shape, status="passed",
                                   verdict="native", dsl_ratio=1.0, raw={})
    _, token = token_create(team=team, name="fuzz", created_by=alice)
    # Accepted uploads are stored and cancels recorded, but nothing reaches a broker (no
    # broker files, no queue traffic): jobs are not sent, stop messages not published.
    with mock.patch("submissions.jobs.current_app"), \
            mock.patch("submissions.jobs.publish_stop"):
        yield {"release": release.pk, "submission": submission.pk, "token": token}


def _operations() -> list[tuple[str, str]]:
    """Every (method, path) the schema describes, known when tests are collected."""
    from drf_spectacular.generators import SchemaGenerator

    paths = SchemaGenerator().get_schema(request=None, public=True)["paths"]
    return [(method.upper(), path) for path, item in sorted(paths.items()) for method in item]


# Derandomized: CI runs the same examples every time (ATREX_FUZZ_RANDOM=1 explores anew);
# no example database, so nothing is written outside pytest's tmp folder.
FUZZ = hypothesis_settings(max_examples=EXAMPLES, deadline=None, database=None,
                           derandomize=os.environ.get("ATREX_FUZZ_RANDOM") != "1",
                           suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize("who", ["team token", "anonymous"])
@pytest.mark.parametrize(("method", "path"), _operations())
def test_the_api_matches_its_schema_and_never_fails(live_server: Any, fuzz_world: dict[str, Any],
                                                    method: str, path: str, who: str) -> None:
    schema = schemathesis.openapi.from_url(f"{live_server.url}/api/schema/?format=json")
    operation = schema[path][method]
    headers = {"Authorization": f"Bearer {fuzz_world['token']}"} if who == "team token" else {}

    # Whether an upload is acceptable depends on its content (Python defining `class Model` for
    # one of the release's operators), which no schema can say: schema-valid bytes get a 400.
    excluded = [positive_data_acceptance] if (method, path) == ("POST", "/api/submissions/") \
        else []

    @FUZZ
    @given(case=st.one_of(operation.as_strategy(GenerationMode.POSITIVE),
                          operation.as_strategy(GenerationMode.NEGATIVE)))
    def fuzz(case: Any) -> None:
        case.call_and_validate(headers=headers, excluded_checks=excluded)

    fuzz()


def test_real_objects_and_an_accepted_upload_match_the_schema(live_server: Any,
                                                              fuzz_world: dict[str, Any]) -> None:
    """Random ids rarely hit a row: the 2xx bodies of existing objects, checked on purpose."""
    schema = schemathesis.openapi.from_url(f"{live_server.url}/api/schema/?format=json")
    headers = {"Authorization": f"Bearer {fuzz_world['token']}"}
    release, submission = fuzz_world["release"], fuzz_world["submission"]
    cases = [
        schema["/api/releases/"]["GET"].Case(),
        schema["/api/releases/{id}/operators/"]["GET"].Case(path_parameters={"id": release}),
        schema["/api/releases/{id}/bundle/"]["GET"].Case(path_parameters={"id": release},
                                                          query={"operator": "rms_norm"}),
        schema["/api/quota/"]["GET"].Case(),
        schema["/api/submissions/"]["GET"].Case(),
        schema["/api/submissions/{id}/"]["GET"].Case(path_parameters={"id": submission}),
        schema["/api/submissions/{id}/compare/{other}/"]["GET"].Case(
            path_parameters={"id": submission, "other": submission}),
        schema["/api/team/history/{operator}/"]["GET"].Case(
            path_parameters={"operator": "rms_norm"}, query={"hardware": "H200"}),
        schema["/api/submissions/{id}/cancel/"]["POST"].Case(path_parameters={"id": submission}),
    ]
    assert [case.call_and_validate(headers=headers).status_code for case in cases] == [200] * 9

    # The upload's file needs its name (rms_norm.py), which generated multipart bodies lack.
    fields = {"release": release, "hardware": "H200", "agent": "fuzz", "output_tokens": 10}
    upload = schema["/api/submissions/"]["POST"].Case(body={**fields, "file": HONEST},
                                                      media_type="multipart/form-data")
    response = requests.post(f"{live_server.url}/api/submissions/", headers=headers, data=fields,
                             files={"file": ("rms_norm.py", HONEST)}, timeout=30)
    assert response.status_code == 201, response.text
    upload.validate_response(response, headers=headers)
    assert Submission.objects.filter(pk=response.json()["id"], agent="fuzz").exists()
