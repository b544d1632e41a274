"""The client's pieces that need no server: config precedence and privacy, error messages,
bundle paths, folder uploads."""

from __future__ import annotations

import http.server
import io
import socket
import stat
import threading
import zipfile
from pathlib import Path

import pytest

from atrex_cli import client, config
from atrex_cli.main import main, upload_payload
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


class _Failing(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(503)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        self.wfile.write(b"maintenance until 10:00")

    def log_message(self, *args: object) -> None:
        pass


def test_a_failing_server_and_a_silent_one_have_their_own_codes(
        config_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Failing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        assert main(["problems", "--server", url]) == client.EXIT_SERVER
        assert "the portal failed (503): maintenance until 10:00" in capsys.readouterr().err
    finally:
        server.shutdown()
        server.server_close()
    with socket.socket() as silent:  # accepts connections (backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        assert main(["problems", "--server", url, "--http-timeout", "0.5"]) == \
            client.EXIT_UNREACHABLE
    assert "did not answer within" in capsys.readouterr().err
