"""The portal's REST API over the standard library's HTTP client, with one error type per
kind of failure a script may want to tell apart (each has its own exit code)."""

from __future__ import annotations

import http.client
import io
import json
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable
from typing import Any

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


ProgressCallback = Callable[[int, int], None]  # (bytes sent, total bytes)


class _ProgressReader(io.BytesIO):
    """A request body that reports how much of it http.client has read (sent) so far."""

    def __init__(self, data: bytes, progress: ProgressCallback | None) -> None:
        super().__init__(data)
        self._total = len(data)
        self._progress = progress

    def read(self, size: int | None = -1) -> bytes:
        chunk = super().read(size)
        if self._progress is not None:
            self._progress(self.tell(), self._total)
        return chunk


def multipart_body(fields: dict[str, str], file_field: str, filename: str,
                   content: bytes) -> tuple[bytes, str]:
    """A multipart/form-data body and its Content-Type header."""
    boundary = f"atrex-{uuid.uuid4().hex}"
    parts = []
    for name, value in fields.items():
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'
                     f"{value}\r\n".encode())
    quoted = filename.replace('"', "%22").replace("\r", "").replace("\n", "")
    parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{file_field}"; '
                 f'filename="{quoted}"\r\nContent-Type: application/octet-stream\r\n\r\n'.encode())
    parts.append(content)
    parts.append(f"\r\n--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


class Api:
    """One portal. The token is sent only to the endpoints that need a team."""

    def __init__(self, server: str, token: str | None, timeout_s: float = 30.0) -> None:
        self.server = server.rstrip("/")
        self.token = token
        self.timeout_s = timeout_s

    def url(self, path: str, params: dict[str, str] | None = None) -> str:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        return f"{self.server}{path}{query}"

    def get_json(self, path: str, params: dict[str, str] | None = None,
                 team: bool = False) -> Any:
        return _json(self.get_bytes(path, params, team), path)

    def get_bytes(self, path: str, params: dict[str, str] | None = None,
                  team: bool = False) -> bytes:
        request = urllib.request.Request(self.url(path, params), headers=self._headers(team))
        return self._send(request)

    def post_multipart(self, path: str, fields: dict[str, str], filename: str, content: bytes,
                       progress: ProgressCallback | None = None) -> Any:
        body, content_type = multipart_body(fields, "file", filename, content)
        headers = {**self._headers(team=True), "Content-Type": content_type,
                   "Content-Length": str(len(body))}
        request = urllib.request.Request(self.url(path), method="POST", headers=headers,
                                         data=_ProgressReader(body, progress))
        return _json(self._send(request), path)

    def _headers(self, team: bool) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": "atrex-cli"}
        if team:
            if not self.token:
                raise AuthError("no team token: run `atrex login` or set ATREX_TOKEN "
                                "(create a token on the portal's team page)")
            headers["Authorization"] = f"Bearer {self.token}"
        return headers

    def _send(self, request: urllib.request.Request) -> bytes:
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                data: bytes = response.read()
                return data
        except urllib.error.HTTPError as exc:
            raise _http_error(exc, request.full_url) from None
        except urllib.error.URLError as exc:
            raise Unreachable(f"cannot reach the portal at {self.server}: {exc.reason} "
                              "(check --server / ATREX_SERVER)") from None
        except TimeoutError:
            raise Unreachable(f"the portal at {self.server} did not answer within "
                              f"{self.timeout_s:.0f} s") from None
        except (ConnectionError, http.client.HTTPException) as exc:
            raise Unreachable(f"the connection to {self.server} failed: {exc}") from None


def _json(data: bytes, path: str) -> Any:
    try:
        return json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ServerError(f"{path}: the server's answer is not JSON "
                          f"({data[:80]!r}); is --server a portal?") from None


def _http_error(exc: urllib.error.HTTPError, url: str) -> CliError:
    message = _message(exc.read(), exc.headers.get("Content-Type", ""))
    code = exc.code
    if code == 401:
        return AuthError(f"authentication failed: {message or 'invalid or revoked token'} "
                         "(run `atrex login` with a valid team token)")
    if code == 403:
        return AuthError(f"not allowed: {message or 'forbidden'}")
    if code == 404:
        return NotFound(f"not found: {message or url}")
    if code == 429:
        retry = exc.headers.get("Retry-After")
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
