"""The client's pieces that need no portal: config precedence and privacy, error messages,
bundle paths, folder uploads, and what a stand-in server receives and answers."""

from __future__ import annotations

import email.message
import http.server
import io
import json
import socket
import stat
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadhandler import MemoryFileUploadHandler
from django.http.multipartparser import MultiPartParser

from atrex_cli import client, config
from atrex_cli.main import _not_ranked_because, main, upload_payload
from atrex_cli.portal import _safe_member


@pytest.fixture
def config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "atrex" / "config.toml"
    monkeypatch.setenv("ATREX_CONFIG", str(path))
    monkeypatch.delenv("ATREX_TOKEN", raising=False)
    monkeypatch.delenv("ATREX_SERVER", raising=False)
    return path


def test_the_config_file_is_private_even_when_it_existed_before(config_file: Path) -> None:
    config_file.parent.mkdir()
    config_file.write_text('token = "old"\n')
    config_file.chmod(0o644)
    config.write_config(config_file, {"server": "https://portal.example", "token": 'atx_"q'})
    assert stat.S_IMODE(config_file.stat().st_mode) == 0o600
    assert config.read_config_file(config_file) == {"server": "https://portal.example",
                                                    "token": 'atx_"q'}


def test_flags_beat_the_environment_which_beats_the_file(config_file: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    config.write_config(config_file, {"server": "http://file:1/", "token": "atx_file"})
    assert config.resolve(None) == config.ClientConfig("http://file:1", "atx_file",
                                                       str(config_file))
    monkeypatch.setenv("ATREX_SERVER", "http://env:2")
    monkeypatch.setenv("ATREX_TOKEN", "atx_env")
    assert config.resolve(None) == config.ClientConfig("http://env:2", "atx_env", "ATREX_TOKEN")
    assert config.resolve("http://flag:3").server == "http://flag:3"


def test_an_unreadable_config_file_is_named(config_file: Path) -> None:
    config_file.parent.mkdir()
    config_file.write_text("token = \n")
    with pytest.raises(config.ConfigError, match=str(config_file)):
        config.resolve(None)


def test_without_any_setting_the_local_portal_is_used(config_file: Path) -> None:
    assert config.resolve(None) == config.ClientConfig(config.DEFAULT_SERVER, None, "")


def test_the_portals_validation_messages_are_flattened() -> None:
    body = b'{"release": ["A valid integer is required."], "file": ["No file was submitted."]}'
    assert client._message(body, "application/json") == (
        "release: A valid integer is required.; file: No file was submitted.")
    assert client._message(b'{"detail": "daily quota used"}', "application/json") == \
        "daily quota used"
    assert client._message(b"<html>404</html>", "text/html") == ""


@pytest.mark.parametrize("name", ["/etc/passwd", "../x.py", "a/../../x.py", "a\\b.py"])
def test_unsafe_bundle_paths_are_refused(name: str) -> None:
    with pytest.raises(client.ServerError):
        _safe_member(name)


def test_a_folder_is_uploaded_as_a_zip_of_its_top_level_operator_files(tmp_path: Path) -> None:
    (tmp_path / "rms_norm.py").write_text("class Model: pass\n")
    (tmp_path / "notes.txt").write_text("not a kernel")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "gemm_fp16.py").write_text("class Model: pass\n")
    name, data = upload_payload(tmp_path)
    assert name.endswith(".zip")
    assert zipfile.ZipFile(io.BytesIO(data)).namelist() == ["rms_norm.py"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(client.CliError, match="holds no <operator>.py files"):
        upload_payload(tmp_path / "empty")
    with pytest.raises(client.CliError, match="no such file or folder"):
        upload_payload(tmp_path / "missing")


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    headers: email.message.Message
    body: bytes


@contextmanager
def stand_in(answer: Answer) -> Iterator[tuple[str, list[Received]]]:
    """A server on a free port that records each request and gives every one `answer`."""
    received: list[Received] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.answer()

        def do_POST(self) -> None:
            self.answer()

        def answer(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            received.append(Received(self.command, self.path, self.headers, body))
            self.send_response(answer.status)
            self.send_header("Content-Type", answer.content_type)
            self.send_header("Content-Length", str(len(answer.body)))
            for name, value in answer.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(answer.body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()


def parsed_upload(request: Received) -> tuple[dict[str, str], str, bytes]:
    """The form fields, file name and file bytes, as the portal's parser (Django's) reads them."""
    meta = {"CONTENT_TYPE": request.headers["Content-Type"],
            "CONTENT_LENGTH": str(len(request.body))}
    fields, files = MultiPartParser(meta, io.BytesIO(request.body),
                                    [MemoryFileUploadHandler()]).parse()
    upload = files["file"]
    return {name: fields[name] for name in fields}, upload.name, upload.read()


def test_an_upload_arrives_with_its_fields_file_and_token_intact() -> None:
    # Bytes a hand-built body gets wrong: line breaks, a boundary-like line, non-UTF-8; more
    # than one 64 KiB chunk so the progress moves in steps.
    content = b"--atrex-x\r\n\x00\xff\r\n" * 20_000
    fields = {"release": "7", "hardware": "H200", "agent": "", "notes": "naïve – 2×"}
    progress: list[tuple[int, int]] = []
    created = json.dumps({"id": 12}).encode()
    with stand_in(Answer(201, created)) as (url, received):
        answer = client.Api(url, "atx_secret").post_multipart(
            "/api/submissions/", fields, "rms_norm.py", content,
            lambda done, total: progress.append((done, total)))
    assert answer == {"id": 12}
    [request] = received
    assert (request.method, request.path) == ("POST", "/api/submissions/")
    assert request.headers["Authorization"] == "Bearer atx_secret"
    assert request.headers["Accept"] == "application/json"
    assert request.headers["User-Agent"] == "atrex-cli"
    assert parsed_upload(request) == (fields, "rms_norm.py", content)
    assert progress[-1] == (len(content), len(content))
    steps = [done for done, _ in progress]
    assert steps == sorted(steps) and len(set(steps)) > 2


def test_public_reads_send_no_token_and_keep_their_query() -> None:
    with stand_in(Answer(200, b"[]")) as (url, received):
        assert client.Api(url, "atx_secret").get_json("/api/releases/", {"q": "a b&c"}) == []
    [request] = received
    assert request.path == "/api/releases/?q=a+b%26c"
    assert "Authorization" not in request.headers


def test_a_redirect_is_followed_but_the_token_stays_with_its_origin() -> None:
    with stand_in(Answer(200, b'{"team": "Red"}')) as (elsewhere, received):
        moved = Answer(302, headers={"Location": f"{elsewhere}/api/quota/"})
        with stand_in(moved) as (url, asked):
            assert client.Api(url, "atx_secret").get_json("/api/quota/", team=True) == \
                {"team": "Red"}
    assert asked[0].headers["Authorization"] == "Bearer atx_secret"
    [request] = received
    assert request.path == "/api/quota/" and "Authorization" not in request.headers


@pytest.mark.parametrize(("answer", "code", "message"), [
    (Answer(401, b'{"detail": "Invalid token."}'), client.EXIT_AUTH,
     "authentication failed: Invalid token."),
    (Answer(403, b'{"detail": "Not a member."}'), client.EXIT_AUTH, "not allowed: Not a member."),
    (Answer(404, b"<html>gone</html>", "text/html"), client.EXIT_NOT_FOUND,
     "not found: http://127.0.0.1:"),
    (Answer(400, b'{"hardware": ["Unknown."]}'), client.EXIT_REJECTED,
     "rejected by the portal (400): hardware: Unknown."),
    (Answer(429, b'{"detail": "Slow down."}', headers={"Retry-After": "42"}), client.EXIT_QUOTA,
     "quota or rate limit reached: Slow down. (retry after 42 s)"),
    (Answer(502, b"<html>bad gateway</html>", "text/html"), client.EXIT_SERVER,
     "the portal failed (502): server error"),
    (Answer(200, b"<html>a web page</html>", "text/html"), client.EXIT_SERVER,
     "the server's answer is not JSON"),
], ids=["401", "403", "404", "400", "429", "502", "not-json"])
def test_each_kind_of_answer_has_its_exit_code_and_message(
        config_file: Path, capsys: pytest.CaptureFixture[str], answer: Answer, code: int,
        message: str) -> None:
    with stand_in(answer) as (url, _):
        assert main(["problems", "--server", url]) == code
    assert message in capsys.readouterr().err


def test_a_failing_server_and_a_silent_one_have_their_own_codes(
        config_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with stand_in(Answer(503, b"maintenance until 10:00", "text/plain")) as (url, _):
        assert main(["problems", "--server", url]) == client.EXIT_SERVER
    assert "the portal failed (503): maintenance until 10:00" in capsys.readouterr().err
    with socket.socket() as silent:  # accepts connections (backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        assert main(["problems", "--server", url, "--http-timeout", "0.5"]) == \
            client.EXIT_UNREACHABLE
    assert "did not answer within" in capsys.readouterr().err


def test_a_server_that_hangs_up_without_answering_is_unreachable(
        config_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as rude:
        rude.bind(("127.0.0.1", 0))
        rude.listen()
        hang_up = threading.Thread(target=lambda: rude.accept()[0].close(), daemon=True)
        hang_up.start()
        url = f"http://127.0.0.1:{rude.getsockname()[1]}"
        assert main(["problems", "--server", url]) == client.EXIT_UNREACHABLE
        hang_up.join()
    assert f"the connection to {url} failed" in capsys.readouterr().err


@pytest.mark.parametrize("server", ["http://no-such-host.invalid", "portal.example:8000"])
def test_an_unknown_host_or_a_url_without_scheme_is_unreachable(
        config_file: Path, capsys: pytest.CaptureFixture[str], server: str) -> None:
    assert main(["problems", "--server", server]) == client.EXIT_UNREACHABLE
    assert f"cannot reach the portal at {server}" in capsys.readouterr().err


@pytest.mark.parametrize(("detail", "why"), [
    ({"mode": "check"}, "never ranked (check mode)"),
    ({"mode": "ranked", "outcome": {"interpreter": True}}, "interpreter check: no GPU time"),
    ({"mode": "ranked", "score": {"complete": False}}, "until every job has ended"),
    ({"mode": "ranked", "outcome": {}, "score": {"complete": True}}, "under review"),
])
def test_a_score_not_ranked_says_why_as_its_page_does(detail: dict[str, Any], why: str) -> None:
    assert why in _not_ranked_because(detail)
