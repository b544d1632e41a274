"""A team's webhook: set on the team page (http/https only, no private addresses unless the
deployment allows them), called once when a submission ends, by a task on the results queue
after commit, signed with HMAC-SHA256; retried, timed out and logged, never in the way of
the results consumer. The receiver is a local HTTP server: nothing leaves the machine."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from unittest import mock

import pytest
from django.test import Client

from evaluation.protocol import RESULTS_QUEUE
from leaderboard.tasks import rescore_submission_task
from portal.accounts.models import Team
from submissions.jobs import job_rerun
from submissions.models import EvaluationJob, Submission
from submissions.tasks import deliver_webhook, deliver_webhook_test
from submissions.webhooks import (
    DELIVER_TASK,
    DeliveryFailed,
    WebhookRejected,
    check_webhook_url,
    deliver,
    signature,
    submission_ended_notify,
)
from tests.factories import TeamFactory, UserFactory, member_of
from tests.reports import RMS_SHAPE, gpu_shape, gpu_submission, native
from tests.world import signed_in

pytestmark = pytest.mark.django_db


class Receiver:
    """A local HTTP server that answers each POST with the next scripted reply (status,
    seconds to wait first, headers) and keeps what it received."""

    def __init__(self) -> None:
        self.replies: list[tuple[int, float, dict[str, str]]] = []
        self.received: list[dict[str, Any]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.received.append({"path": self.path, "headers": dict(self.headers),
                                          "body": body})
                status, delay, headers = (receiver.replies.pop(0) if receiver.replies
                                          else (200, 0.0, {}))
                time.sleep(delay)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/atrex?x=1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver(settings: Any) -> Iterator[Receiver]:
    settings.ATREX_WEBHOOK_ALLOW_PRIVATE = True  # the receiver is on the loopback
    settings.ATREX_WEBHOOK_RETRY_BASE_SECONDS = 0
    settings.ATREX_WEBHOOK_TIMEOUT_SECONDS = 1
    settings.ATREX_PUBLIC_URL = "https://atrex.example.org"
    with Receiver() as server:
        yield server


def hooked_team(url: str) -> Team:
    team = TeamFactory(name="Hooked")
    client = signed_in(member_of(team, "hal"))
    assert client.post("/team/", {"webhook_url": url}).status_code == 200
    team.refresh_from_db()
    return team


def evaluated(team: Team) -> Submission:
    return gpu_submission(team, {"rms_norm": native("rms_norm")}, {"rms_norm": [
        gpu_shape(RMS_SHAPE, median_s=20e-6, kernels=[("_rms_norm_kernel", "dsl", 1, 15.0)])]})


def ended(submission: Submission, django_capture_on_commit_callbacks: Any) -> list[Any]:
    """Run the rescore task a job's end sends; the tasks it queued after commit."""
    with mock.patch("submissions.webhooks.current_app.send_task") as send, \
            django_capture_on_commit_callbacks(execute=True):
        rescore_submission_task(submission.pk)
    return [c for c in send.call_args_list if c.args[0] == DELIVER_TASK]


# Setting it


@pytest.mark.parametrize(("url", "why"), [
    ("ftp://example.org/hook", "only http:// and https://"),
    ("javascript:alert(1)", "only http:// and https://"),
    ("http:///nohost", "no host name"),
    ("http://127.0.0.1:8000/hook", "127.0.0.1"),
    ("http://localhost/hook", "not global"),
    ("http://169.254.169.254/latest/meta-data/", "169.254.169.254"),
    ("http://10.0.0.7/hook", "10.0.0.7"),
    ("http://[::1]/hook", "::1"),
    ("http://[::ffff:127.0.0.1]/hook", "not global"),
    ("https://example.org:notaport/", "port"),
])
def test_a_webhook_url_must_be_http_and_reach_no_private_address(url: str, why: str) -> None:
    with pytest.raises(WebhookRejected, match=why.replace(".", r"\.").replace("/", "/")):
        check_webhook_url(url)


# Loopback (and a private address) reached through every IPv6 form that carries an IPv4
# address to a translator or tunnel: each is judged by the address it leads to.
WRAPPED_PRIVATE = [
    "::ffff:127.0.0.1",  # IPv4-mapped
    "::127.0.0.1",  # IPv4-compatible
    "::10.0.0.7",
    "64:ff9b::7f00:1",  # NAT64, the well-known prefix
    "64:ff9b::a00:7",
    "64:ff9b:1::7f00:1",  # NAT64, local use: never global
    "2002:7f00:1::1",  # 6to4
    "2002:a00:7::1",
    "2001:0:4136:e378:8000:63bf:80ff:fffe",  # Teredo, client 127.0.0.1 (obfuscated)
    "::ffff:0:127.0.0.1",  # IPv4-translated (SIIT, RFC 2765)
    "::ffff:0:169.254.169.254",  # the cloud metadata address, translated
    "fec0::1",  # site-local (deprecated, still routed inside sites)
    "fec0:0:0:ffff::1",
]
WRAPPED_PUBLIC = ["64:ff9b::5db8:d822", "2002:5db8:d822::1", "::ffff:93.184.216.34",
                  "::ffff:0:93.184.216.34"]


@pytest.mark.parametrize("address", WRAPPED_PRIVATE)
def test_every_wrapped_form_of_a_private_address_is_refused_at_set_up(address: str) -> None:
    with pytest.raises(WebhookRejected, match="not global"):
        check_webhook_url(f"http://[{address}]/hook")


@pytest.mark.parametrize("address", WRAPPED_PUBLIC)
def test_a_wrapped_public_address_is_taken(address: str) -> None:
    assert check_webhook_url(f"http://[{address}]/hook") == f"http://[{address}]/hook"


@pytest.mark.parametrize("address", WRAPPED_PRIVATE)
def test_a_name_resolving_to_a_wrapped_private_address_is_refused_at_delivery(
        address: str, receiver: Receiver, settings: Any) -> None:
    team = hooked_team(receiver.url)
    Team.objects.filter(pk=team.pk).update(webhook_url="http://hooks.example.org/h")
    submission = evaluated(team)
    settings.ATREX_WEBHOOK_ALLOW_PRIVATE = False
    answer = [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", (address, 80, 0, 0))]
    with mock.patch("submissions.webhooks.socket.getaddrinfo", return_value=answer), \
            pytest.raises(DeliveryFailed, match="not global") as refused:
        deliver(submission.pk, "{}", "d-wrapped")
    assert not refused.value.retry and receiver.received == []


def test_a_public_address_is_taken() -> None:
    assert check_webhook_url(" https://93.184.216.34/hook ") == "https://93.184.216.34/hook"


def test_a_deployment_may_allow_private_addresses(settings: Any) -> None:
    settings.ATREX_WEBHOOK_ALLOW_PRIVATE = True
    assert check_webhook_url("http://127.0.0.1:9/hook") == "http://127.0.0.1:9/hook"
    with pytest.raises(WebhookRejected, match="only http"):
        check_webhook_url("file:///etc/passwd")


def test_the_team_page_sets_the_webhook_with_a_secret_and_refuses_a_bad_url() -> None:
    team = TeamFactory()
    client = signed_in(member_of(team, "wes"))
    refused = client.post("/team/", {"webhook_url": "http://127.0.0.1/x"})
    assert refused.status_code == 400 and 'id="settings-error"' in refused.content.decode()
    team.refresh_from_db()
    assert team.webhook_url == "" and team.webhook_secret == ""
    assert client.post("/team/", {"webhook_url": "https://93.184.216.34/h"}).status_code == 200
    team.refresh_from_db()
    assert team.webhook_url == "https://93.184.216.34/h" and team.webhook_secret.startswith("whsec_")
    first = team.webhook_secret
    page = client.post("/team/", {"webhook_rotate": "1"}).content.decode()
    team.refresh_from_db()
    assert team.webhook_secret != first and team.webhook_secret in page
    client.post("/team/", {"webhook_url": ""})
    team.refresh_from_db()
    assert team.webhook_url == ""


# When it is called


def test_a_submission_that_ends_calls_the_webhook_once_signed(
        receiver: Receiver, django_capture_on_commit_callbacks: Any) -> None:
    team = hooked_team(receiver.url)
    submission = evaluated(team)
    queued = ended(submission, django_capture_on_commit_callbacks)
    assert len(queued) == 1 and queued[0].kwargs["queue"] == RESULTS_QUEUE
    assert ended(submission, django_capture_on_commit_callbacks) == []  # once per end
    deliver_webhook.apply(args=queued[0].kwargs["args"])
    [request] = receiver.received
    assert request["path"] == "/hooks/atrex?x=1"
    body = request["body"]
    expected = "sha256=" + hmac.new(team.webhook_secret.encode(), body,
                                    hashlib.sha256).hexdigest()
    assert request["headers"]["X-Atrex-Signature"] == expected
    assert request["headers"]["X-Atrex-Event"] == "submission.ended"
    doc = json.loads(body)
    assert request["headers"]["X-Atrex-Delivery"] == doc["delivery"]
    assert doc["submission"] == submission.pk and doc["status"] == "scored"
    assert doc["outcome"]["summary"] == "scored: 1 of 6 shapes correct, 5 not evaluated"
    assert doc["scores"]["aggregate"] is not None and "rms_norm" in doc["scores"]["by_operator"]
    assert doc["links"]["page"] == f"https://atrex.example.org/submissions/{submission.pk}/"
    assert doc["links"]["profile"].endswith(f"/api/submissions/{submission.pk}/profile/")
    assert doc["links"]["shared"] is None and doc["mode"] == "ranked"
    team.refresh_from_db()
    assert f"submission {submission.pk}: HTTP 200" in team.webhook_last_delivery


def test_nothing_is_called_while_a_job_runs_or_without_a_webhook(
        receiver: Receiver, django_capture_on_commit_callbacks: Any) -> None:
    plain = evaluated(TeamFactory(name="Plain"))
    assert ended(plain, django_capture_on_commit_callbacks) == []
    submission = evaluated(hooked_team(receiver.url))
    EvaluationJob.objects.filter(candidate__submission=submission).update(status="running")
    assert not submission_ended_notify(submission)


def test_a_rerun_that_ends_again_calls_again(
        receiver: Receiver, django_capture_on_commit_callbacks: Any) -> None:
    submission = evaluated(hooked_team(receiver.url))
    assert len(ended(submission, django_capture_on_commit_callbacks)) == 1
    job = EvaluationJob.objects.get(candidate__submission=submission)
    with mock.patch("submissions.jobs.current_app"):
        job_rerun(job=job, actor=UserFactory(username="root", is_staff=True))
    assert ended(submission, django_capture_on_commit_callbacks) == []  # running again
    EvaluationJob.objects.filter(pk=job.pk).update(status="scored")
    EvaluationJob.objects.filter(pk=job.pk).update(
        finished_at=Submission.objects.get(pk=submission.pk).webhook_ended_at
        + timedelta(minutes=1))
    assert len(ended(submission, django_capture_on_commit_callbacks)) == 1


def test_a_failing_receiver_is_retried_then_given_up_and_logged(
        receiver: Receiver, settings: Any, caplog: Any) -> None:
    settings.ATREX_WEBHOOK_RETRIES = 2
    submission = evaluated(hooked_team(receiver.url))
    receiver.replies = [(500, 0.0, {}), (503, 0.0, {}), (502, 0.0, {})]
    with caplog.at_level(logging.WARNING, logger="submissions.webhooks"):
        deliver_webhook.apply(args=[submission.pk, '{"event": "x"}', "d1"])
    assert len(receiver.received) == 3  # the first try and two retries
    assert "failed after 3 attempt(s): HTTP 502" in caplog.text
    team = Team.objects.get(pk=submission.team_id)
    assert "failed after 3 attempt(s)" in team.webhook_last_delivery


def test_a_receiver_that_recovers_gets_the_same_delivery(receiver: Receiver) -> None:
    submission = evaluated(hooked_team(receiver.url))
    receiver.replies = [(503, 0.0, {}), (200, 0.0, {})]
    deliver_webhook.apply(args=[submission.pk, '{"event": "x"}', "d2"])
    assert len(receiver.received) == 2
    assert {r["headers"]["X-Atrex-Delivery"] for r in receiver.received} == {"d2"}
    assert len({r["headers"]["X-Atrex-Signature"] for r in receiver.received}) == 1


def test_a_slow_receiver_times_out_and_a_redirect_is_not_followed(receiver: Receiver) -> None:
    submission = evaluated(hooked_team(receiver.url))
    receiver.replies = [(200, 2.5, {})]
    with pytest.raises(DeliveryFailed) as slow:
        deliver(submission.pk, "{}", "d3")
    assert slow.value.retry and "timed out" in str(slow.value).lower()
    receiver.replies = [(302, 0.0, {"Location": "http://169.254.169.254/"})]
    with pytest.raises(DeliveryFailed) as moved:
        deliver(submission.pk, "{}", "d4")
    assert not moved.value.retry and "HTTP 302" in str(moved.value)
    assert len(receiver.received) == 2  # nothing went to the redirect's address


def test_a_client_error_is_not_retried(receiver: Receiver, caplog: Any) -> None:
    submission = evaluated(hooked_team(receiver.url))
    receiver.replies = [(404, 0.0, {})]
    with caplog.at_level(logging.WARNING, logger="submissions.webhooks"):
        deliver_webhook.apply(args=[submission.pk, "{}", "d5"])
    assert len(receiver.received) == 1 and "HTTP 404" in caplog.text


def test_an_address_that_turned_private_is_refused_at_delivery(
        receiver: Receiver, settings: Any) -> None:
    submission = evaluated(hooked_team(receiver.url))
    settings.ATREX_WEBHOOK_ALLOW_PRIVATE = False  # e.g. a DNS name now pointing inside
    with pytest.raises(DeliveryFailed) as refused:
        deliver(submission.pk, "{}", "d6")
    assert not refused.value.retry and receiver.received == []


def test_a_broken_broker_never_breaks_the_rescore(
        receiver: Receiver, django_capture_on_commit_callbacks: Any) -> None:
    submission = evaluated(hooked_team(receiver.url))
    submission.scores.all().delete()
    with mock.patch("submissions.webhooks.current_app.send_task",
                    side_effect=ConnectionError("broker down")), \
            django_capture_on_commit_callbacks(execute=True):
        rescore_submission_task(submission.pk)  # does not raise
    assert submission.scores.exists()


def test_the_signature_is_hmac_sha256_of_the_body() -> None:
    assert signature("k", b"{}") == "sha256=" + hmac.new(b"k", b"{}", hashlib.sha256).hexdigest()


def test_the_team_page_shows_the_secret_and_the_last_delivery(receiver: Receiver) -> None:
    team = hooked_team(receiver.url)
    Team.objects.filter(pk=team.pk).update(webhook_last_delivery="2026-12-01 10:00:00 UTC, x")
    client = signed_in(team.members.get())
    html = client.get("/team/").content.decode()
    assert team.webhook_secret in html and "2026-12-01 10:00:00 UTC, x" in html
    assert Client().get("/team/").status_code == 302


# Testing it from the team page


def test_the_team_page_sends_a_signed_test_ping_and_shows_its_answer(
        receiver: Receiver, django_capture_on_commit_callbacks: Any) -> None:
    team = hooked_team(receiver.url)
    client = signed_in(member_of(team, "tess"))
    with mock.patch("submissions.webhooks.current_app.send_task") as send, \
            django_capture_on_commit_callbacks(execute=True):
        page = client.post("/team/", {"webhook_test": "1"}).content.decode()
    assert 'id="webhook-test-sent"' in page
    [queued] = send.call_args_list
    assert queued.args[0] == "submissions.deliver_webhook_test"
    assert queued.kwargs["queue"] == RESULTS_QUEUE
    deliver_webhook_test.apply(args=queued.kwargs["args"])
    [request] = receiver.received
    body = request["body"]
    assert request["headers"]["X-Atrex-Event"] == "ping"
    assert request["headers"]["X-Atrex-Signature"] == "sha256=" + hmac.new(
        team.webhook_secret.encode(), body, hashlib.sha256).hexdigest()
    doc = json.loads(body)
    assert doc["event"] == "ping" and doc["test"] is True and doc["team"] == "Hooked"
    shown = client.get("/team/").content.decode()
    assert f"test delivery {doc['delivery'][:8]}: HTTP 200" in shown

    receiver.replies = [(503, 0.0, {})]  # a failing receiver: tried once, the failure shown
    with mock.patch("submissions.webhooks.current_app.send_task") as send, \
            django_capture_on_commit_callbacks(execute=True):
        client.post("/team/", {"webhook_test": "1"})
    deliver_webhook_test.apply(args=send.call_args.kwargs["args"])
    assert len(receiver.received) == 2
    team.refresh_from_db()
    assert ": failed: HTTP 503" in team.webhook_last_delivery


def test_a_test_ping_without_a_webhook_says_to_set_one() -> None:
    client = signed_in(member_of(TeamFactory(), "nina"))
    with mock.patch("submissions.webhooks.current_app.send_task") as send:
        page = client.post("/team/", {"webhook_test": "1"}).content.decode()
    assert "save a webhook URL first, then test it" in page and not send.called
