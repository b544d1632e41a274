"""Browser tests: Playwright driving the system's Chromium against pytest-django's live server.

The browser is Debian's Chromium (`apt-get install -y chromium`), never one Playwright
downloads. A missing Chromium fails these tests with the fix in the message: a skipped
browser test would let CI pass without ever running a page.

Set ATREX_SCREENSHOTS=1 to write the main pages to docs/screenshots/ (committed; CI leaves
them alone).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connections
from playwright.sync_api import Page, sync_playwright

from tests.paths import REPO

SCREENSHOTS = REPO / "docs" / "screenshots"
# Headless, and nothing that talks to the network on its own (these machines have none).
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
VIEWPORT = {"width": 1440, "height": 800}  # a board's table fits without scrolling


def chromium_path() -> str | None:
    """ATREX_CHROMIUM when set (and only it), else Debian's /usr/bin/chromium or one on PATH."""
    chosen = os.environ.get("ATREX_CHROMIUM")
    candidates = [chosen] if chosen else ["/usr/bin/chromium", shutil.which("chromium"),
                                          shutil.which("chromium-browser")]
    return next((c for c in candidates if c and Path(c).is_file()), None)


@pytest.fixture
def page(live_server: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Page]:
    """A fresh headless Chromium page; the live server's URL is `page.base_url`.

    Playwright's sync API keeps an asyncio loop marked as running in this thread while it
    waits between calls, so Django's async-safety check would refuse every ORM call the test
    makes. Nothing runs concurrently (the loop is parked while the test's code runs; the live
    server has its own thread), so the check is lifted for these tests only, and Playwright
    lives no longer than one test.

    While that loop counts as running, Django keeps this thread's database connections apart
    from the ones it uses outside (asgiref's Local); they are closed before the loop stops,
    or the test database could not be dropped at the end of the session.
    """
    executable = chromium_path()
    if executable is None:
        pytest.fail("Chromium not found: the browser tests need Debian's Chromium "
                    "(`apt-get install -y chromium`, giving /usr/bin/chromium) or ATREX_CHROMIUM "
                    "pointing at a Chromium binary. Do not run `playwright install`.")
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "1")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport=VIEWPORT, base_url=live_server.url)
        context.set_default_timeout(20_000)
        try:
            yield context.new_page()
        finally:
            connections.close_all()
            context.close()
            browser.close()


def screenshot(page: Page, name: str) -> None:
    """docs/screenshots/<name>.png when ATREX_SCREENSHOTS=1; otherwise nothing."""
    if os.environ.get("ATREX_SCREENSHOTS") != "1":
        return
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def sign_in(page: Page, username: str, password: str, next_path: str = "/team/") -> None:
    page.goto(f"/accounts/login/?next={next_path}")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"**{next_path}")


def mark_document(page: Page) -> None:
    """Tag the loaded document; `same_document` tells later whether it was ever reloaded."""
    page.evaluate("window.__atrexDocument = 'kept'")


def same_document(page: Page) -> bool:
    return bool(page.evaluate("window.__atrexDocument === 'kept'"))


def canvas_painted_pixels(page: Page, selector: str) -> int:
    """How many pixels of a canvas are not fully transparent (0 for a blank canvas)."""
    return int(page.eval_on_selector(selector, """canvas => {
        const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
        let painted = 0;
        for (let i = 3; i < data.length; i += 4) if (data[i] !== 0) painted++;
        return painted;
    }"""))
