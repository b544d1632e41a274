"""The embedded default keeps its state in var/: the SQLite database (every team's source and
results), the broker's messages, the workers' logs, Celery beat's schedule. None of it is
anybody's but the portal user's: folders 0700, files 0600 (the broker's own are already,
evaluation/broker.py). `make run` also starts its processes with umask 077
(scripts/run-portal), so what they create later is private too."""

from __future__ import annotations

import os
import stat
from pathlib import Path

# Made by scripts/run-portal for the evaluation worker, which runs as on a GPU host: its
# sandboxed child (another uid) reads the harness from there, so its modes stay as built.
SHARED = ("gpu-worker",)
FOLDERS = ("log",)  # folders whose files are kept private here too


def private_var(var: Path, *, database: Path | None = None) -> None:
    """`var` and its log folder 0700, the files directly in them 0600; `database` (a SQLite
    file in it) made 0600 before SQLite first opens it, so its journal files, which SQLite
    creates with the database's mode, are private from the start."""
    var.mkdir(parents=True, exist_ok=True)
    var.chmod(0o700)
    if database is not None and not database.exists():
        os.close(os.open(database, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    for folder in (var, *(var / name for name in FOLDERS)):
        if not folder.is_dir():
            continue
        folder.chmod(0o700)
        for entry in folder.iterdir():
            mode = entry.lstat().st_mode
            if stat.S_ISREG(mode) and stat.S_IMODE(mode) & 0o077:
                entry.chmod(stat.S_IMODE(mode) & 0o700)
            elif stat.S_ISDIR(mode) and entry.name not in (*SHARED, *FOLDERS):
                entry.chmod(0o700)
