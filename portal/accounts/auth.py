"""API authentication by team token: `Authorization: Bearer atx_...`."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions, permissions
from rest_framework.request import Request

from portal.accounts.models import ApiToken, Team, TokenScope, hash_token
from portal.throttles import TokenFailureThrottle, refusal


class TeamTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[Any, ApiToken] | None:
        header = authentication.get_authorization_header(request).decode(errors="replace")
        if not header.startswith(f"{self.keyword} "):
            return None
        raw = header[len(self.keyword) + 1:].strip()
        token = (ApiToken.objects.active().select_related("team", "created_by")
                 .filter(digest=hash_token(raw)).first())
        if token is None:
            # Guessing tokens is slowed down per client address: this failure is counted
            # before it is answered, so the guess past the limit gets 429, not 401.
            wait = refusal(TokenFailureThrottle, request)
            if wait is not None:
                raise exceptions.Throttled(wait=wait, detail="Too many invalid tokens.")
            raise exceptions.AuthenticationFailed("invalid or revoked token")
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=timezone.now())
        return token.created_by or AnonymousUser(), token

    def authenticate_header(self, request: Request) -> str:
        return self.keyword


def request_team(request: Any) -> Team | None:
    """The team acting: the token's team for API calls, else the signed-in user's team."""
    auth = getattr(request, "auth", None)
    if isinstance(auth, ApiToken):
        return auth.team
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return Team.objects.filter(members=user).order_by("pk").first()
    return None


def request_token(request: Any) -> ApiToken | None:
    """The team token a request came with; None for a signed-in page user or nobody."""
    auth = getattr(request, "auth", None)
    return auth if isinstance(auth, ApiToken) else None


def require_scope(request: Any, needed: str, what: str) -> None:
    """Refuse (403, audited) a request whose team token's scope does not reach `needed`
    (a TokenScope value); `what` names the refused action in the message. Signed-in members
    on the pages are not limited by scopes: scopes are what a team hands to scripts."""
    from portal.audit.models import audit

    token = request_token(request)
    if token is None or token.allows(needed):
        return
    audit(actor=token.created_by, action="token.refused", target=f"team:{token.team.slug}",
          after={**token.audit_label(), "needed": needed, "request": what})
    raise exceptions.PermissionDenied(
        f"this token is {TokenScope(token.scope).label}: {what} needs a "
        f"{TokenScope(needed).label} token (the team page makes tokens of each scope)")


def audit_token_use(request: Any, *, action: str, target: str,
                    after: dict[str, object] | None = None) -> None:
    """Record in the audit log a change made with a team token, naming the token and its
    scope. Reads are not recorded (an agent polls every second); the token's
    `last_used_at` says when it was last used at all."""
    from portal.audit.models import audit

    token = request_token(request)
    if token is not None:
        audit(actor=token.created_by, action=action, target=target,
              after={**(after or {}), **token.audit_label()})


class TokenScopePermission(permissions.BasePermission):
    """The API's default: a read-only token may only read, on every endpoint, however new;
    what needs more than `check` (a ranked submission) the view asks with require_scope."""

    message = "this token is read-only: it may not change anything"

    def has_permission(self, request: Request, view: Any) -> bool:
        if request.method in permissions.SAFE_METHODS:
            return True
        require_scope(request, TokenScope.CHECK, f"{request.method} {request.path}")
        return True


def is_admin(request: Any) -> bool:
    user = getattr(request, "user", None)
    return bool(user is not None and user.is_authenticated and user.is_staff
                and not isinstance(getattr(request, "auth", None), ApiToken))


class TeamTokenScheme(OpenApiAuthenticationExtension):
    """Describes the team token in the OpenAPI schema (found by drf-spectacular by class)."""

    target_class = "portal.accounts.auth.TeamTokenAuthentication"
    name = "teamToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "bearerFormat": "atx_ team token"}
