"""The folder a GPU host runs its worker from holds the harness and the worker, nothing else."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from evaluation.worker.bundle import build, main
from tests.worker import NO_DJANGO_CELERY


def test_the_bundle_holds_no_release_no_history_no_settings(tmp_path: Path) -> None:
    files = build(tmp_path / "bundle")
    names = {str(f) for f in files}
    assert "evaluation/harness/isolation/sandbox.py" in names and "evaluation/worker/tasks.py" in names
    assert "evaluation/protocol.py" in names and "run-worker" in names
    on_disk = {str(p.relative_to(tmp_path / "bundle")) for p in (tmp_path / "bundle").rglob("*")
               if p.is_file()}
    assert on_disk == names
    for name in names:
        assert not name.startswith(("portal", "submissions", "leaderboard", ".git"))
        assert "releases" not in name and "sample_candidates" not in name
        assert name.endswith((".py", "result_schema.json")) or name in ("run-worker", "MANIFEST")


def test_a_bundle_is_not_built_over_other_files(tmp_path: Path) -> None:
    (tmp_path / "bundle").mkdir()
    (tmp_path / "bundle" / "secrets.env").write_text("x")
    assert main([str(tmp_path / "bundle")]) == 2


def test_the_worker_loads_from_the_bundle_without_django(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    build(bundle)
    # the same import blocker the tests' GPU workers run under, then the worker's modules
    probe = NO_DJANGO_CELERY.replace("from celery.__main__ import main\nmain()", "") + (
        "import evaluation, evaluation.worker.tasks as tasks\n"
        "print(evaluation.__file__)\n"
        "print(sorted(tasks.app.tasks))\n"
        "print([m for m in sys.modules if m.split('.')[0] in ('django', 'portal', 'submissions')])\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=bundle, capture_output=True,
                          text=True, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(bundle)},
                          timeout=120)
    assert done.returncode == 0, done.stderr
    location, tasks, loaded = done.stdout.splitlines()
    assert Path(location).resolve() == (bundle / "evaluation" / "__init__.py").resolve()
    assert "'evaluation.evaluate_job'" in tasks
    assert loaded == "[]"


def test_the_django_blocker_really_blocks() -> None:
    probe = NO_DJANGO_CELERY.replace("from celery.__main__ import main\nmain()", "import django\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode != 0 and "not on a GPU host" in done.stderr
