"""Sign-up: a visitor makes a user and a team of their own, or joins a team with the invite
code one of its members made. settings.ATREX_SIGNUP says who may: "open", "approval" (the
account waits, inactive, until an admin activates it in the admin) or "invite" (only with a
code). Everything is made in one transaction, or nothing; every sign-up is in the audit log.

A new team's name is refused when it, or its lookalike skeleton (portal/accounts/
confusables.py: "Rеd Team" with a Cyrillic е is "Red Team"), is an existing team's. Under
approval the team is made only when an admin activates the account (`signup_activate`):
until then the request (`PendingTeam`) reserves no name, and the name is checked again then.
An invite code lets its `max_uses` people join, until it expires or a member revokes it.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.models import User
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils.text import slugify

from portal.accounts.confusables import skeleton
from portal.accounts.models import Membership, PendingTeam, Team, TeamInvite
from portal.audit.models import audit
from portal.errors import DomainError

MAX_TEAM_NAME = 100


class SignupRefused(DomainError):
    """A sign-up that cannot be made as asked; the message says why (nothing is stored)."""

    http_status = 400


@dataclass(frozen=True)
class SignedUp:
    user: User
    team: Team | None  # None: a new team, made when an admin activates the account
    team_name: str
    active: bool  # False: waits for an admin (ATREX_SIGNUP=approval)
    created_team: bool  # a new team of its own (made now, or on activation)


def signup_mode() -> str:
    return str(settings.ATREX_SIGNUP)


def signup(*, username: str, password: str, team_name: str = "",
           invite_code: str = "") -> SignedUp:
    mode = signup_mode()
    username, team_name, invite_code = username.strip(), team_name.strip(), invite_code.strip()
    if not _valid_username(username):
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
            invite = (TeamInvite.objects.select_for_update().usable()
                      .filter(code=invite_code).select_related("team").first())
            if invite is None:
                raise SignupRefused("invite code: unknown, revoked, used up or expired")
        else:
            if len(team_name) > MAX_TEAM_NAME or not slugify(team_name):
                raise SignupRefused(f"team: a name of 1 to {MAX_TEAM_NAME} characters with a "
                                    "letter or digit")
            check_team_name_free(team_name)
        active = mode == "open" or invite is not None and mode != "approval"
        team = invite.team if invite is not None else None
        try:
            user = User.objects.create_user(username=username, password=password,
                                            is_active=active)
            if invite is not None:
                Membership.objects.create(team=invite.team, user=user,
                                          role=Membership.Role.MEMBER)
                TeamInvite.objects.filter(pk=invite.pk).update(uses=F("uses") + 1)
            elif active:
                team = _team_create(team_name, user)
            else:  # under approval: made (and its name taken) when an admin activates it
                PendingTeam.objects.create(user=user, team_name=team_name)
        except IntegrityError:  # a concurrent sign-up took the name first
            raise SignupRefused("username or team name just taken: choose another") from None
        audit(actor=user, action="account.signup",
              target=f"team:{team.slug}" if team else f"pending-team:{team_name}",
              after={"user": username, "team": team.name if team else team_name,
                     "mode": mode, "active": active, "invite": invite.pk if invite else None})
    return SignedUp(user=user, team=team, team_name=team.name if team else team_name,
                    active=active, created_team=invite is None)


def _valid_username(username: str) -> bool:
    """Not empty, and within the User model's own rules (Django's UnicodeUsernameValidator
    and its max_length of 150)."""
    try:
        User._meta.get_field("username").run_validators(username)
    except ValidationError:
        return False
    return bool(username)


def check_team_name_free(name: str, *, exclude: Team | None = None) -> None:
    """SignupRefused when a team has this name, its slug, or a lookalike of it."""
    others = Team.objects.exclude(pk=exclude.pk) if exclude is not None else Team.objects.all()
    if others.filter(name__iexact=name).exists() or others.filter(slug=slugify(name)).exists():
        raise SignupRefused(f"team: {name!r} exists; join it with an invite code from one of "
                            "its members")
    wanted = skeleton(name)
    for existing in others.values_list("name", flat=True).iterator():
        if skeleton(existing) == wanted:
            raise SignupRefused(f"team: {name!r} looks like the existing team {existing!r} "
                                "(letters from another alphabet, or 0/o, 1/l, rn/m); choose "
                                "another name, or join it with an invite code")


def _team_create(name: str, owner: User) -> Team:
    team = Team.objects.create(name=name, slug=slugify(name))
    Membership.objects.create(team=team, user=owner, role=Membership.Role.OWNER)
    return team


def signup_activate(*, user: User, actor: object) -> Team | None:
    """An admin lets a waiting account in: its team is made now (the name checked again: a
    team made meanwhile may hold it, and then nothing changes and SignupRefused says so),
    the account activated, the request dropped; audited. Returns the team it joined or made
    (None for an account with no team waiting)."""
    with transaction.atomic():
        locked = User.objects.select_for_update().get(pk=user.pk)
        pending = PendingTeam.objects.filter(user=locked).first()
        team = None
        if pending is not None:
            check_team_name_free(pending.team_name)
            try:
                with transaction.atomic():
                    team = _team_create(pending.team_name, locked)
            except IntegrityError:
                raise SignupRefused(f"team: {pending.team_name!r} was just taken") from None
            pending.delete()
        else:
            membership = Membership.objects.filter(user=locked).select_related("team").first()
            team = membership.team if membership else None
        locked.is_active = True
        locked.save(update_fields=["is_active"])
        audit(actor=actor, action="account.activate", target=f"user:{locked.username}",
              after={"team": team.name if team else None})
    user.is_active = True
    return team
