"""Who may see what: an access matrix over every page and endpoint, and no hidden data leaks."""

from __future__ import annotations

import io
import json
import zipfile
from dataclasses import dataclass

import pytest
from django.test import Client

from evaluation.catalog.models import Operator, Release
from leaderboard.services import weight_set_from_release
from portal.accounts.models import token_create
from submissions.models import Submission
from submissions.services import submission_create
from tests.paths import SAMPLE_CANDIDATES
from tests.world import World, build_world, extended

pytestmark = pytest.mark.django_db
HONEST = (SAMPLE_CANDIDATES / "rms_norm" / "triton_native.py").read_bytes()
# Strings that only hidden files hold (metadata.json, roofline.json, importance).
HIDDEN_MARKERS = ("semantic_W_flops", "semantic_Q_read_bytes", "SOL_time_ms", "origin_kernel",
                  "importance_score", "production_performance", "fixture_001", "source_repo",
                  "sol_s")


@dataclass(frozen=True)
class AccessWorld(World):
    submission: Submission  # Red's honest rms_norm, uploaded by ruby
    red_token: str  # Red's API token


@pytest.fixture
def world() -> AccessWorld:
    world = build_world()
    weight_set_from_release(world.release)
    submission = submission_create(team=world.red, user=world.ruby, release=world.release,
                                   hardware=world.h200, filename="rms_norm.py", data=HONEST)
    _, red_token = token_create(team=world.red, name="ci")
    return extended(world, AccessWorld, submission=submission, red_token=red_token)


def client_for(world: AccessWorld, who: str) -> Client:
    client = Client()
    if who != "anonymous":
        client.force_login(getattr(world, who))
    return client


def urls(world: AccessWorld) -> dict[str, str]:
    release: Release = world.release
    pk = world.submission.pk
    return {
        "home": "/", "release": f"/releases/{release.pk}/",
        "operator": f"/releases/{release.pk}/rms_norm/",
        "api releases": "/api/releases/", "api operators": f"/api/releases/{release.pk}/operators/",
        "bundle": f"/api/releases/{release.pk}/bundle/",
        "bundle op": f"/api/releases/{release.pk}/bundle/?operator=rms_norm",
        "api schema": "/api/schema/", "api docs": "/api/docs/",
        "board": f"/boards/{release.pk}/H200/", "board json": f"/api/boards/{release.pk}/H200/",
        "board csv": f"/api/boards/{release.pk}/H200/?format=csv",
        "team page": "/team/", "upload page": "/submit/", "submission page": f"/submissions/{pk}/",
        "api submissions": "/api/submissions/", "api submission": f"/api/submissions/{pk}/",
        "api quota": "/api/quota/", "admin": "/admin/evaluation/operatorhidden/",
    }


# status expected per (page, who); 302 = redirected to sign in, 401 = API asks for a token.
EXPECTED = {
    "home": (200, 200, 200, 200), "release": (200, 200, 200, 200), "operator": (200, 200, 200, 200),
    "api releases": (200, 200, 200, 200), "api operators": (200, 200, 200, 200),
    "bundle": (200, 200, 200, 200), "bundle op": (200, 200, 200, 200),
    "api schema": (200, 200, 200, 200), "api docs": (200, 200, 200, 200),
    "board": (200, 200, 200, 200), "board json": (200, 200, 200, 200),
    "board csv": (200, 200, 200, 200),
    # staff in no team: a landing page, and a Submit page that says why, not a 404
    "team page": (302, 200, 200, 200), "upload page": (302, 200, 200, 200),
    "submission page": (302, 200, 404, 200),
    "api submissions": (401, 200, 200, 200), "api submission": (401, 200, 404, 200),
    "api quota": (401, 200, 200, 403), "admin": (302, 302, 302, 200),
}
WHO = ("anonymous", "ruby", "bert", "root")  # Red's member, Blue's, an admin


@pytest.mark.parametrize("page", sorted(EXPECTED))
def test_the_access_matrix(world: AccessWorld, page: str) -> None:
    url = urls(world)[page]
    got = tuple(client_for(world, who).get(url).status_code for who in WHO)
    assert got == EXPECTED[page], dict(zip(WHO, got, strict=True))


def test_a_team_token_reads_its_own_submission_but_not_others(world: AccessWorld) -> None:
    client = Client(HTTP_AUTHORIZATION=f"Bearer {world.red_token}")
    pk = world.submission.pk
    detail = client.get(f"/api/submissions/{pk}/").json()
    assert detail["team"] == "Red" and "class Model" in detail["jobs"][0]["source"]
    blue_token = token_create(team=world.blue, name="x")[1]
    other = Client(HTTP_AUTHORIZATION=f"Bearer {blue_token}")
    response = other.get(f"/api/submissions/{pk}/")
    assert response.status_code == 404 and "class Model" not in response.content.decode()
    assert Client(HTTP_AUTHORIZATION="Bearer atx_wrong").get("/api/quota/").status_code == 401


def test_other_teams_never_see_a_source(world: AccessWorld) -> None:
    for who in ("anonymous", "bert"):
        client = client_for(world, who)
        for url in urls(world).values():
            assert "_rms_norm_kernel" not in client.get(url).content.decode(errors="replace"), url


def test_no_public_response_or_bundle_holds_hidden_data(world: AccessWorld) -> None:
    for who in ("anonymous", "ruby", "bert"):
        client = client_for(world, who)
        for page, url in urls(world).items():
            body = client.get(url).content
            if page.startswith("bundle"):
                with zipfile.ZipFile(io.BytesIO(body)) as archive:
                    names = archive.namelist()
                    assert not [n for n in names if n.endswith(("metadata.json", "roofline.json",
                                                                "operator_importance.json"))]
                    body = b"".join(archive.read(n) for n in names)
            text = body.decode(errors="replace")
            leaked = [m for m in HIDDEN_MARKERS if m in text]
            assert not leaked, (who, page, leaked)


def test_the_bundle_holds_the_public_files_in_the_atrex_layout(world: AccessWorld) -> None:
    body = Client().get(urls(world)["bundle op"]).content
    with zipfile.ZipFile(io.BytesIO(body)) as archive:
        assert sorted(archive.namelist()) == [f"atrex-fixture/data/rms_norm/{n}" for n in
                                              ("input.py", "reference.py", "shapes.json")] + [
            "atrex-fixture/tolerances.json"]  # the portal's correctness check, public
        shapes = json.loads(archive.read("atrex-fixture/data/rms_norm/shapes.json"))
    assert shapes == json.loads(Operator.objects.get(name="rms_norm").shapes_json)


def test_a_bad_api_upload_gets_400_with_its_message(world: AccessWorld) -> None:
    client = Client(HTTP_AUTHORIZATION=f"Bearer {world.red_token}")
    upload = io.BytesIO(b"class Kernel: pass\n")
    upload.name = "rms_norm.py"
    response = client.post("/api/submissions/", {"file": upload, "release": world.release.pk,
                                                 "hardware": "H200"})
    assert response.status_code == 400
    assert "defines no class Model" in response.json()["detail"]


def test_the_access_matrix_for_writes(world: AccessWorld) -> None:
    pk = world.submission.pk

    def submit(client: Client) -> int:
        upload = io.BytesIO(HONEST)
        upload.name = "rms_norm.py"
        return client.post("/api/submissions/", {"file": upload, "release": world.release.pk,
                                                 "hardware": "H200"}).status_code

    def cancel(client: Client) -> int:
        return client.post(f"/api/submissions/{pk}/cancel/").status_code

    def token(client: Client) -> int:
        return client.post("/team/", {"token_name": "x"}).status_code

    expected = {submit: (401, 201, 201, 403), cancel: (401, 200, 404, 200),
                token: (302, 200, 200, 403)}
    for action, statuses in expected.items():
        got = tuple(action(client_for(world, who)) for who in WHO)
        assert got == statuses, (action.__name__, dict(zip(WHO, got, strict=True)))
