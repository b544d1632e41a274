"""Build the folder a GPU host runs its worker from: the harness, the worker, the protocol,
and nothing else.

    python -m evaluation.worker.bundle DEST

A GPU host is the one place that runs untrusted code, so it holds nothing worth stealing:
no release (hidden metadata, rooflines, importance), no `.git` (every version of them), no
settings or secrets, no Django. The files are listed here one by one, not copied by
folder, so a file added beside them later does not travel by accident. DEST/run-worker
starts the worker (docs/operations.md: what else the host needs).

Imports no Django.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import sys
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[2]
PACKAGES = {  # folder -> the files of it that travel
    "evaluation": ("__init__.py", "protocol.py", "broker.py"),
    "evaluation/harness": ("*.py", "result_schema.json"),
    "evaluation/harness/isolation": ("*.py",),
    "evaluation/harness/ncu": ("*.py",),
    "evaluation/harness/stages": ("*.py",),
    "evaluation/worker": ("*.py",),
}
RUN_WORKER = """#!/bin/sh
# Starts this host's GPU worker: one per GPU. Set CELERY_BROKER_URL, CUDA_VISIBLE_DEVICES,
# ATREX_SANDBOX_UID (one per worker on the host) and ATREX_QUEUES (eval.<hardware>).
set -eu
cd "$(dirname "$0")"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" ATREX_SANDBOX_REQUIRED="${ATREX_SANDBOX_REQUIRED:-1}"
# the team queues first, then their .low queues (baselines, admin re-runs): protocol.py
queues=$("${PYTHON:-python3}" -c 'import sys; from evaluation.protocol import worker_queues
print(worker_queues(sys.argv[1]))' "${ATREX_QUEUES:?eval.<hardware>}")
exec "${PYTHON:-python3}" -m celery -A evaluation.worker.app worker -Q "$queues" \\
  --pool solo --concurrency 1 -n "gpu${CUDA_VISIBLE_DEVICES:-0}@%h" "$@"
"""


def bundle_files() -> list[Path]:
    """The files that travel, relative to the checkout."""
    files: list[Path] = []
    for folder, patterns in PACKAGES.items():
        for pattern in patterns:
            files += sorted(p.relative_to(SOURCE) for p in (SOURCE / folder).glob(pattern)
                            if p.is_file())
    return files


def build(dest: Path) -> list[Path]:
    """Copy the bundle into `dest` (new or empty); return the files written."""
    if dest.exists() and any(dest.iterdir()):
        raise FileExistsError(f"{dest} is not empty")
    written = []
    for relative in bundle_files():
        target = dest / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(SOURCE / relative, target)
        written.append(relative)
    run = dest / "run-worker"
    run.write_text(RUN_WORKER)
    run.chmod(0o755)
    manifest = "".join(f"{hashlib.sha256((dest / f).read_bytes()).hexdigest()}  {f}\n"
                       for f in written)
    (dest / "MANIFEST").write_text(manifest)
    return [*written, Path("run-worker"), Path("MANIFEST")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dest", type=Path)
    args = parser.parse_args(argv)
    try:
        files = build(args.dest)
    except FileExistsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{len(files)} files in {args.dest}; start a worker with {args.dest}/run-worker")
    return 0


if __name__ == "__main__":
    sys.exit(main())
