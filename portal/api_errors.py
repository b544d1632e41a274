"""One mapping from domain errors to HTTP (each DomainError's `http_status`: 400 for a bad
upload, 429 for quota, ...); and a JSON 404 for any /api/ address no route matches (clients
parse errors as JSON, not HTML)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from portal.errors import DomainError


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, DomainError):
        return Response({"detail": str(exc)}, status=exc.http_status)
    return drf_exception_handler(exc, context)


@csrf_exempt  # it changes nothing; an unknown address is a 404 whatever the method
def api_not_found(request: HttpRequest, path: str = "") -> JsonResponse:
    return JsonResponse({"detail": "Not found."}, status=status.HTTP_404_NOT_FOUND)
