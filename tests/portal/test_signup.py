"""Sign-up: a visitor makes a user and a team, or joins one with an invite code; the admin's
setting (open, approval, invite) decides who gets in; refusals store nothing."""

from __future__ import annotations

import html
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from portal.accounts.models import Membership, Team, invite_create
from portal.audit.models import AuditEntry
from tests.factories import TeamFactory, member_of

pytestmark = pytest.mark.django_db
GOOD_PASSWORD = "correct horse battery staple"


def sign_up(client: Client, **fields: str) -> Any:
    return client.post("/accounts/signup/", {"password": GOOD_PASSWORD, **fields})


def test_open_sign_up_makes_a_user_a_team_and_signs_in(settings: Any) -> None:
    settings.ATREX_SIGNUP = "open"
    client = Client()
    reply = sign_up(client, username="nova", team_name="Nova Kernels")
    assert reply.status_code == 302 and reply["Location"] == "/team/"
    team = Team.objects.get(name="Nova Kernels")
    assert Membership.objects.get(team=team, user__username="nova").role == "owner"
    page = client.get("/team/").content.decode()
    assert "<h1>Nova Kernels</h1>" in page
    entry = AuditEntry.objects.get(action="account.signup")
    assert entry.after["team"] == "Nova Kernels" and entry.after["active"] is True


def test_a_member_invites_and_the_invitee_joins_the_team(settings: Any) -> None:
    settings.ATREX_SIGNUP = "invite"
    team = TeamFactory(name="Red")
    member = Client()
    member.force_login(member_of(team, "rita"))
    page = member.post("/team/", {"invite_create": "1"}).content.decode()
    code = page.split('class="invite-code">')[1].split("<")[0]
    assert code.startswith("join-")
    newcomer = Client()
    assert code in newcomer.get(f"/accounts/signup/?invite={code}").content.decode()
    assert sign_up(newcomer, username="ivo", invite_code=code).status_code == 302
    assert set(team.members.values_list("username", flat=True)) == {"rita", "ivo"}


@pytest.mark.parametrize(("mode", "fields", "message"), [
    ("invite", {"username": "x1", "team_name": "Solo"}, "by invitation"),
    ("open", {"username": "x2", "team_name": "Red"}, "exists; join it with an invite code"),
    ("open", {"username": "x3", "invite_code": "join-nothing"}, "unknown, revoked or expired"),
    ("open", {"username": "x4"}, "either a new team's name or a team's invite code"),
    ("open", {"username": "x5", "team_name": "T", "password": "123"}, "password:"),
    ("open", {"username": "rita", "team_name": "Other"}, "'rita' is taken"),
    ("open", {"username": "bad name!", "team_name": "Other"}, "username:"),
])
def test_a_refused_sign_up_says_why_and_stores_nothing(settings: Any, mode: str,
                                                       fields: dict[str, str],
                                                       message: str) -> None:
    settings.ATREX_SIGNUP = mode
    member_of(TeamFactory(name="Red"), "rita")
    users, teams = User.objects.count(), Team.objects.count()
    reply = sign_up(Client(), **fields)
    assert reply.status_code == 400 and message in html.unescape(reply.content.decode())
    assert (User.objects.count(), Team.objects.count()) == (users, teams)


def test_under_approval_the_account_waits_for_an_admin(settings: Any) -> None:
    settings.ATREX_SIGNUP = "approval"
    page = sign_up(Client(), username="ada", team_name="Ada Labs").content.decode()
    assert 'id="signup-waiting"' in page
    user = User.objects.get(username="ada")
    assert not user.is_active
    assert not Client().login(username="ada", password=GOOD_PASSWORD)
    User.objects.filter(pk=user.pk).update(is_active=True)  # the admin activates it
    assert Client().login(username="ada", password=GOOD_PASSWORD)


def test_an_expired_invite_is_refused(settings: Any) -> None:
    from django.utils import timezone

    settings.ATREX_SIGNUP = "open"
    invite = invite_create(team=TeamFactory(name="Blue"), created_by=None)
    type(invite).objects.filter(pk=invite.pk).update(expires_at=timezone.now())
    reply = sign_up(Client(), username="late", invite_code=invite.code)
    assert reply.status_code == 400 and "expired" in reply.content.decode()


def test_the_sign_in_page_says_how_to_get_an_account(settings: Any) -> None:
    for mode, words in (("open", "make a team of your own"), ("approval", "an admin activates"),
                        ("invite", "by invitation")):
        settings.ATREX_SIGNUP = mode
        page = Client().get("/accounts/login/").content.decode()
        assert 'id="how-to-get-an-account"' in page and words in page, mode


def test_sign_ups_are_rate_limited_per_address(settings: Any, rate_limits: Any) -> None:
    settings.ATREX_SIGNUP = "open"
    rate_limits(signup=2)
    client = Client()
    codes = [sign_up(client, username=f"u{i}", team_name=f"Team {i}").status_code
             for i in range(3)]
    assert codes[:2] == [302, 302] and codes[2] == 429
    assert not User.objects.filter(username="u2").exists()
