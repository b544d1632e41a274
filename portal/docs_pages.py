"""The project's documentation (docs/*.md) served by the portal: /docs/ and /docs/<name>/.

Rendered from the repository's own files at request time (they are small) with
markdown-it-py, raw HTML off; links between the docs (`teams.md#x`) become links between
these pages, and the screenshots they show are served from docs/screenshots/. Only files
that exist in docs/ are served: a name is looked up, never joined into a path.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from django.conf import settings
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.safestring import mark_safe
from markdown_it import MarkdownIt

DOCS = Path(settings.BASE_DIR) / "docs"
# Beside docs/, the developers' guide, which docs/index.md links as ../DEVELOPERS.md: served
# as /docs/developers/ (its own links into docs/ become links between these pages too).
EXTRA = {"developers": Path(settings.BASE_DIR) / "DEVELOPERS.md"}
_LINK = re.compile(r'href="(?!https?:|mailto:|#|/)(?:\.\./|docs/)?([A-Za-z0-9_.-]+)\.md(#[^"]*)?"')
_IMAGE = re.compile(r'src="screenshots/([A-Za-z0-9_.-]+\.png)"')
_TITLE = re.compile(r"^#\s+(.+)$", re.MULTILINE)


def _pages() -> dict[str, Path]:
    pages = {path.stem: path for path in sorted(DOCS.glob("*.md"))}
    return {**pages, **{name: path for name, path in EXTRA.items() if path.is_file()}}


@lru_cache(maxsize=64)
def _rendered(path: Path, mtime: float) -> tuple[str, str]:
    text = path.read_text(encoding="utf-8")
    html = MarkdownIt("commonmark", {"html": False}).enable("table").render(text)
    html = _LINK.sub(lambda m: f'href="{_page_url(m.group(1))}{m.group(2) or ""}"', html)
    html = _IMAGE.sub(lambda m: f'src="/docs/screenshots/{m.group(1)}"', html)
    title = _TITLE.search(text)
    return (title.group(1).strip() if title else path.stem), html


def _page_url(stem: str) -> str:
    """Where a linked .md file is served: DEVELOPERS.md is /docs/developers/, index.md /docs/."""
    name = stem.lower() if stem.lower() in EXTRA else stem
    return "/docs/" if name == "index" else f"/docs/{name}/"


def docs_page(request: HttpRequest, name: str = "index") -> HttpResponse:
    pages = _pages()
    path = pages.get(name)
    if path is None:
        raise Http404(f"no page {name!r} in the documentation")
    title, html = _rendered(path, path.stat().st_mtime)
    return render(request, "docs_page.html", {
        "title": title, "body": mark_safe(html),  # noqa: S308 - markdown-it with html off
        "pages": [(stem, stem.replace("-", " ")) for stem in pages], "current": name})


def docs_screenshot(request: HttpRequest, name: str) -> FileResponse:
    path = DOCS / "screenshots" / name
    if "/" in name or not name.endswith(".png") or not path.is_file() or \
            path.resolve().parent != (DOCS / "screenshots").resolve():
        raise Http404("no such screenshot")
    return FileResponse(path.open("rb"), content_type="image/png")
