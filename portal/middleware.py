"""Two answers Django would otherwise give badly: a body too large to read, and a 404 page
that lists every URL pattern while DEBUG is on (the embedded default)."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.defaults import page_not_found

# Room on top of the largest upload for the form's other fields (notes: up to 10,000
# characters), multipart boundaries and an archive's own headers.
BODY_MARGIN_BYTES = 1024 * 1024


def max_body_bytes() -> int:
    """The largest request body the portal reads: the largest upload, plus the margin."""
    return int(settings.ATREX_UPLOAD_MAX_TOTAL_BYTES) + BODY_MARGIN_BYTES


def declared_length(request: HttpRequest) -> int:
    """The body's Content-Length; 0 when absent or not a number, as Django itself reads it."""
    try:
        return max(0, int(request.META.get("CONTENT_LENGTH") or 0))
    except ValueError:
        return 0


class BodySizeLimitMiddleware:
    """413 for a request whose declared body is larger than any upload may be, before any
    of it is read: Django would otherwise spool it to disk and the upload view read it all
    into memory. A body without Content-Length (chunked) is read by Django as empty."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        cap = max_body_bytes()
        if declared_length(request) > cap:
            return too_large(request, cap)
        return self.get_response(request)


def too_large(request: HttpRequest, cap: int) -> HttpResponse:
    message = (f"The request body is larger than {cap} bytes, the most this portal accepts "
               f"(uploads: at most {settings.ATREX_UPLOAD_MAX_TOTAL_BYTES} bytes).")
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": message}, status=413)
    return render(request, "413.html", {"message": message}, status=413)


class PlainNotFoundMiddleware:
    """With DEBUG on, Django answers a 404 with its technical page, which lists every URL
    pattern of the portal to anyone. This answers the plain 404 page instead, as without
    DEBUG. Placed after CommonMiddleware, so a missing slash is still redirected."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        # No resolver match: no URL pattern matched, so the 404 is Django's technical page.
        if settings.DEBUG and response.status_code == 404 and request.resolver_match is None:
            return page_not_found(request, Http404())
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        # A view's Http404 (get_object_or_404) would also get the technical page under DEBUG.
        if settings.DEBUG and isinstance(exception, Http404):
            return page_not_found(request, exception)
        return None
