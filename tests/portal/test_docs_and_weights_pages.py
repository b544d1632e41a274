"""The documentation served from docs/, the public weights page, and the admin's new-weights
form starting from the active values."""

from __future__ import annotations

import pytest
from django.test import Client

from leaderboard.services import weight_set_create, weight_set_from_release
from tests.factories import UserFactory
from tests.world import import_fixture_release

pytestmark = pytest.mark.django_db


def test_every_doc_is_served_with_links_between_them_rewritten() -> None:
    page = Client().get("/docs/teams/").content.decode()
    assert "<h1>For teams: submitting kernels and reading the results</h1>" in page
    assert 'href="/docs/integrity-gpu/"' in page  # was integrity-gpu.md
    assert ".md\"" not in page
    index = Client().get("/docs/").content.decode()
    assert 'src="/docs/screenshots/sign-in.png"' in index
    shot = Client().get("/docs/screenshots/sign-in.png")
    assert shot.status_code == 200 and shot["Content-Type"] == "image/png"


@pytest.mark.parametrize("path", ["/docs/nope/", "/docs/screenshots/..%2Fteams.md",
                                  "/docs/screenshots/teams.md", "/docs/screenshots/nope.png"])
def test_only_files_of_docs_are_served(path: str) -> None:
    assert Client().get(path).status_code == 404


def test_raw_html_in_a_doc_is_not_passed_through(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from portal import docs_pages

    (tmp_path / "evil.md").write_text("# Evil\n\n<script>alert(1)</script>\n")
    monkeypatch.setattr(docs_pages, "DOCS", tmp_path)
    page = Client().get("/docs/evil/").content.decode()
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;" in page


def test_the_public_weights_page_shows_every_versions_values() -> None:
    release = import_fixture_release()
    weight_set_from_release(release)
    weight_set_create(release=release, weights={"rms_norm": 1, "gemm_fp16": 3}, source="manual",
                      note="gemm heavy")
    page = Client().get(f"/releases/{release.pk}/weights/").content.decode()
    assert "v1 (active)" in page and "v2" in page
    row = page[page.index('data-operator="gemm_fp16"'):].split("</tr>")[0]
    assert "0.3000" in row and "0.7500" in row  # v1's normalised value, then v2's


def test_the_admins_new_weights_form_starts_from_the_active_values() -> None:
    release = import_fixture_release()
    weight_set_from_release(release)
    client = Client()
    client.force_login(UserFactory(is_staff=True))
    page = client.get(f"/staff/releases/{release.pk}/weights/").content.decode()
    assert 'name="w_gemm_fp16" inputmode="decimal" size="8" value="0.3"' in page
    assert f'href="/releases/{release.pk}/weights/"' in page


def test_every_page_names_its_icon_so_browsers_do_not_ask_for_favicon_ico() -> None:
    page = Client().get("/docs/").content.decode()
    assert '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">' in page
    assert 'href="/docs/"' in page  # the header's Docs link


def test_a_refused_webhook_address_says_how_a_test_deployment_allows_it() -> None:
    from submissions.webhooks import WebhookRejected, check_webhook_url

    with pytest.raises(WebhookRejected, match="ATREX_WEBHOOK_ALLOW_PRIVATE=1"):
        check_webhook_url("http://127.0.0.1/hook")


def test_the_developers_guide_the_index_links_is_served_too() -> None:
    index = Client().get("/docs/").content.decode()
    assert 'href="/docs/developers/"' in index and 'href="../DEVELOPERS.md"' not in index
    guide = Client().get("/docs/developers/")
    assert guide.status_code == 200
    text = guide.content.decode()
    assert "<h1>Developing the Atrex Portal</h1>" in text
    assert 'href="/docs/"' in text  # its link back to docs/index.md
    operations = Client().get("/docs/operations/").content.decode()
    assert 'href="/docs/developers/#environment-variables"' in operations
