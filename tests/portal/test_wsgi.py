"""The web server's module: what it has loaded when it starts is frozen out of the garbage
collector's walks (a full collection inside an uncached board walked the whole heap)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_wsgi_module_freezes_the_heap_it_loaded() -> None:
    # in a process of its own: a frozen heap would outlive this test in the suite's process
    probe = ("import gc; before = gc.get_freeze_count(); import portal.wsgi; "
             "print(before, gc.get_freeze_count(), callable(portal.wsgi.application))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                          text=True, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    before, after, callable_app = done.stdout.split()
    assert before == "0" and int(after) > 10_000 and callable_app == "True"
