"""The request type of pages that read django-htmx's request details (its middleware, in
every request's path, sets `request.htmx`)."""

from __future__ import annotations

from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails


class HtmxRequest(HttpRequest):
    htmx: HtmxDetails
