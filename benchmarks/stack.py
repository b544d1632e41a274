"""The portal's real stack started by the measuring scripts: its workers as processes.

A results worker (the web tier's Celery app, with the database) and GPU workers run as a GPU
host runs them: from a bundle of the harness and the worker (no Django, no database, no
releases), pinned to one GPU each with a sandbox uid of their own (scale_out.py,
public_baseline.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
Worker = tuple[str, "subprocess.Popen[bytes]"]


def path_with(first: str) -> str:
    """PYTHONPATH with `first` in front of what is there (the carried wheels on a GPU host)."""
    return os.pathsep.join([first, *filter(None, [os.environ.get("PYTHONPATH", "")])])


def gpu_worker(name: str, queues: str, extra_env: dict[str, str], logs: Path,
               bundle: Path) -> Worker:
    """A GPU worker from the bundle: the broker's settings and nothing of the web tier."""
    from evaluation.protocol import worker_queues  # the caller has put the checkout on sys.path

    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE", "DJANGO"))}
    repo = str(REPO)
    outside = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != repo]
    env.update(extra_env, PYTHONPATH=os.pathsep.join([str(bundle), *outside]),
               ATREX_SANDBOX_REQUIRED="1")
    # the team queues, then their .low ones (baselines), as run-worker lists them
    command = [sys.executable, "-m", "celery", "-A", "evaluation.worker.app", "worker", "-Q",
               worker_queues(queues), "-n", f"{name}@%h", "--pool", "solo", "--without-gossip",
               "--without-mingle", "--loglevel", "INFO"]
    with open(logs / f"{name}.log", "wb") as out:
        process = subprocess.Popen(command, cwd=bundle, env=env, stdout=out,
                                   stderr=subprocess.STDOUT)
    return name, process


def results_worker(name: str, queues: str, extra_env: dict[str, str],
                   logs: Path) -> Worker:
    command = [sys.executable, "-m", "celery", "-A", "portal", "worker", "-Q", queues,
               "-n", f"{name}@%h", "--pool", "solo", "--without-gossip", "--without-mingle",
               "--loglevel", "INFO"]
    with open(logs / f"{name}.log", "wb") as out:
        process = subprocess.Popen(command, cwd=REPO, env={**os.environ, **extra_env},
                                   stdout=out, stderr=subprocess.STDOUT)
    return name, process


def wait_ready(processes: list[Worker], logs: Path) -> None:
    deadline = time.monotonic() + 180
    for name, process in processes:
        while b"ready." not in (logs / f"{name}.log").read_bytes():
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"worker {name} did not start:\n"
                                 f"{(logs / f'{name}.log').read_text()[-3000:]}")
            time.sleep(0.5)



def stop(processes: list[Worker]) -> None:
    """Terminate the workers, and kill any that has not ended 30 s later."""
    for _, process in processes:
        process.terminate()
    for _, process in processes:
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


def card_profile(default: str = "H200") -> str:
    """The project's hardware profile (evaluation/hardware) of this host's GPU, by its name;
    `default` without one. The lent machines are H200s or H100s: a row's attainment is
    against the card it ran on, and a job goes to that card's queue."""
    import torch

    if torch.cuda.is_available():
        name = torch.cuda.get_device_name(0)
        for profile in ("H200", "H100", "H20", "MI300X"):
            if profile in name:
                return profile
    return default
