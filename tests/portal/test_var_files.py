"""The embedded default's var/ (the database with every team's source, the logs, Celery beat's
schedule) is its user's alone: 0700 folders, 0600 files."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from django.conf import settings

from portal.var_files import private_var


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_var_is_made_private_the_bundle_for_the_sandbox_left_readable(tmp_path: Path) -> None:
    var = tmp_path / "var"
    (var / "log").mkdir(parents=True)
    (var / "gpu-worker").mkdir()
    (var / "staticfiles").mkdir()
    for name in ("celerybeat-schedule.dat", "log/results-worker.log", "gpu-worker/run-worker"):
        (var / name).write_text("x")
        (var / name).chmod(0o644)
    for folder in (var, var / "log", var / "gpu-worker", var / "staticfiles"):
        folder.chmod(0o755)
    private_var(var, database=var / "portal.sqlite3")
    assert mode(var) == mode(var / "log") == mode(var / "staticfiles") == 0o700
    assert mode(var / "portal.sqlite3") == 0o600  # made before SQLite first opens it
    assert mode(var / "celerybeat-schedule.dat") == mode(var / "log/results-worker.log") == 0o600
    # the evaluation worker's bundle: its sandboxed child, another user, reads the harness
    assert mode(var / "gpu-worker") == 0o755 and mode(var / "gpu-worker/run-worker") == 0o644


def test_the_embedded_defaults_var_folder_is_private() -> None:
    if not settings.DATABASES["default"]["ENGINE"].endswith("sqlite3"):
        pytest.skip("PostgreSQL: var/ holds no database (the embedded leg checks it)")
    assert mode(Path(settings.VAR_DIR)) == 0o700


def test_make_run_starts_the_portals_processes_with_a_private_umask() -> None:
    script = (Path(settings.BASE_DIR) / "scripts" / "run-portal").read_text()
    setup = script.index("umask 077")
    assert setup < script.index("manage.py migrate") < script.index("runserver")
    assert "umask 022 && exec" in script  # the evaluation worker's bundle stays readable
