"""Every page and endpoint against every role: anonymous, team member, another team's
member, staff, superuser. A new URL fails the coverage test until it is in the matrix."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from unittest import mock

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from leaderboard.services import weight_set_from_release
from submissions.models import Candidate, EvaluationJob, Submission
from tests.factories import UserFactory
from tests.world import World, build_world, extended

pytestmark = pytest.mark.django_db

ROLES = ("anonymous", "member", "other", "staff", "superuser")
PUBLIC = dict.fromkeys(ROLES, 200)
STAFF_ONLY_PAGE = {"anonymous": 302, "member": 302, "other": 302, "staff": 200, "superuser": 200}
# Admins in no team get a landing page (every team's submissions) and a Submit page that
# says why they cannot upload, not a 404.
TEAM_PAGE = {"anonymous": 302, "member": 200, "other": 200, "staff": 200, "superuser": 200}
OWN_SUBMISSION_PAGE = {"anonymous": 302, "member": 200, "other": 404, "staff": 200,
                       "superuser": 200}
OWN_SUBMISSION = {"anonymous": 404, "member": 200, "other": 404, "staff": 200, "superuser": 200}
OWN_SUBMISSION_API = {"anonymous": 401, "member": 200, "other": 404, "staff": 200,
                      "superuser": 200}

# (url name, method, expected status per role); {release}, {submission}, {share} are filled
# in. POSTs send {"action": "freeze"} unless POST_DATA names what they send.
MATRIX: list[tuple[str, str, str, dict[str, int]]] = [
    ("home", "GET", "/", PUBLIC),
    ("problems", "GET", "/releases/", PUBLIC),
    ("release", "GET", "/releases/{release}/", PUBLIC),
    ("operator", "GET", "/releases/{release}/rms_norm/", PUBLIC),
    ("release-weights", "GET", "/releases/{release}/weights/", PUBLIC),
    ("docs-index", "GET", "/docs/", PUBLIC),
    ("docs", "GET", "/docs/teams/", PUBLIC),
    ("docs-screenshot", "GET", "/docs/screenshots/weights.png", PUBLIC),
    ("boards", "GET", "/boards/", PUBLIC),
    ("board", "GET", "/boards/{release}/H200/", PUBLIC),
    ("board-analysis", "GET", "/boards/{release}/H200/analysis/", PUBLIC),
    ("paper-table", "GET", "/boards/{release}/H200/table/", PUBLIC),
    ("board-changes-page", "GET", "/boards/{release}/H200/changes/", PUBLIC),
    ("operator-board", "GET", "/boards/{release}/H200/operators/rms_norm/", PUBLIC),
    ("board-of", "GET", "/boards/{release}/H200/decode/", PUBLIC),
    ("board-export", "GET", "/api/boards/{release}/H200/", PUBLIC),
    ("board-analysis-export", "GET", "/api/boards/{release}/H200/analysis/", PUBLIC),
    ("paper-table-export", "GET", "/api/boards/{release}/H200/table/", PUBLIC),
    ("board-changes", "GET", "/api/boards/{release}/H200/changes/", PUBLIC),
    ("operator-board-export", "GET", "/api/boards/{release}/H200/operators/rms_norm/", PUBLIC),
    ("board-export-of", "GET", "/api/boards/{release}/H200/memory/", PUBLIC),
    ("board-freeze", "POST", "/staff/boards/{release}/H200/freeze/",
     {"anonymous": 302, "member": 302, "other": 302, "staff": 302, "superuser": 302}),
    ("weights", "GET", "/staff/releases/{release}/weights/", STAFF_ONLY_PAGE),
    ("quarantine", "GET", "/staff/quarantine/", STAFF_ONLY_PAGE),
    ("team", "GET", "/team/", TEAM_PAGE),
    ("upload", "GET", "/submit/", TEAM_PAGE),
    ("submission", "GET", "/submissions/{submission}/", OWN_SUBMISSION_PAGE),
    ("submission-compare", "GET", "/submissions/{submission}/compare/{submission}/",
     OWN_SUBMISSION_PAGE),
    # Only the submission's own team gives it a public link (then back to its page: 302);
    # an admin sees the submission but may not share it for the team.
    ("submission-share", "POST", "/submissions/{submission}/share/",
     {"anonymous": 302, "member": 302, "other": 404, "staff": 403, "superuser": 403}),
    # An ncu profile of one shape: the submission's own team only (then back to its page).
    ("submission-ncu", "POST", "/submissions/{submission}/ncu/",
     {"anonymous": 302, "member": 302, "other": 404, "staff": 403, "superuser": 403}),
    # The public summary behind a share link: anyone with the link, no sign-in.
    ("submission-shared", "GET", "/shared/{share}/", PUBLIC),
    # A history is the signed-in user's team's: a user in no team (staff here) has none.
    ("operator-history", "GET", "/team/history/rms_norm/",
     {"anonymous": 302, "member": 200, "other": 200, "staff": 404, "superuser": 404}),
    ("login", "GET", "/accounts/login/", PUBLIC),
    ("signup", "GET", "/accounts/signup/", PUBLIC),
    ("logout", "POST", "/accounts/logout/", dict.fromkeys(ROLES, 302)),
    ("admin-login", "GET", "/admin/login/",
     {"anonymous": 200, "member": 200, "other": 200, "staff": 302, "superuser": 302}),
    ("admin", "GET", "/admin/", STAFF_ONLY_PAGE),
    ("api-capability", "GET", "/api/capability/", PUBLIC),
    ("api-releases", "GET", "/api/releases/", PUBLIC),
    ("api-operators", "GET", "/api/releases/{release}/operators/", PUBLIC),
    ("api-bundle", "GET", "/api/releases/{release}/bundle/", PUBLIC),
    ("api-submissions", "GET", "/api/submissions/",
     {"anonymous": 401, "member": 200, "other": 200, "staff": 200, "superuser": 200}),
    ("api-submission", "GET", "/api/submissions/{submission}/", OWN_SUBMISSION_API),
    ("api-submission-charts", "GET", "/api/submissions/{submission}/charts/", OWN_SUBMISSION),
    ("api-submission-profile", "GET", "/api/submissions/{submission}/profile/",
     OWN_SUBMISSION_API),
    ("api-submission-ncu", "GET", "/api/submissions/{submission}/ncu/", OWN_SUBMISSION_API),
    ("api-submission-cancel", "POST", "/api/submissions/{submission}/cancel/",
     {"anonymous": 401, "member": 200, "other": 404, "staff": 200, "superuser": 200}),
    ("api-submission-compare", "GET", "/api/submissions/{submission}/compare/{submission}/",
     OWN_SUBMISSION_API),
    ("api-operator-history", "GET", "/api/team/history/rms_norm/",
     {"anonymous": 401, "member": 200, "other": 200, "staff": 403, "superuser": 403}),
    ("api-quota", "GET", "/api/quota/",
     {"anonymous": 401, "member": 200, "other": 200, "staff": 403, "superuser": 403}),
    ("api-operator-problem", "GET", "/api/releases/{release}/operators/rms_norm/", PUBLIC),
    ("api-token", "GET", "/api/token/",
     {"anonymous": 401, "member": 403, "other": 403, "staff": 403, "superuser": 403}),
    ("api-schema", "GET", "/api/schema/", PUBLIC),
    ("api-docs", "GET", "/api/docs/", PUBLIC),
    ("api-not-found", "GET", "/api/submissions/-1/", dict.fromkeys(ROLES, 404)),
]


POST_DATA = {"submission-share": {"share": "create"},
             "submission-ncu": {"operator": "rms_norm", "shape": "dev-t4-h256"}}


@dataclass(frozen=True)
class MatrixWorld(World):
    submission: Submission  # Red's, shared, with a running rms_norm job
    staffer: User  # staff, not a superuser, in no team

    def user(self, role: str) -> User:
        return {"member": self.ruby, "other": self.bert, "staff": self.staffer,
                "superuser": self.root}[role]


@pytest.fixture
def world() -> MatrixWorld:
    world = build_world(red_shares_links=True)
    release = world.release
    weight_set_from_release(release)
    submission = Submission.objects.create(
        team=world.red, release=release, hardware=world.h200,
        share_token="shared-summary-token-of-red-0123456789")
    candidate = Candidate.objects.create(submission=submission,
                                         operator=release.operators.get(name="rms_norm"),
                                         source="class Model: pass", sha256="0" * 64)
    EvaluationJob.objects.create(candidate=candidate, status="running", attempts=1,
                                 shape_ids=["dev-t4-h256"])
    return extended(world, MatrixWorld, submission=submission,
                    staffer=UserFactory(username="staffer", is_staff=True))


def client_for(role: str, world: MatrixWorld) -> Client:
    client = Client()
    if role != "anonymous":
        client.force_login(world.user(role))
    return client


@pytest.mark.parametrize("role", ROLES)
def test_every_endpoint_answers_each_role_as_the_matrix_says(role: str,
                                                             world: MatrixWorld) -> None:
    wrong = []
    with mock.patch("submissions.jobs.current_app.send_task"):
        for name, method, path, expected in MATRIX:
            url = path.format(release=world.release.pk, submission=world.submission.pk,
                              share=world.submission.share_token)
            client = client_for(role, world)
            response = client.post(url, POST_DATA.get(name, {"action": "freeze"})) \
                if method == "POST" else client.get(url)
            if response.status_code != expected[role]:
                wrong.append(f"{method} {url} ({name}): {response.status_code}, "
                             f"expected {expected[role]}")
    assert not wrong, "\n".join(wrong)


def test_staff_actions_by_others_change_nothing(world: MatrixWorld) -> None:
    from leaderboard.models import BoardFreeze

    for role in ("anonymous", "member", "other"):
        client_for(role, world).post(f"/staff/boards/{world.release.pk}/H200/freeze/",
                                     {"action": "freeze"})
    assert not BoardFreeze.objects.exists()
    client_for("staff", world).post(f"/staff/boards/{world.release.pk}/H200/freeze/",
                                    {"action": "freeze"})
    assert BoardFreeze.objects.count() == 1


def test_every_url_is_in_the_matrix() -> None:
    def names(patterns: list[Any]) -> set[str]:
        found = set()
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                if pattern.app_name == "admin":
                    found.add("admin")
                    continue
                found |= names(pattern.url_patterns)
            elif isinstance(pattern, URLPattern) and pattern.name:
                found.add(pattern.name)
        return found

    assert names(get_resolver().url_patterns) == {name for name, *_ in MATRIX}
