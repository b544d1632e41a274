"""Sign-up: a visitor makes a user and a team of their own, or joins a team with the invite
code one of its members made. settings.ATREX_SIGNUP says who may: "open", "approval" (the
account waits, inactive, until an admin activates it in the admin) or "invite" (only with a
code). Everything is made in one transaction, or nothing; every sign-up is in the audit log.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.models import User
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.text import slugify

from portal.accounts.models import Membership, Team, TeamInvite
from portal.audit.models import audit
from portal.errors import DomainError

MAX_TEAM_NAME = 100


class SignupRefused(DomainError):
    """A sign-up that cannot be made as asked; the message says why (nothing is stored)."""

    http_status = 400


@dataclass(frozen=True)
class SignedUp:
    user: User
    team: Team
    active: bool  # False: waits for an admin (ATREX_SIGNUP=approval)
    created_team: bool


def signup_mode() -> str:
    return str(settings.ATREX_SIGNUP)


def signup(*, username: str, password: str, team_name: str = "",
           invite_code: str = "") -> SignedUp:
    mode = signup_mode()
    username, team_name, invite_code = username.strip(), team_name.strip(), invite_code.strip()
    if not username or len(username) > 150 or not all(c.isalnum() or c in "@.+-_"
                                                     for c in username):
        raise SignupRefused("username: 1 to 150 letters, digits and @.+-_")
    if bool(team_name) == bool(invite_code):
        raise SignupRefused("give either a new team's name or a team's invite code")
    if mode == "invite" and not invite_code:
        raise SignupRefused("this portal takes new accounts by invitation: ask a team member "
                            "for an invite code (Team page)")
    try:
        validate_password(password, User(username=username))
    except ValidationError as exc:
        raise SignupRefused(f"password: {' '.join(exc.messages)}") from None
    with transaction.atomic():
        if User.objects.filter(username__iexact=username).exists():
            raise SignupRefused(f"username: {username!r} is taken")
        invite = None
        if invite_code:
            invite = (TeamInvite.objects.select_for_update()
                      .filter(code=invite_code, revoked_at__isnull=True,
                              expires_at__gt=timezone.now()).select_related("team").first())
            if invite is None:
                raise SignupRefused("invite code: unknown, revoked or expired")
            team = invite.team
        else:
            if len(team_name) > MAX_TEAM_NAME or not slugify(team_name):
                raise SignupRefused(f"team: a name of 1 to {MAX_TEAM_NAME} characters with a "
                                    "letter or digit")
            if Team.objects.filter(name__iexact=team_name).exists() or \
                    Team.objects.filter(slug=slugify(team_name)).exists():
                raise SignupRefused(f"team: {team_name!r} exists; join it with an invite code "
                                    "from one of its members")
        active = mode == "open" or invite is not None and mode != "approval"
        try:
            user = User.objects.create_user(username=username, password=password,
                                            is_active=active)
            if invite is None:
                team = Team.objects.create(name=team_name, slug=slugify(team_name))
            Membership.objects.create(team=team, user=user, role=Membership.Role.MEMBER
                                      if invite else Membership.Role.OWNER)
        except IntegrityError:  # a concurrent sign-up took the name first
            raise SignupRefused("username or team name just taken: choose another") from None
        audit(actor=user, action="account.signup", target=f"team:{team.slug}",
              after={"user": username, "team": team.name, "mode": mode, "active": active,
                     "invite": invite.pk if invite else None})
    return SignedUp(user=user, team=team, active=active, created_team=invite is None)
