"""Sign-up: a visitor makes a user and a team, or joins one with an invite code; the admin's
setting (open, approval, invite) decides who gets in; refusals store nothing."""

from __future__ import annotations

import html
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from portal.accounts.models import Membership, PendingTeam, Team, invite_create
from portal.accounts.signup import SignupRefused, signup_activate
from portal.audit.models import AuditEntry
from tests.factories import TeamFactory, UserFactory, member_of

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
    ("open", {"username": "x3", "invite_code": "join-nothing"}, "unknown, revoked, used up or expired"),
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
    signup_activate(user=user, actor=None)  # the admin activates it
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


@pytest.mark.parametrize("name", ["Rеd Team",  # a Cyrillic е
                                  "RED-TEAM", "Red  Team", "Ｒｅｄ Ｔｅａｍ",
                                  "Red Tea rn"])  # rn read as m
def test_a_lookalike_of_an_existing_team_name_is_refused(settings: Any, name: str) -> None:
    settings.ATREX_SIGNUP = "open"
    TeamFactory(name="Red Team")
    reply = sign_up(Client(), username="mallory", team_name=name)
    text = html.unescape(reply.content.decode())
    assert reply.status_code == 400 and "Red Team" in text
    assert "looks like the existing team" in text or "exists" in text
    assert not User.objects.filter(username="mallory").exists()


def test_a_sign_up_waiting_for_approval_reserves_no_team_name(settings: Any) -> None:
    settings.ATREX_SIGNUP = "approval"
    page = sign_up(Client(), username="ada", team_name="Ada Labs").content.decode()
    assert "made when an admin activates the account" in page
    assert not Team.objects.filter(name="Ada Labs").exists()
    # someone else signs up for the same name meanwhile: not refused, and activated first
    sign_up(Client(), username="bob", team_name="Ada Labs")
    admin = UserFactory(username="root", is_staff=True, is_superuser=True)
    assert signup_activate(user=User.objects.get(username="bob"), actor=admin).name == "Ada Labs"
    with pytest.raises(SignupRefused, match="exists"):
        signup_activate(user=User.objects.get(username="ada"), actor=admin)
    assert not User.objects.get(username="ada").is_active  # nothing changed for her
    assert Membership.objects.get(team__name="Ada Labs").user.username == "bob"
    assert AuditEntry.objects.filter(action="account.activate").count() == 1


def test_the_admins_activation_makes_the_team_and_lets_its_owner_in(settings: Any) -> None:
    settings.ATREX_SIGNUP = "approval"
    sign_up(Client(), username="ada", team_name="Ada Labs")
    admin = Client()
    admin.force_login(UserFactory(username="root", is_staff=True, is_superuser=True))
    pending = PendingTeam.objects.get()
    admin.post("/admin/accounts/pendingteam/", {"action": "activate_pending",
                                                 "_selected_action": [pending.pk]})
    assert Membership.objects.get(team__name="Ada Labs", user__username="ada").role == "owner"
    assert not PendingTeam.objects.exists()
    assert Client().login(username="ada", password=GOOD_PASSWORD)


def test_an_invite_lets_in_as_many_people_as_it_was_made_for(settings: Any) -> None:
    settings.ATREX_SIGNUP = "invite"
    team = TeamFactory(name="Red")
    invite = invite_create(team=team, created_by=None, max_uses=2)
    assert sign_up(Client(), username="ivo", invite_code=invite.code).status_code == 302
    assert sign_up(Client(), username="una", invite_code=invite.code).status_code == 302
    third = sign_up(Client(), username="zed", invite_code=invite.code)
    assert third.status_code == 400 and "used up" in html.unescape(third.content.decode())
    assert set(team.members.values_list("username", flat=True)) == {"ivo", "una"}


def test_a_member_revokes_an_invite_and_nobody_joins_with_it_any_more(settings: Any) -> None:
    settings.ATREX_SIGNUP = "invite"
    team, other = TeamFactory(name="Red"), TeamFactory(name="Blue")
    member = Client()
    member.force_login(member_of(team, "rita"))
    page = member.post("/team/", {"invite_create": "1", "invite_uses": "5"}).content.decode()
    assert "used 0 of 5" in page
    invite = team.invites.get()
    theirs = invite_create(team=other, created_by=None)
    member.post("/team/", {"invite_revoke": str(theirs.pk)})  # another team's: left alone
    member.post("/team/", {"invite_revoke": str(invite.pk)})
    invite.refresh_from_db()
    theirs.refresh_from_db()
    assert invite.revoked_at is not None and theirs.revoked_at is None
    assert invite.code not in member.get("/team/").content.decode()
    reply = sign_up(Client(), username="late", invite_code=invite.code)
    assert reply.status_code == 400 and "revoked" in reply.content.decode()
    assert AuditEntry.objects.filter(action="team.invite_revoke").count() == 1
