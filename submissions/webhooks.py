"""A team's webhook: a signed POST to the team's URL when one of its submissions ends.

"Ends" is every job ended (scored, failed or cancelled). The rescore that follows a job's
end (leaderboard/tasks.py) calls `submission_ended_notify`, which claims that end once (a
conditional UPDATE on the submission: several rescores of one end, or of two jobs ending
together, call once) and, after commit, sends `DELIVER_TASK` to the results queue with the
body fixed. The task POSTs it with a short timeout, retries network errors, 5xx, 408 and 429
with a growing delay, and logs what failed; nothing of it runs in the results consumer's
own transaction, so a dead webhook never holds up results.

The body is signed: `X-Atrex-Signature: sha256=<hex HMAC-SHA256 of the raw body, keyed with
the team's secret>`; `X-Atrex-Delivery` names the delivery (the same on every retry).

Server-side request forgery: the portal sends requests where a team tells it to. Only http
and https URLs are taken, and every address the host resolves to must be a global one
(no loopback, link-local, private, shared, multicast or reserved address: the portal's
database, broker and cloud metadata live there), checked when the URL is set and again at
each delivery, which connects to the address it checked (no second lookup a DNS answer could
change) and follows no redirect. ATREX_WEBHOOK_ALLOW_PRIVATE=1 lifts the address check (a
deployment whose teams' receivers are on its own network, and the tests).
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import ipaddress
import json
import logging
import secrets
import socket
import ssl
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.db.models import Max, Q
from django.urls import reverse
from django.utils import timezone

from evaluation.protocol import RESULTS_QUEUE
from portal.accounts.models import Team
from portal.audit.models import audit
from portal.errors import DomainError
from submissions.models import EvaluationJob, Submission
from submissions.selectors import submission_outcomes, submission_status

logger = logging.getLogger(__name__)

DELIVER_TASK = "submissions.deliver_webhook"
TEST_DELIVER_TASK = "submissions.deliver_webhook_test"
EVENT = "submission.ended"
TEST_EVENT = "ping"  # the team page's "Send a test delivery": no submission, same signing
SIGNATURE_HEADER = "X-Atrex-Signature"
DELIVERY_HEADER = "X-Atrex-Delivery"
EVENT_HEADER = "X-Atrex-Event"
MAX_URL_CHARS = 500
_RETRY_STATUSES = {408, 429}


class WebhookRejected(DomainError, ValueError):
    """A webhook URL the portal will not call (HTTP 400 where it was set)."""


class WebhookUnresolved(WebhookRejected):
    """The host did not resolve: maybe for a moment (a delivery tries again)."""


class DeliveryFailed(Exception):
    """A delivery that did not get a 2xx answer; `retry` says whether trying again may help."""

    def __init__(self, message: str, *, retry: bool) -> None:
        super().__init__(message)
        self.retry = retry


# Settings


def check_webhook_url(url: str) -> str:
    """The URL, stripped, if the portal may call it; else WebhookRejected saying why."""
    url = url.strip()
    if len(url) > MAX_URL_CHARS:
        raise WebhookRejected(f"webhook URL: at most {MAX_URL_CHARS} characters")
    if any(ch.isspace() or ord(ch) < 32 for ch in url):
        raise WebhookRejected("webhook URL: no spaces or control characters")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise WebhookRejected("webhook URL: only http:// and https:// URLs are called")
    if not parts.hostname:
        raise WebhookRejected("webhook URL: no host name")
    try:
        parts.port  # noqa: B018 (raises on a port that is not a number)
    except ValueError:
        raise WebhookRejected("webhook URL: the port is not a number") from None
    _resolve_allowed(parts.hostname, _port(parts.scheme, parts.port))
    return url


def _port(scheme: str, port: int | None) -> int:
    return port or (443 if scheme == "https" else 80)


def _resolve_allowed(host: str, port: int) -> str:
    """One address of `host` to connect to, when every address it resolves to is allowed."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise WebhookUnresolved(f"webhook URL: the host {host!r} does not resolve ({exc})") \
            from None
    addresses = [str(info[4][0]) for info in infos]
    if not settings.ATREX_WEBHOOK_ALLOW_PRIVATE:
        for address in addresses:
            if not _is_public(address):
                raise WebhookRejected(
                    f"webhook URL: {host} resolves to {address}, an address the portal does not "
                    "call (loopback, link-local, private or otherwise not global; an operator "
                    "of a test deployment may set ATREX_WEBHOOK_ALLOW_PRIVATE=1)")
    return addresses[0]


_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")
# SIIT's IPv4-translated addresses (RFC 2765): ::ffff:0:a.b.c.d reaches a.b.c.d through a
# stateless translator, so [::ffff:0:127.0.0.1] is the loopback's, as the IPv4-mapped form is.
_IPV4_TRANSLATED = ipaddress.IPv6Network("::ffff:0:0:0/96")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")
# Deprecated (RFC 3879) but still routed inside some sites, and not "private" to Python.
_SITE_LOCAL = ipaddress.IPv6Network("fec0::/10")


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries (and reaches through a translator or a
    tunnel): IPv4-mapped, IPv4-translated, IPv4-compatible, NAT64, 6to4, Teredo's server and
    client."""
    low32 = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip.ipv4_mapped is not None:
        return [ip.ipv4_mapped]
    if ip in _IPV4_COMPATIBLE or ip in _IPV4_TRANSLATED or ip in _NAT64:
        return [low32]
    if ip.sixtofour is not None:
        return [ip.sixtofour]
    if ip.teredo is not None:
        return list(ip.teredo)
    return []


def _is_public(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        if ip in _NAT64_LOCAL or ip in _SITE_LOCAL:
            return False  # a local translator's mapping is its own; a site's own addresses
        embedded = _embedded_ipv4(ip)
        if embedded:
            # Judged by where it leads: every address it carries must be global.
            return all(v4.is_global and not v4.is_multicast for v4 in embedded)
    return ip.is_global and not ip.is_multicast


def team_webhook_set(*, team: Team, url: str, actor: Any) -> None:
    """Call `url` when a submission of the team ends; a signing secret is made when the team
    has none. An empty URL turns the webhook off."""
    url = check_webhook_url(url) if url.strip() else ""
    with transaction.atomic():
        locked = Team.objects.select_for_update().get(pk=team.pk)
        before = {"url": locked.webhook_url}
        locked.webhook_url = url
        if url and not locked.webhook_secret:
            locked.webhook_secret = new_secret()
        locked.save(update_fields=["webhook_url", "webhook_secret"])
        team.webhook_url, team.webhook_secret = locked.webhook_url, locked.webhook_secret
        audit(actor=actor, action="team.webhook", target=f"team:{team.slug}", before=before,
              after={"url": url})


def team_webhook_rotate_secret(*, team: Team, actor: Any) -> str:
    """A new signing secret; the old one signs nothing from now on."""
    secret = new_secret()
    Team.objects.filter(pk=team.pk).update(webhook_secret=secret)
    team.webhook_secret = secret
    audit(actor=actor, action="team.webhook_secret", target=f"team:{team.slug}")
    return secret


def new_secret() -> str:
    return "whsec_" + secrets.token_urlsafe(32)


# When a submission ends


def submission_ended_notify(
        submission: Submission, *,
        score_of: Callable[[Submission], dict[str, Any] | None] = lambda _: None) -> bool:
    """Queue the webhook call of the submission's end, once per end. Returns whether a call
    was queued: not while a job is queued or running, not for a team without a webhook, not
    twice for one end. `score_of` gives the score the call carries, read only when one is
    queued (the leaderboard's rescore task passes its reader of the active score)."""
    team = Team.objects.filter(pk=submission.team_id).values("webhook_url").first()
    if not team or not team["webhook_url"]:
        return False
    jobs = EvaluationJob.objects.filter(candidate__submission=submission)
    if not jobs.exists() or jobs.filter(status__in=EvaluationJob.Status.active()).exists():
        return False
    ended_at = jobs.aggregate(last=Max("finished_at"))["last"] or timezone.now()
    claimed = (Submission.objects.filter(pk=submission.pk)
               .filter(Q(webhook_ended_at__isnull=True) | Q(webhook_ended_at__lt=ended_at))
               .update(webhook_ended_at=ended_at))
    if not claimed:
        return False
    delivery = uuid.uuid4().hex
    body = json.dumps(webhook_payload(submission, ended_at=ended_at, delivery=delivery,
                                      score=score_of(submission)),
                      sort_keys=True, default=str)
    transaction.on_commit(lambda: current_app.send_task(
        DELIVER_TASK, args=[submission.pk, body, delivery], queue=RESULTS_QUEUE), robust=True)
    return True


def webhook_payload(submission: Submission, *, ended_at: datetime, delivery: str,
                    score: dict[str, Any] | None) -> dict[str, Any]:
    """What the team's URL receives: the submission's id, status, outcome, scores under the
    active weights and links (its page, its API, its profile, its public link if shared)."""
    jobs = EvaluationJob.objects.filter(candidate__submission=submission)
    release = submission.release
    return {
        "event": EVENT, "delivery": delivery, "submission": submission.pk,
        "team": submission.team.name,
        "release": {"id": release.pk, "name": release.name, "version": release.version},
        "hardware": submission.hardware.name, "mode": submission.mode,
        "created_at": submission.created_at.isoformat(), "ended_at": ended_at.isoformat(),
        "status": submission_status(jobs),
        "outcome": submission_outcomes([submission.pk])[submission.pk],
        "scores": score,
        "links": submission_links(submission),
    }


def submission_links(submission: Submission) -> dict[str, str | None]:
    def absolute(path: str) -> str:
        return settings.ATREX_PUBLIC_URL.rstrip("/") + path

    return {
        "page": absolute(reverse("submission", args=[submission.pk])),
        "api": absolute(reverse("api-submission", args=[submission.pk])),
        "profile": absolute(reverse("api-submission-profile", args=[submission.pk])),
        "shared": absolute(reverse("submission-shared", args=[submission.share_token]))
        if submission.share_token else None,
    }


# Delivery


def signature(secret: str, body: bytes) -> str:
    """The signature header's value: what a receiver recomputes with its copy of the secret
    and compares with hmac.compare_digest."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Delivered:
    status: int
    url: str


def deliver(submission_id: int, body: str, delivery: str) -> Delivered | None:
    """POST the body to the team's current webhook, signed with its current secret. None
    when the team has no webhook (any more); DeliveryFailed when it did not answer 2xx."""
    row = (Team.objects.filter(submissions__pk=submission_id)
           .values("pk", "webhook_url", "webhook_secret").first())
    if not row or not row["webhook_url"]:
        return None
    status = _signed_post(row, body, delivery, EVENT)
    record(row["pk"], f"submission {submission_id}: HTTP {status}")
    return Delivered(status=status, url=row["webhook_url"])


def test_delivery_queue(*, team: Team, actor: Any) -> str:
    """Queue a signed "ping" to the team's webhook (results queue, after commit), so a team
    can check its receiver and its secret without waiting for a submission to end. Tried
    once; the answer shows as the team page's last delivery. Returns the delivery id."""
    if not team.webhook_url:
        raise WebhookRejected("webhook_url: save a webhook URL first, then test it")
    delivery = uuid.uuid4().hex
    body = json.dumps({"event": TEST_EVENT, "delivery": delivery, "team": team.name,
                       "test": True, "sent_at": timezone.now().isoformat()}, sort_keys=True)
    audit(actor=actor, action="team.webhook_test", target=f"team:{team.pk}", before=None,
          after={"delivery": delivery})
    transaction.on_commit(lambda: current_app.send_task(
        TEST_DELIVER_TASK, args=[team.pk, body, delivery], queue=RESULTS_QUEUE), robust=True)
    return delivery


def deliver_test(team_id: int, body: str, delivery: str) -> None:
    """The test ping, once: its answer or its failure is the team page's last delivery."""
    row = Team.objects.filter(pk=team_id).values("pk", "webhook_url", "webhook_secret").first()
    if not row or not row["webhook_url"]:
        return
    try:
        status = _signed_post(row, body, delivery, TEST_EVENT)
    except DeliveryFailed as exc:
        record(team_id, f"test delivery {delivery[:8]}: failed: {exc}")
        return
    record(team_id, f"test delivery {delivery[:8]}: HTTP {status}")


def _signed_post(row: Mapping[str, Any], body: str, delivery: str, event: str) -> int:
    """POST `body` to the row's webhook URL, signed with its secret; the 2xx status, else
    DeliveryFailed saying whether trying again could help."""
    data = body.encode()
    try:
        status = _post(row["webhook_url"], data, {
            "Content-Type": "application/json", "User-Agent": "atrex-portal-webhook/1",
            EVENT_HEADER: event, DELIVERY_HEADER: delivery,
            SIGNATURE_HEADER: signature(row["webhook_secret"], data)})
    except WebhookRejected as exc:
        raise DeliveryFailed(str(exc), retry=isinstance(exc, WebhookUnresolved)) from None
    except (OSError, http.client.HTTPException) as exc:  # refused, reset, timed out, TLS
        raise DeliveryFailed(f"{type(exc).__name__}: {exc}", retry=True) from None
    if not 200 <= status < 300:
        raise DeliveryFailed(f"HTTP {status}", retry=status >= 500 or status in _RETRY_STATUSES)
    return status


def _post(url: str, data: bytes, headers: dict[str, str]) -> int:
    """One POST to the address checked for the URL's host (no second lookup), no redirect
    followed; the answer's status."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = _port(parts.scheme, parts.port)
    address = _resolve_allowed(host, port)
    timeout = settings.ATREX_WEBHOOK_TIMEOUT_SECONDS
    connection: http.client.HTTPConnection
    if parts.scheme == "https":
        connection = _PinnedHTTPSConnection(host, port, address=address, timeout=timeout)
    else:
        connection = _PinnedHTTPConnection(host, port, address=address, timeout=timeout)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        connection.request("POST", path, body=data, headers=headers)
        response = connection.getresponse()
        response.read(64 * 1024)  # a receiver's answer is not read beyond this
        return response.status
    finally:
        connection.close()


class _PinnedHTTPConnection(http.client.HTTPConnection):
    def __init__(self, host: str, port: int, *, address: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    """TLS to the checked address, the certificate verified for the URL's host name."""

    def __init__(self, host: str, port: int, *, address: str, timeout: float) -> None:
        self._tls = ssl.create_default_context()
        super().__init__(host, port, timeout=timeout, context=self._tls)
        self._address = address

    def connect(self) -> None:
        sock = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._tls.wrap_socket(sock, server_hostname=self.host)


def record(team_id: int, what: str) -> None:
    """The team page's "last delivery" line."""
    line = f"{timezone.now():%Y-%m-%d %H:%M:%S} UTC, {what}"[:300]
    Team.objects.filter(pk=team_id).update(webhook_last_delivery=line)


def delivery_failed(submission_id: int, delivery: str, error: DeliveryFailed,
                    attempts: int) -> None:
    """Given up: logged, and shown on the team page."""
    logger.warning("webhook delivery %s of submission %s failed after %d attempt(s): %s",
                   delivery, submission_id, attempts, error)
    team_id = Submission.objects.filter(pk=submission_id).values_list("team_id", flat=True).first()
    if team_id is not None:
        record(team_id, f"submission {submission_id}: failed after {attempts} attempt(s): "
                        f"{error}")


def retry_delay(retries: int) -> float:
    """Seconds before the next attempt: the base, doubled after each failure."""
    return float(settings.ATREX_WEBHOOK_RETRY_BASE_SECONDS * 2 ** retries)
