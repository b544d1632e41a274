"""CSRF: every form and htmx POST is refused without the page's token and accepted with it.

The client enforces CSRF checks as a browser session would (Django's test client skips them
by default). Forms carry the token as `csrfmiddlewaretoken`; htmx sends it in the X-CSRFToken
header that base.html sets with `hx-headers` on <body>.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from unittest import mock

import pytest
from django.conf import settings
from django.test import Client

from evaluation.catalog.models import Shape
from leaderboard.models import BoardFreeze, WeightSet
from leaderboard.services import weight_set_create, weight_set_from_release
from portal.accounts.models import ApiToken, Team, token_create
from submissions.models import Candidate, EvaluationJob, ShapeResult, Submission
from tests.paths import SAMPLE_CANDIDATES
from tests.world import build_world

pytestmark = pytest.mark.django_db
HONEST = (SAMPLE_CANDIDATES / "rms_norm" / "triton_native.py").read_bytes()
PASSWORD = "correct horse battery"  # tests.factories.UserFactory's


@pytest.fixture
def world() -> Iterator[dict[str, Any]]:
    """The shared world as the posts' URL templates and forms want it: primary keys by name,
    the users to sign in as by name."""
    world = build_world(red_shares_links=True)
    release = world.release
    weight_set_from_release(release)
    weight_set_create(release=release, weights={"rms_norm": 1}, source="manual")  # v2, inactive
    submission = Submission.objects.create(team=world.red, release=release, hardware=world.h200)
    operator = release.operators.get(name="rms_norm")
    candidate = Candidate.objects.create(submission=submission, operator=operator,
                                         source="class Model: pass", sha256="0" * 64)
    job = EvaluationJob.objects.create(candidate=candidate, status="running", attempts=1)
    suspicious = ShapeResult.objects.create(job=job, attempt=1, status="passed",
                                            shape=Shape.objects.filter(operator=operator).first(),
                                            attainment=1.7, suspicious=True, raw={})
    token, _ = token_create(team=world.red, name="laptop", created_by=world.ruby)
    # Uploads, rescoring and cancels reach no broker.
    with mock.patch("submissions.jobs.current_app"), \
            mock.patch("submissions.jobs.publish_stop"):
        yield {"release": release.pk, "submission": submission.pk, "job": job.pk,
               "result": suspicious.pk, "token": token.pk, "ruby": world.ruby,
               "root": world.root}


@dataclass(frozen=True)
class Post:
    who: str  # "ruby" (Red's member), "root" (an admin) or "anonymous"
    page: str  # where the form (or htmx button) is
    url: str  # where it posts
    data: Callable[[dict[str, Any]], dict[str, Any]]
    done: Callable[[dict[str, Any]], bool]  # the post's effect is there
    htmx: bool = False


def _upload(world: dict[str, Any]) -> dict[str, Any]:
    file = io.BytesIO(HONEST)
    file.name = "rms_norm.py"
    return {"file": file, "release": world["release"], "hardware": "H200"}


POSTS = {
    "sign in": Post("anonymous", "/accounts/login/", "/accounts/login/",
                    lambda w: {"username": "ruby", "password": PASSWORD},
                    lambda w: False),  # checked on the response: see _accepted
    "sign out": Post("ruby", "/team/", "/accounts/logout/", lambda w: {}, lambda w: False),
    "create token": Post("ruby", "/team/", "/team/", lambda w: {"token_name": "ci"},
                         lambda w: ApiToken.objects.filter(name="ci").exists()),
    "revoke token": Post("ruby", "/team/", "/team/", lambda w: {"revoke": w["token"]},
                         lambda w: ApiToken.objects.get(pk=w["token"]).revoked_at is not None),
    "upload": Post("ruby", "/submit/", "/submit/", _upload,
                   lambda w: Submission.objects.count() == 2),
    "board freeze": Post("root", "/boards/{release}/H200/", "/staff/boards/{release}/H200/freeze/",
                         lambda w: {"action": "freeze"}, lambda w: BoardFreeze.objects.exists()),
    "weight activation": Post("root", "/staff/releases/{release}/weights/",
                              "/staff/releases/{release}/weights/", lambda w: {"activate": "2"},
                              lambda w: WeightSet.objects.get(version=2).active),
    "weight creation": Post("root", "/staff/releases/{release}/weights/",
                            "/staff/releases/{release}/weights/",
                            lambda w: {"w_rms_norm": "2", "note": "csrf"},
                            lambda w: WeightSet.objects.filter(note="csrf").exists()),
    "quarantine review": Post("root", "/staff/quarantine/", "/staff/quarantine/",
                              lambda w: {"result": w["result"], "decision": "accept"},
                              lambda w: not ShapeResult.objects.get(pk=w["result"]).suspicious),
    "share links off": Post("ruby", "/team/", "/team/", lambda w: {"share_links": "off"},
                            lambda w: not Team.objects.get(name="Red").share_links_enabled),
    "webhook": Post("ruby", "/team/", "/team/",
                    lambda w: {"webhook_url": "https://93.184.216.34/hook"},
                    lambda w: Team.objects.get(name="Red").webhook_url != ""),
    "share a submission": Post("ruby", "/submissions/{submission}/",
                               "/submissions/{submission}/share/", lambda w: {"share": "create"},
                               lambda w: Submission.objects.get(pk=w["submission"]).share_token
                               is not None),
    "htmx cancel": Post("ruby", "/submissions/{submission}/",
                        "/api/submissions/{submission}/cancel/", lambda w: {},
                        lambda w: EvaluationJob.objects.get(pk=w["job"]).status == "cancelled",
                        htmx=True),
}


def browser(world: dict[str, Any], who: str) -> Client:
    client = Client(enforce_csrf_checks=True)
    if who != "anonymous":
        client.force_login(world[who])
    return client


def _form_token(html: str) -> str:
    found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html)
    assert found, "the page has no form with a CSRF token"
    return found.group(1)


def _htmx_token(html: str) -> str:
    found = re.search(r"<body hx-headers='([^']+)'>", html)
    assert found, "the page does not give htmx a CSRF header"
    headers = json.loads(found.group(1))
    assert set(headers) == {"X-CSRFToken"}
    return str(headers["X-CSRFToken"])


def _send(client: Client, post: Post, world: dict[str, Any], token: str | None) -> Any:
    url = post.url.format(**world)
    data = post.data(world)
    if post.htmx:
        headers = {"HX-Request": "true"} | ({"X-CSRFToken": token} if token else {})
        return client.post(url, data, headers=headers)
    return client.post(url, data | ({"csrfmiddlewaretoken": token} if token else {}))


def _accepted(name: str, response: Any, client: Client, post: Post, world: dict[str, Any]) -> bool:
    if name == "sign in":
        return response.status_code == 302 and "_auth_user_id" in client.session
    if name == "sign out":
        return response.status_code == 302 and "_auth_user_id" not in client.session
    return response.status_code in (200, 302) and post.done(world)


@pytest.mark.parametrize("name", sorted(POSTS))
def test_a_post_without_the_csrf_token_is_refused_and_changes_nothing(
        world: dict[str, Any], name: str) -> None:
    post = POSTS[name]
    client = browser(world, post.who)
    assert client.get(post.page.format(**world)).status_code == 200  # the cookie is set
    response = _send(client, post, world, token=None)
    assert response.status_code == 403
    assert not _accepted(name, response, client, post, world)
    if post.who != "anonymous":
        assert "_auth_user_id" in client.session  # still signed in


@pytest.mark.parametrize("name", sorted(POSTS))
def test_the_same_post_with_the_pages_csrf_token_is_accepted(world: dict[str, Any],
                                                              name: str) -> None:
    post = POSTS[name]
    client = browser(world, post.who)
    page = client.get(post.page.format(**world)).content.decode()
    token = _htmx_token(page) if post.htmx else _form_token(page)
    response = _send(client, post, world, token)
    assert _accepted(name, response, client, post, world), (response.status_code,
                                                            response.content[:300])


def test_a_token_from_another_session_is_refused(world: dict[str, Any]) -> None:
    stolen = _form_token(browser(world, "ruby").get("/team/").content.decode())
    victim = browser(world, "ruby")
    victim.get("/team/")
    response = victim.post("/team/", {"token_name": "evil", "csrfmiddlewaretoken": stolen})
    assert response.status_code == 403 and not ApiToken.objects.filter(name="evil").exists()


def test_the_htmx_cancel_button_posts_where_the_test_does(world: dict[str, Any]) -> None:
    page = browser(world, "ruby").get(f"/submissions/{world['submission']}/").content.decode()
    assert f'hx-post="/api/submissions/{world["submission"]}/cancel/"' in page
    assert settings.CSRF_HEADER_NAME == "HTTP_X_CSRFTOKEN"  # the header hx-headers names


def test_api_calls_with_a_team_token_need_no_csrf_token(world: dict[str, Any]) -> None:
    """A bearer token is not sent by browsers on their own, so there is nothing to forge."""
    _, raw = token_create(team=world["ruby"].teams.get(), name="ci")
    client = Client(enforce_csrf_checks=True, HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert client.post(f"/api/submissions/{world['submission']}/cancel/").status_code == 200
    assert EvaluationJob.objects.get(pk=world["job"]).status == "cancelled"
