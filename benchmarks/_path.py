"""The repository root first on sys.path: a script run as `python benchmarks/x.py` has its
own folder there, not the root. Each script's `from _path import REPO` comes before it imports
the project (a GPU host's PYTHONPATH=$PWD gives the same root; the import is then harmless)."""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
