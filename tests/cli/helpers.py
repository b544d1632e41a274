"""Running the `atrex` client in tests as a user runs it: a subprocess with its own HOME."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

from tests.paths import REPO, SAMPLE_CANDIDATES

NATIVE = SAMPLE_CANDIDATES / "rms_norm" / "triton_native.py"


def atrex(portal: dict[str, Any], *args: str, token: str | None = None,
          server: str | None = None,
          extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the client as a user would, with its own HOME (config and bundle cache)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("ATREX_")}
    env.update(HOME=str(portal["home"]), XDG_CONFIG_HOME=str(portal["home"] / "config"),
               XDG_CACHE_HOME=str(portal["home"] / "cache"),
               ATREX_SERVER=server or portal["url"], COLUMNS="200")
    if token is not None:
        env["ATREX_TOKEN"] = token
    env.update(extra_env or {})
    return subprocess.run([sys.executable, "-m", "atrex_cli", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
