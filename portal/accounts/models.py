"""Teams, their members, and their API tokens (stored hashed, shown once, revocable)."""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.contrib.auth.models import User
from django.db import models

TOKEN_PREFIX_CHARS = 8
DEFAULT_DAILY_CHECK_QUOTA = 100  # five times the ranked default


class Team(models.Model):
    name = models.CharField(max_length=100, unique=True)
    slug = models.SlugField(max_length=100, unique=True)
    members: models.ManyToManyField[User, Membership] = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="Membership", related_name="teams")
    daily_submission_quota = models.PositiveIntegerField(default=20)
    # Check submissions (evaluated like any, never ranked) have their own, larger allowance:
    # a team tries more than it ranks (docs/teams.md, "Check submissions").
    daily_check_quota = models.PositiveIntegerField(default=DEFAULT_DAILY_CHECK_QUOTA)
    concurrent_job_quota = models.PositiveIntegerField(default=4)
    hidden = models.BooleanField(default=False, help_text="Hidden from public boards.")
    # Opt-in: members may give a submission a public link (an unguessable token) to its
    # summary. Turning it off revokes every link.
    share_links_enabled = models.BooleanField(default=False)
    # Called when a submission ends (submissions/webhooks.py); the secret signs each body.
    webhook_url = models.URLField(max_length=500, blank=True)
    webhook_secret = models.CharField(max_length=100, blank=True)
    webhook_last_delivery = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    class Role(models.TextChoices):
        OWNER = "owner"
        MEMBER = "member"

    team = models.ForeignKey(Team, on_delete=models.CASCADE)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)
    joined_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team", "user"], name="one_membership")]

    def __str__(self) -> str:
        return f"{self.user} in {self.team}"


def hash_token(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


class ApiTokenQuerySet(models.QuerySet["ApiToken"]):
    def active(self) -> ApiTokenQuerySet:
        return self.filter(revoked_at__isnull=True)


class TokenScope(models.TextChoices):
    """What a team token may do (issue 45): a team hands an agent no more than it needs.

    Ordered: each scope may do what the ones before it may. `read` reads the team's own data
    (submissions, results, profiles, history, quota); `check` also submits checks (never
    ranked, the larger daily check quota), asks for ncu profiles and cancels checks; `full`
    also spends ranked submissions and cancels them.
    """

    READ = "read", "read-only"
    CHECK = "check", "checks only"
    FULL = "full", "full"

    @classmethod
    def allows(cls, held: str, needed: str) -> bool:
        order = [cls.READ, cls.CHECK, cls.FULL]
        return order.index(cls(held)) >= order.index(cls(needed))


class ApiToken(models.Model):
    """Only the SHA-256 of the token is stored; the prefix lets a team tell tokens apart."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="tokens")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True)
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=TOKEN_PREFIX_CHARS)
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # Tokens made before scopes existed could do everything: they stay `full`.
    scope = models.CharField(max_length=10, choices=TokenScope.choices, default=TokenScope.FULL)

    objects = ApiTokenQuerySet.as_manager()

    def __str__(self) -> str:
        return f"{self.team}: {self.name} ({self.prefix}…, {self.scope})"

    def allows(self, needed: str) -> bool:
        return TokenScope.allows(self.scope, needed)

    def audit_label(self) -> dict[str, object]:
        """How the audit log names the token a request came with (never its value)."""
        return {"token": self.pk, "prefix": self.prefix, "name": self.name, "scope": self.scope}


def token_create(*, team: Team, name: str, created_by: object | None = None,
                 scope: str = TokenScope.FULL) -> tuple[ApiToken, str]:
    """Create a token of `scope`, audited; the raw value is returned once and never stored."""
    from portal.audit.models import audit

    raw = "atx_" + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(team=team, name=name, created_by=signed_in(created_by),
                                    prefix=raw[:TOKEN_PREFIX_CHARS], digest=hash_token(raw),
                                    scope=TokenScope(scope))
    audit(actor=created_by, action="token.create", target=f"team:{team.slug}",
          after=token.audit_label())
    return token, raw


def token_revoke(*, team: Team, token_id: int, actor: object | None) -> bool:
    """Revoke one of `team`'s tokens, audited; another team's token, or none, is left as it
    is. Returns whether a token of the team was revoked (again, if it already was)."""
    from django.db import transaction
    from django.utils import timezone

    from portal.audit.models import audit

    with transaction.atomic():
        token = ApiToken.objects.select_for_update().filter(team=team, pk=token_id).first()
        if token is None:
            return False
        before = {"revoked_at": token.revoked_at.isoformat() if token.revoked_at else None}
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
        audit(actor=actor, action="token.revoke", target=f"team:{team.slug}", before=before,
              after={"token": token.pk, "prefix": token.prefix,
                     "revoked_at": token.revoked_at.isoformat()})
    return True


def signed_in(user: object) -> User | None:
    """The user to record as an author: None for nobody, an anonymous one, or a system actor."""
    return user if isinstance(user, User) else None


class TeamInviteQuerySet(models.QuerySet["TeamInvite"]):
    def usable(self) -> TeamInviteQuerySet:
        """Not revoked, not expired, not used up: a sign-up may still join with it."""
        from django.utils import timezone

        return self.filter(revoked_at__isnull=True, expires_at__gt=timezone.now(),
                           uses__lt=models.F("max_uses"))


class TeamInvite(models.Model):
    """A code a team member hands to someone who signs up to join the team: it lets
    `max_uses` people join, for INVITE_DAYS days, until a member revokes it."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="invites")
    code = models.CharField(max_length=40, unique=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)
    max_uses = models.PositiveIntegerField(default=1)
    uses = models.PositiveIntegerField(default=0)

    objects = TeamInviteQuerySet.as_manager()

    def __str__(self) -> str:
        return f"invite to {self.team}"


INVITE_DAYS = 7
MAX_INVITE_USES = 20


def invite_create(*, team: Team, created_by: object | None, max_uses: int = 1) -> TeamInvite:
    """A code that lets `max_uses` people (1 to MAX_INVITE_USES) join the team; audited."""
    from datetime import timedelta

    from django.utils import timezone

    from portal.audit.models import audit

    if not 1 <= max_uses <= MAX_INVITE_USES:
        raise ValueError(f"an invite is for 1 to {MAX_INVITE_USES} people")
    invite = TeamInvite.objects.create(
        team=team, code=f"join-{secrets.token_urlsafe(18)}", created_by=signed_in(created_by),
        expires_at=timezone.now() + timedelta(days=INVITE_DAYS), max_uses=max_uses)
    audit(actor=created_by, action="team.invite", target=f"team:{team.slug}",
          after={"invite": invite.pk, "expires_at": invite.expires_at.isoformat(),
                 "max_uses": max_uses})
    return invite


def invite_revoke(*, team: Team, invite_id: int, actor: object | None) -> bool:
    """Revoke one of `team`'s invite codes (a member's right), audited; another team's
    code is left alone. Returns whether one of the team's codes was revoked."""
    from django.db import transaction
    from django.utils import timezone

    from portal.audit.models import audit

    with transaction.atomic():
        invite = TeamInvite.objects.select_for_update().filter(team=team, pk=invite_id).first()
        if invite is None:
            return False
        if invite.revoked_at is None:
            invite.revoked_at = timezone.now()
            invite.save(update_fields=["revoked_at"])
        audit(actor=actor, action="team.invite_revoke", target=f"team:{team.slug}",
              after={"invite": invite.pk, "uses": invite.uses,
                     "revoked_at": invite.revoked_at.isoformat()})
    return True


class PendingTeam(models.Model):
    """A team a sign-up asked for, made only when an admin activates the account
    (ATREX_SIGNUP=approval): waiting, it reserves no name (portal/accounts/signup.py)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                                related_name="pending_team")
    team_name = models.CharField(max_length=100)
    requested_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.team_name} (for {self.user})"
