"""scripts/install-browser, which `make setup`, `make test` and .ci/run use: the browser tests'
Chromium is installed on a fresh machine when it is missing, or the command to run is named.

apt-get and `id` are stand-ins here (scripts on PATH), so nothing is installed for real.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.paths import REPO

SCRIPT = REPO / "scripts" / "install-browser"
# Installs "chromium" by creating the browser file the test names; logs each call.
FAKE_APT_GET = """#!/bin/sh
echo "$*" >> "{log}"
if [ "$1" = install ]; then
  [ -f "{updated}" ] || {{ [ "{needs_update}" = 1 ] && exit 100; }}
  printf '#!/bin/sh\\n' > "{browser}" && chmod +x "{browser}"
fi
[ "$1" = update ] && touch "{updated}"
exit 0
"""


def run(tmp_path: Path, *args: str, uid: int = 0, needs_update: bool = False,
        apt_fails: bool = False,
        env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """The script with a fake `id -u` and apt-get; what it printed and the apt-get calls."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "id").write_text(f"#!/bin/sh\necho {uid}\n")
    log, browser = tmp_path / "apt.log", tmp_path / "usr-bin" / "chromium"
    browser.parent.mkdir(exist_ok=True)
    (bin_dir / "apt-get").write_text(FAKE_APT_GET.format(
        log=log, browser=browser, updated=tmp_path / "updated", needs_update=int(needs_update))
        if not apt_fails else f'#!/bin/sh\necho "$*" >> "{log}"\nexit 1\n')
    for tool in ("id", "apt-get"):
        (bin_dir / tool).chmod(0o755)
    environment = {k: v for k, v in os.environ.items() if k != "ATREX_CHROMIUM"}
    environment.update(PATH=f"{bin_dir}:{environment['PATH']}", **(env or {}))
    done = subprocess.run([str(SCRIPT), *args, str(browser)], capture_output=True, text=True,
                          env=environment, timeout=30)
    return done, log.read_text().splitlines() if log.exists() else []


def test_a_missing_browser_is_installed_from_debians_package_as_root(tmp_path: Path) -> None:
    done, calls = run(tmp_path, "--require")
    assert done.returncode == 0, done.stderr
    assert calls == ["install -y chromium"]
    assert "installing Debian's chromium package (apt-get install -y chromium)" in done.stdout
    assert (tmp_path / "usr-bin" / "chromium").exists()


def test_stale_package_lists_are_updated_once_before_installing_again(tmp_path: Path) -> None:
    done, calls = run(tmp_path, "--require", needs_update=True)
    assert done.returncode == 0, done.stderr
    assert calls == ["install -y chromium", "update", "install -y chromium"]


def test_a_browser_already_there_is_left_alone(tmp_path: Path) -> None:
    run(tmp_path)  # installs it
    done, calls = run(tmp_path)
    assert done.returncode == 0 and "Chromium found at" in done.stdout
    assert calls == ["install -y chromium"]  # the first run's only


@pytest.mark.parametrize("args, code", [((), 0), (("--require",), 1)])
def test_without_root_it_names_the_command_to_run(tmp_path: Path, args: tuple[str, ...],
                                                  code: int) -> None:
    done, calls = run(tmp_path, *args, uid=1000)
    assert done.returncode == code and calls == []
    assert "run: sudo apt-get install -y chromium" in done.stderr


@pytest.mark.parametrize("args, code", [((), 0), (("--require",), 1)])
def test_a_chosen_browser_that_is_missing_is_never_installed(tmp_path: Path,
                                                             args: tuple[str, ...],
                                                             code: int) -> None:
    done, calls = run(tmp_path, *args, env={"ATREX_CHROMIUM": str(tmp_path / "nowhere")})
    assert done.returncode == code and calls == []
    assert "ATREX_CHROMIUM" in done.stderr


@pytest.mark.parametrize("args, code", [((), 0), (("--require",), 1)])
def test_a_failed_install_is_a_warning_unless_required(tmp_path: Path, args: tuple[str, ...],
                                                       code: int) -> None:
    done, calls = run(tmp_path, *args, apt_fails=True)
    assert done.returncode == code
    assert calls == ["install -y chromium", "update"]  # tried, then the lists, then gave up
    assert "'apt-get install -y chromium' failed" in done.stderr
    assert ("warning:" in done.stderr) == (code == 0)


def test_make_setup_finishes_with_a_warning_when_apt_get_fails(tmp_path: Path) -> None:
    """`make run` starts with `make setup`: an apt-get that exits 1 (another process holds
    the dpkg lock, say) must not stop it. `make test` still stops."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool, body in (("id", "echo 0"), ("apt-get", 'echo "$*" >> "%s"; exit 1'
                                          % (tmp_path / "apt.log"))):
        (bin_dir / tool).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / tool).chmod(0o755)
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS", "ATREX_CHROMIUM")}
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    missing = f"CHROMIUM={tmp_path / 'usr-bin' / 'chromium'}"

    def make(target: str) -> subprocess.CompletedProcess[str]:
        # -o: the virtual environment is taken as made, whatever pyproject.toml's age
        return subprocess.run(["make", "--no-print-directory", "-o", ".venv/.installed", target,
                               missing], cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=120)

    setup = make("setup")
    assert setup.returncode == 0, setup.stderr
    assert "warning: browser tests:" in setup.stderr and "failed" in setup.stderr
    assert (tmp_path / "apt.log").read_text().splitlines()[0] == "install -y chromium"
    browser = make("browser")  # what `make test` runs first
    assert browser.returncode != 0 and "fail without it" in browser.stderr


def test_make_setup_installs_it_and_make_test_requires_it_before_anything_else() -> None:
    # CI runs this under `make test`: a nested make would print "Entering directory" first.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}

    def commands(target: str) -> list[str]:
        return subprocess.run(["make", "--no-print-directory", "-n", target], cwd=REPO, env=env,
                              capture_output=True, text=True, check=True).stdout.splitlines()

    assert "scripts/install-browser /usr/bin/chromium" in commands("setup")
    assert commands("test")[0] == "scripts/install-browser --require /usr/bin/chromium"
    assert "scripts/install-browser --require" in (REPO / ".ci" / "run").read_text()
