"""The restore drill round-trips the database through pg_dump and pg_restore (PostgreSQL)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

from tests.world import import_fixture_release

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(not os.environ.get("DATABASE_URL", "").startswith("postgres"),
                    reason="the drill uses pg_dump and pg_restore")
@pytest.mark.django_db(transaction=True)
def test_a_dump_restores_into_a_fresh_database_with_every_row() -> None:
    import_fixture_release()  # committed rows, visible to pg_dump
    settings = connection.settings_dict
    source = (f"postgres://{settings['USER']}@{settings['HOST'] or '127.0.0.1'}:"
              f"{settings['PORT'] or 5432}/{settings['NAME']}")
    run = subprocess.run([sys.executable, str(REPO / "scripts" / "restore-drill"), "--source",
                          source], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "restore drill: OK" in run.stdout
    tables = int(run.stdout.split(" tables")[0].rsplit(" ", 1)[1])
    assert tables > 20
