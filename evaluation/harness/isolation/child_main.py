"""Entry point of the sandboxed child: `python -I child_main.py` (isolated mode).

Isolated mode ignores PYTHON* variables and the user site; the harness is put on the path
explicitly, and this script's own folder is taken off it so harness modules cannot be
imported by bare name.
"""

import os
import sys
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parents[3])
# DSL packages the worker found outside site-packages (jail.dsl_package_paths), exposed
# read-only to this process
sys.path += [p for p in os.environ.pop("ATREX_CHILD_SYS_PATH", "").split(os.pathsep) if p]

if os.environ.pop("ATREX_SYSCALL_FILTER", "") == "1":
    # First, before torch or the candidate: every later thread and process inherits it.
    # A filter that cannot be installed stops the child (the parent reports it).
    from evaluation.harness.isolation import syscall_filter

    syscall_filter.install()

from evaluation.harness.isolation.child import main  # noqa: E402

main()
