"""Hidden release files never reach a team: a crawler over every page and API response that
the owning team, another team and an anonymous visitor can reach from the portal's front
doors, links and API URLs followed, bundles unpacked.

What is hidden (shared/BENCHMARK-FORMAT.md): metadata.json (provenance, production timings)
and roofline.json (semantic work and traffic per shape), and the release's hidden shape tier
(hidden_shapes.json: ids, calls, and what a candidate's error on one could print). Derived
figures (SOL, attainment) are public; the files' own words and keys are not. The portal's
boards hold the fixture's recorded H200 results (leaderboard/demo.py), so every kind of page
has rows to show, and the owning team has a submission whose jobs ran hidden shapes: one
passed, one failed with an error naming it, and one job failed while a hidden shape ran.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from collections import deque
from pathlib import Path
from typing import Any
from unittest import mock
from urllib.parse import urljoin, urlsplit

import pytest
from django.test import Client

from evaluation.catalog.importing import release_import
from evaluation.catalog.models import HardwareProfile, Release
from leaderboard.demo import load_recorded_results
from leaderboard.services import rescore_submission, weight_set_from_release
from submissions.models import EvaluationJob, Submission
from submissions.services import submission_create
from tests.factories import TeamFactory, member_of
from tests.hidden_tier import (
    HIDDEN_DEV,
    HIDDEN_WORDS,
    hidden_tier_release,
    report_job,
    shape_report,
    without_hold,
)
from tests.paths import FIXTURE_RELEASE, SAMPLE_CANDIDATES

pytestmark = pytest.mark.django_db

MAX_PAGES = 600
VARIANTS_PER_PATH = 4  # query strings followed per path (boards link many filters and formats)
# Followed by no crawler: staff pages (their own test), sign-out, admin.
SKIPPED = re.compile(r"^/(staff|admin|accounts/logout)/|^/static/|\.(png|svg|css|js|ico)$")
LINK = re.compile(r"""(?:href|src|hx-get)=["']([^"'#]+)""")
API_URL = re.compile(r'"(/api/[^"\s]+)"')


def hidden_words() -> set[str]:
    """The fixture's hidden files' own words: metadata ids, provenance, shape descriptions and
    origins, the roofline files' keys, and the hidden tier's ids and sizes."""
    words = {"semantic_W_flops", "semantic_Q_bytes", *HIDDEN_WORDS}
    for directory in (FIXTURE_RELEASE / "data").iterdir():
        metadata = directory / "metadata.json"
        if not metadata.exists():
            continue
        doc = json.loads(metadata.read_text())
        words.add(doc["id"])
        origin = doc.get("origin") or {}
        words |= {str(origin[k]) for k in ("module",) if origin.get(k)}
        for entry in (doc.get("shapes") or {}).values():
            words |= {str(entry[k]) for k in ("description", "origin_kernel") if entry.get(k)}
    return {w for w in words if len(w) >= 6}


@pytest.fixture
def portal(tmp_path: Path, settings: Any) -> dict[str, Any]:
    settings.ATREX_SHAPE_FILTER = "dev-*"  # the hidden tier's dev-sized shape is evaluated
    release = without_hold(release_import(path=hidden_tier_release(tmp_path)).release)
    weight_set_from_release(release)
    load_recorded_results(release)
    owner = Submission.objects.filter(release=release).order_by("pk").first()
    assert owner is not None
    hidden = hidden_tier_submission(release, owner.team)
    return {"release": release.pk, "submission": owner.pk, "hidden_submission": hidden,
            "member": member_of(owner.team, "owner-of-a-recorded-run"),
            "other": member_of(TeamFactory(name="Elsewhere"), "someone-else")}


def hidden_tier_submission(release: Release, team: Any) -> int:
    """The team's ranked rms_norm twice (jobs with the hidden tier): one passed its hidden
    shape, one's candidate failed there with an error naming it and then its job failed."""
    hardware = HardwareProfile.objects.get(name="H200")
    source = (SAMPLE_CANDIDATES / "rms_norm" / "triton_native.py").read_bytes()
    ids = []
    for failing in (False, True):
        submission = submission_create(team=team, user=None, release=release,
                                       hardware=hardware, filename="rms_norm.py", data=source)
        job = submission.candidates.get().job
        EvaluationJob.objects.filter(pk=job.pk).update(attempts=1)
        job.refresh_from_db()
        assert job.hidden_shape_ids == [HIDDEN_DEV]
        hidden = shape_report(HIDDEN_DEV, error=f"RuntimeError: torch.Size([5, 328]) in "
                              f"{HIDDEN_DEV}") if failing else shape_report(HIDDEN_DEV,
                                                                            median_s=2e-6)
        with mock.patch("submissions.jobs.current_app.send_task"):
            report_job(job, [shape_report("dev-t4-h256", median_s=2e-6),
                             shape_report("dev-t3-h200", median_s=2e-6), hidden],
                       failed=f"died in {HIDDEN_DEV}" if failing else None)
        rescore_submission(submission)
        ids.append(submission.pk)
    return ids[0]


def crawl(client: Client, starts: list[str]) -> dict[str, bytes]:
    """Every same-site page reachable from `starts`: its URL and body (bundles unpacked)."""
    seen: dict[str, bytes] = {}
    variants: dict[str, int] = {}
    queue = deque(starts)
    while queue and len(seen) < MAX_PAGES:
        url = queue.popleft()
        path = urlsplit(url).path
        if url in seen or SKIPPED.search(path) or urlsplit(url).netloc \
                or variants.get(path, 0) >= VARIANTS_PER_PATH:
            continue
        variants[path] = variants.get(path, 0) + 1
        response = client.get(url)
        if response.status_code != 200 or response.streaming:
            seen[url] = b""
            continue
        body = response.content
        seen[url] = body + unpacked(response)
        text = body.decode("utf-8", "replace")
        for found in (*LINK.findall(text), *API_URL.findall(text)):
            target = urljoin(url, found.replace("&amp;", "&"))
            if target not in seen:
                queue.append(target)
    return seen


def unpacked(response: Any) -> bytes:
    if response.get("Content-Type", "").startswith("application/zip"):
        with zipfile.ZipFile(io.BytesIO(response.content)) as archive:
            return b"".join(archive.read(name) for name in archive.namelist())
    return b""


@pytest.mark.parametrize("role", ["anonymous", "member", "other"])
def test_no_page_or_response_a_team_can_reach_holds_a_hidden_files_words(
        role: str, portal: dict[str, Any]) -> None:
    client = Client()
    if role != "anonymous":
        client.force_login(portal[role])
    release, submission = portal["release"], portal["submission"]
    starts = ["/", "/boards/", f"/releases/{release}/", f"/boards/{release}/H200/",
              f"/submissions/{submission}/", f"/api/submissions/{submission}/",
              f"/api/submissions/{submission}/profile/", f"/api/submissions/{submission}/charts/",
              f"/api/releases/{release}/operators/", f"/api/releases/{release}/bundle/",
              "/api/releases/", "/api/submissions/", "/team/", "/docs/",
              f"/submissions/{portal['hidden_submission']}/",
              f"/api/submissions/{portal['hidden_submission']}/"]
    pages = crawl(client, starts)
    reached = [url for url, body in pages.items() if body]
    assert len(reached) >= 25, reached  # the crawl got past the front doors
    for expected in (f"/releases/{release}/rms_norm/", f"/boards/{release}/H200/operators/",
                     f"/api/releases/{release}/bundle/", "/docs/teams/"):
        assert any(url.startswith(expected) for url in reached), (expected, reached)
    if role == "member":  # the owner sees its own submission, its results and profile
        assert any(url.startswith(f"/submissions/{submission}/") for url in reached), reached
        assert f"/api/submissions/{submission}/profile/" in reached, reached
        # and its hidden-tier submissions, whose pages say how many shapes are hidden
        page = pages[f"/submissions/{portal['hidden_submission']}/"].decode()
        assert "Hidden shapes: 1 of 1 evaluated, 1 passed" in page, page
        assert sum(b"failed while it ran the release" in body for body in pages.values())
    words = hidden_words()
    assert len(words) >= 10 and set(HIDDEN_WORDS) <= words, words
    leaks = [f"{url}: {word!r}" for url, body in pages.items()
             for word in words if word.encode() in body]
    assert not leaks, "\n".join(leaks[:20])
