"""The portal's REST API over httpx, with one error type per kind of failure a script may
want to tell apart (each has its own exit code)."""

from __future__ import annotations

import io
import json
import ssl
import urllib.parse
from collections.abc import Callable
from typing import Any

import httpx

# Exit codes (docs/cli.md lists them; scripts depend on them: never renumber).
EXIT_OK = 0
EXIT_USAGE = 2  # bad arguments, a missing local file, a broken local release
EXIT_AUTH = 3  # no token, an invalid or revoked token (401), not allowed (403)
EXIT_NOT_FOUND = 4  # no such release, operator, hardware or submission (404)
EXIT_REJECTED = 5  # the portal refused the request as invalid (400): its message is printed
EXIT_QUOTA = 6  # quota used up or rate limited (429)
EXIT_UNREACHABLE = 7  # connection refused, unknown host, timed out
EXIT_SERVER = 8  # the server failed (5xx) or answered something this client cannot read
EXIT_EVALUATION_FAILED = 9  # submit --wait, status: ended with no shape correct (outcome
#                              "failed"); evaluate-local: a shape not correct and native
EXIT_WAIT_TIMEOUT = 10  # --wait gave up after --wait-timeout seconds
EXIT_HARNESS = 11  # evaluate-local: the harness itself failed
EXIT_NOT_EVALUATED = 12  # submit --wait, status: ended before any shape was evaluated
#                          (outcome "cancelled", or "lost" to an infrastructure failure)
EXIT_NOT_STRICT = 13  # --strict: the evaluation ended with a shape not correct and native

# What each exit code is, as the JSON on stdout names it ({"error": {"kind": ...}}).
EXIT_KINDS = {EXIT_OK: "ok", EXIT_USAGE: "usage", EXIT_AUTH: "auth",
              EXIT_NOT_FOUND: "not-found", EXIT_REJECTED: "rejected", EXIT_QUOTA: "quota",
              EXIT_UNREACHABLE: "unreachable", EXIT_SERVER: "server",
              EXIT_EVALUATION_FAILED: "evaluation-failed", EXIT_WAIT_TIMEOUT: "wait-timeout",
              EXIT_HARNESS: "harness", EXIT_NOT_EVALUATED: "not-evaluated",
              EXIT_NOT_STRICT: "not-strict", 130: "interrupted"}


class CliError(Exception):
    """A failure reported to the user as one message and an exit code."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class AuthError(CliError):
    exit_code = EXIT_AUTH


class NotFound(CliError):
    exit_code = EXIT_NOT_FOUND


class Rejected(CliError):
    exit_code = EXIT_REJECTED


class QuotaError(CliError):
    exit_code = EXIT_QUOTA


class Unreachable(CliError):
    exit_code = EXIT_UNREACHABLE


class ServerError(CliError):
    exit_code = EXIT_SERVER


ProgressCallback = Callable[[int, int], None]  # (bytes of the file sent, its size)


class _ProgressReader(io.BytesIO):
    """The uploaded file, reporting how much of it httpx has read into the request body
    (and so sent: it writes each chunk before it reads the next)."""

    def __init__(self, data: bytes, progress: ProgressCallback | None) -> None:
        super().__init__(data)
        self._total = len(data)
        self._progress = progress

    def read(self, size: int | None = -1) -> bytes:
        chunk = super().read(size)
        if self._progress is not None:
            self._progress(self.tell(), self._total)
        return chunk


class Api:
    """One portal. The token is sent only to the endpoints that need a team."""

    def __init__(self, server: str, token: str | None, timeout_s: float = 30.0) -> None:
        self.server = server.rstrip("/")
        self.token = token
        self.timeout_s = timeout_s
        # The system's certificate store, as the standard library's client trusted: a portal
        # behind an organisation's own CA keeps working (httpx alone trusts certifi's bundle).
        self._tls = ssl.create_default_context()

    def url(self, path: str, params: dict[str, str] | None = None) -> str:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        return f"{self.server}{path}{query}"

    def get_json(self, path: str, params: dict[str, str] | None = None,
                 team: bool = False) -> Any:
        return _json(self.get_bytes(path, params, team), path)

    def get_bytes(self, path: str, params: dict[str, str] | None = None,
                  team: bool = False) -> bytes:
        return self._send("GET", self.url(path, params), self._headers(team))

    def post_multipart(self, path: str, fields: dict[str, str], filename: str, content: bytes,
                       progress: ProgressCallback | None = None,
                       headers: dict[str, str] | None = None) -> Any:
        # A file object, not the bytes: httpx reads it in chunks, so the progress moves.
        upload = (filename, _ProgressReader(content, progress), "application/octet-stream")
        data = self._send("POST", self.url(path), {**self._headers(team=True), **(headers or {})},
                          fields, {"file": upload})
        return _json(data, path)

    def post_form(self, path: str, fields: dict[str, str] | None = None) -> Any:
        """A team's form POST (application/x-www-form-urlencoded), its JSON answer."""
        return _json(self._send("POST", self.url(path), self._headers(team=True), fields or {}),
                     path)

    def _headers(self, team: bool) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": "atrex-cli"}
        if team:
            if not self.token:
                raise AuthError("no team token: run `atrex login` or set ATREX_TOKEN "
                                "(create a token on the portal's team page)")
            headers["Authorization"] = f"Bearer {self.token}"
        return headers

    def _send(self, method: str, url: str, headers: dict[str, str],
              fields: dict[str, str] | None = None,
              files: dict[str, tuple[str, io.BytesIO, str]] | None = None) -> bytes:
        # A connection per request, as urllib made: no pool to close when a command ends.
        # urllib followed redirects (http -> https, a moved portal); httpx does when asked.
        try:
            with httpx.Client(timeout=self.timeout_s, verify=self._tls,
                              follow_redirects=True) as http:
                response = http.request(method, url, headers=headers, data=fields, files=files)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.UnsupportedProtocol,
                httpx.ProxyError, httpx.InvalidURL) as exc:
            raise Unreachable(f"cannot reach the portal at {self.server}: {exc} "
                              "(check --server / ATREX_SERVER)") from None
        except httpx.TimeoutException:
            raise Unreachable(f"the portal at {self.server} did not answer within "
                              f"{self.timeout_s:.0f} s") from None
        except httpx.TransportError as exc:  # reset, closed mid-answer, not HTTP at all
            raise Unreachable(f"the connection to {self.server} failed: {exc}") from None
        except (httpx.TooManyRedirects, httpx.DecodingError) as exc:
            raise ServerError(f"{url}: the portal's answer cannot be read: {exc}") from None
        if not response.is_success:
            raise _http_error(response, url)
        return response.content


def _json(data: bytes, path: str) -> Any:
    try:
        return json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ServerError(f"{path}: the server's answer is not JSON "
                          f"({data[:80]!r}); is --server a portal?") from None


def _http_error(response: httpx.Response, url: str) -> CliError:
    message = _message(response.content, response.headers.get("Content-Type", ""))
    code = response.status_code
    if code == 401:
        return AuthError(f"authentication failed: {message or 'invalid or revoked token'} "
                         "(run `atrex login` with a valid team token)")
    if code == 403:
        return AuthError(f"not allowed: {message or 'forbidden'}")
    if code == 404:
        return NotFound(f"not found: {message or url}")
    if code == 429:
        retry = response.headers.get("Retry-After")
        hint = f" (retry after {retry} s)" if retry else ""
        return QuotaError(f"quota or rate limit reached: {message or 'too many requests'}{hint}")
    if 400 <= code < 500:
        return Rejected(f"rejected by the portal ({code}): {message or 'bad request'}")
    return ServerError(f"the portal failed ({code}): {message or 'server error'}")


def _message(body: bytes, content_type: str) -> str:
    """The portal's own words: DRF's {"detail": ...} or {"field": ["..."]}, or plain text."""
    text = body.decode("utf-8", errors="replace").strip()
    if "json" in content_type:
        try:
            doc = json.loads(text)
        except json.JSONDecodeError:
            return text[:500]
        return _flatten(doc)
    if "html" in content_type:
        return ""  # Django's error pages say nothing a terminal should show
    return text[:500]


def _flatten(doc: Any, field: str = "") -> str:
    if isinstance(doc, dict):
        if set(doc) == {"detail"}:
            return _flatten(doc["detail"], field)
        return "; ".join(_flatten(value, key if key != "non_field_errors" else field)
                         for key, value in doc.items())
    if isinstance(doc, list):
        return "; ".join(_flatten(item, field) for item in doc)
    return f"{field}: {doc}" if field else str(doc)
