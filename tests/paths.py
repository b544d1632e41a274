"""Where the tests find the repository's own files: the fixture release and the sample
candidates. A helper module, so tests import it rather than conftest.py."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURE_RELEASE = REPO / "evaluation" / "releases" / "atrex-fixture"
SAMPLE_CANDIDATES = REPO / "evaluation" / "sample_candidates"
