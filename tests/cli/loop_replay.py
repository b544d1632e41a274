"""A scripted generator for `atrex loop` in tests: round N copies the N-th file named in
$REPLAY_FILES (separated by os.pathsep) to $ATREX_LOOP_OUTPUT, and records what it was given
(the round's input JSON) in seen.json beside it, so a test can check what a fresh context
carried."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path


def main() -> int:
    files = os.environ["REPLAY_FILES"].split(os.pathsep)
    given = json.loads(sys.stdin.read())
    number = int(os.environ["ATREX_LOOP_ROUND"])
    Path("seen.json").write_text(json.dumps(given))
    if number > len(files) or not files[number - 1]:
        return 0  # writes nothing: the loop rejects the round
    shutil.copyfile(files[number - 1], os.environ["ATREX_LOOP_OUTPUT"])
    Path(os.environ["ATREX_LOOP_USAGE"]).write_text(json.dumps(
        {"input_tokens": 1000 * number, "output_tokens": 100 * number, "model": "replay-1"}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
