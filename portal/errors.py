"""The one base of the portal's domain errors: a request refused for a reason its sender can
fix, with a message that says which and how. Services raise them; the API answers each with
its `http_status` (portal/api_errors.py), pages show the message beside the form.

Imports nothing of Django, so that pure modules (scoring, upload parsing) can raise them.
"""

from __future__ import annotations


class DomainError(Exception):
    """Refused input: HTTP 400 unless a subclass says otherwise."""

    http_status = 400
