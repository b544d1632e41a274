"""Entry point of the sandboxed child: `python -I child_main.py` (isolated mode).

Isolated mode ignores PYTHON* variables and the user site; the harness is put on the path
explicitly, and this script's own folder is taken off it so harness modules cannot be
imported by bare name.
"""

import sys
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parents[2])

from evaluation.harness.child import main  # noqa: E402

main()
