"""Production settings pass Django's deployment checks (`manage.py check --deploy`)."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_check_deploy_is_clean_with_production_settings() -> None:
    env = {**os.environ, "DJANGO_DEBUG": "0", "DJANGO_SECRET_KEY": secrets.token_urlsafe(60),
           "DJANGO_ALLOWED_HOSTS": "portal.example"}
    run = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level",
                          "WARNING"], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "System check identified no issues" in run.stdout


def test_production_refuses_to_start_without_a_secret_key() -> None:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SECRET_KEY"}
    env.update({"DJANGO_DEBUG": "0", "DJANGO_ALLOWED_HOSTS": "portal.example"})
    run = subprocess.run([sys.executable, "manage.py", "check"], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode != 0 and "DJANGO_SECRET_KEY" in run.stderr
