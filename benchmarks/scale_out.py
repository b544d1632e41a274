"""Evaluation throughput with 1, 2, … GPU workers on one queue, through the portal's real stack.

For each worker count, in a fresh folder: a database (SQLite unless DATABASE_URL is set), the
broker (kombu's filesystem transport unless CELERY_BROKER_URL is set), one results worker,
and one GPU worker per GPU, run as a GPU host runs it: from a bundle of the harness and the
worker (no Django, no database, no releases), pinned with CUDA_VISIBLE_DEVICES=i, with its
own sandbox uid (60001, 60002, ...: uids with no passwd entry) and the sandbox required. The
same batch of submissions (the fixture release's honest Triton candidates, round robin over
its operators) is uploaded through `submission_create`, as the web tier does, and the
script waits until every job is scored or failed. Throughput = shapes evaluated per minute
between the first upload and the last job's end. Duplicate or lost work shows as job
attempts above 1 or shape results missing; both are printed.

On a host with no GPU the workers evaluate the dev shapes in Triton's interpreter: that
checks the plumbing, and its numbers say nothing about GPUs.

Usage: python benchmarks/scale_out.py [--workers 1,2] [--submissions 12] [--json OUT]
           [--release DIR --candidate OP=FILE ...]

With --release (the public Atrex-Bench, say) and --candidate, the batch is those candidates
round robin on that release instead: the portal's path for the same files `worker_speed.py`
times on the worker's path. Each phase also reports what the portal adds: upload to the
first job's start, the jobs' own run time (the worker's "started" to "ended" reports) and
their end to the last result stored; seconds per shape = upload to last job's end / shapes.
Inside the jobs it splits the harness's own seconds (as stored with each shape's result, its
wait for a child started ahead apart) from what the worker and broker add around them. The
first upload waits --settle-s (15 s, as worker_speed.py does) after the workers are up, so
that the first job's child, started ahead, is ready as every later job's is.

On a lent two-GPU H200 machine (no network; Python 3.12): run `scripts/device-wheels` here
first, carry `.whl`, and begin the command with the install line that script prints (the
phases keep that PYTHONPATH and add the checkout, or the bundle for GPU workers, in front).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _path import REPO
from stack import gpu_worker, path_with, results_worker, stop, wait_ready

HARDWARE = "H200"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--submissions", type=int, default=12)
    parser.add_argument("--timeout-s", type=float, default=1800)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--settle-s", type=float, default=15.0,
                        help="wait this long after the workers are up before the first upload "
                             "(worker_speed.py waits as long: the first job's child is ready)")
    parser.add_argument("--release", type=Path, default=None,
                        help="a release folder (default: the fixture release)")
    parser.add_argument("--candidate", action="append", default=[], metavar="OP=FILE",
                        help="a candidate file for an operator (repeatable; with --release)")
    parser.add_argument("--phase", type=int, help=argparse.SUPPRESS)  # one worker count, inside
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase is not None:
        print(json.dumps(run_phase(args.phase, args.submissions, args.folder, args.timeout_s,
                                   args.release, args.candidate, args.settle_s)))
        return
    phases = []
    for count in [int(n) for n in args.workers.split(",")]:
        with tempfile.TemporaryDirectory(prefix="atrex-scale-") as folder:
            env = {**os.environ, "ATREX_VAR_DIR": folder,
                   "DATABASE_URL": os.environ.get("DATABASE_URL", f"sqlite:///{folder}/db.sqlite3"),
                   "DJANGO_SETTINGS_MODULE": "portal.settings",
                   "PYTHONPATH": path_with(str(REPO))}
            done = subprocess.run(
                [sys.executable, __file__, "--phase", str(count), "--folder", folder,
                 "--submissions", str(args.submissions), "--timeout-s", str(args.timeout_s),
                 "--settle-s", str(args.settle_s),
                 *(["--release", str(args.release.resolve())] if args.release else []),
                 *[f"--candidate={c}" for c in args.candidate]],
                env=env, cwd=REPO, capture_output=True, text=True)
            if done.returncode != 0:
                sys.exit(f"phase with {count} worker(s) failed:\n{done.stderr[-4000:]}")
            phase = json.loads(done.stdout.strip().splitlines()[-1])
        phases.append(phase)
        print(f"{count} worker(s): {phase['shapes']} shapes in {phase['seconds']:.1f} s = "
              f"{phase['shapes_per_minute']:.1f} shapes/min; jobs {phase['statuses']}, "
              f"attempts>1: {phase['repeated_attempts']}, missing results: "
              f"{phase['missing_results']}, device: {phase['device']}", flush=True)
        print(f"  {phase['seconds_per_shape']:.3f} s per shape, upload to last job's end; "
              f"upload to first start {phase['upload_to_first_start_s']:.2f} s, the jobs' own "
              f"run {phase['job_run_s']:.1f} s ({phase['job_run_s'] / phase['shapes']:.3f} s per "
              f"shape), last end to last result stored {phase['last_end_to_stored_s']:.2f} s",
              flush=True)
        per = max(phase["shapes"], 1)
        outside = phase["job_run_s"] - phase["harness_s"]
        print(f"  inside the jobs, per shape: the harness {phase['harness_s'] / per:.3f} s (of "
              f"which waiting for a child {phase['child_wait_s'] / per:.3f} s), outside it "
              f"(job set-up, reports through the broker, storage) {outside / per:.3f} s",
              flush=True)
    if len(phases) > 1:
        base = phases[0]["shapes_per_minute"]
        for phase in phases[1:]:
            print(f"speed-up with {phase['workers']} workers against {phases[0]['workers']}: "
                  f"{phase['shapes_per_minute'] / base:.2f}x")
    if args.json:
        args.json.write_text(json.dumps(phases, indent=2) + "\n")


def run_phase(workers: int, submissions: int, folder: Path, timeout_s: float,
              release_dir: Path | None = None, candidates: list[str] | None = None,
              settle_s: float = 0.0) -> dict[str, Any]:
    """Inside a fresh process whose environment names this phase's database and broker."""
    import django

    django.setup()
    import torch
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from evaluation.catalog.importing import release_import
    from evaluation.catalog.models import HardwareProfile
    from evaluation.worker.bundle import build as build_bundle
    from portal.accounts.models import Membership, Team
    from submissions.models import EvaluationJob, ShapeResult
    from submissions.services import submission_create

    gpus = torch.cuda.device_count()
    if gpus and workers > gpus:
        raise SystemExit(f"{workers} workers asked for, {gpus} GPU(s) here")
    if not gpus:
        settings.ATREX_SHAPE_FILTER = "dev-*"  # the interpreter: dev shapes only
    call_command("migrate", verbosity=0)
    release = release_import(
        path=release_dir or REPO / "evaluation" / "releases" / "atrex-fixture").release
    if not HardwareProfile.objects.filter(name=HARDWARE).exists():
        # a release without the project's H200 profile (the public one has H20 and XPU-A)
        call_command("import_hardware", verbosity=0)
    hardware = HardwareProfile.objects.get(name=HARDWARE)
    team = Team.objects.create(name="scale-out", slug="scale-out", daily_submission_quota=10_000,
                               concurrent_job_quota=10_000)
    user = get_user_model().objects.create_user("scale", password="scale-out-password")
    Membership.objects.create(team=team, user=user)
    operators = {op.name for op in release.operators.all()}
    if candidates:  # OP=FILE: uploaded as OP.py
        chosen = [(op, Path(path)) for op, _, path in (c.partition("=") for c in candidates)]
    else:
        chosen = [(s.parent.name, s) for s in sorted(
            (REPO / "evaluation" / "sample_candidates").glob("*/triton_native.py"))]
    samples = [(op, path) for op, path in chosen if op in operators]
    if not samples:
        raise SystemExit(f"no candidate for an operator of {release}")
    logs = folder / "logs"
    logs.mkdir()
    bundle = folder / "gpu-worker"
    build_bundle(bundle)
    processes = [results_worker("results", "results", {}, logs)]
    for index in range(workers):
        # one GPU and one sandbox uid per worker slot (sandbox.SandboxSettings)
        pin = {"ATREX_SANDBOX_UID": str(60001 + index), "ATREX_SANDBOX_GID": str(60001 + index)}
        if gpus:
            pin["CUDA_VISIBLE_DEVICES"] = str(index)
        processes.append(gpu_worker(f"eval{index}", f"eval.{HARDWARE}", pin, logs, bundle))
    try:
        wait_ready(processes, logs)
        time.sleep(settle_s)  # each worker's first child, started ahead, gets ready
        started = time.monotonic()
        for index in range(submissions):
            operator, sample = samples[index % len(samples)]
            submission_create(team=team, user=user, release=release, hardware=hardware,
                              filename=f"{operator}.py", data=sample.read_bytes(),
                              agent="scale-out", model_name="-", output_tokens=0)
        deadline = started + timeout_s
        while EvaluationJob.objects.exclude(status__in=("scored", "failed")).exists():
            if time.monotonic() > deadline:
                raise SystemExit("jobs still unfinished at the time limit")
            for name, process in processes:
                if process.poll() is not None:
                    raise SystemExit(f"worker {name} exited:\n"
                                     f"{(logs / f'{name}.log').read_text()[-3000:]}")
            time.sleep(0.5)
        seconds = time.monotonic() - started
    finally:
        stop(processes)
    jobs = list(EvaluationJob.objects.all())
    # the portal's clock: the first upload, each job's "started" and "ended" as stored
    uploaded = min(job.created_at for job in jobs)
    first_start = min((job.started_at for job in jobs if job.started_at), default=uploaded)
    last_end = max((job.finished_at for job in jobs if job.finished_at), default=uploaded)
    run_s = sum((job.finished_at - job.started_at).total_seconds() for job in jobs
                if job.started_at and job.finished_at)
    shapes = sum(job.shapes_total for job in jobs)
    stored = ShapeResult.every_tier.count()  # the hidden tier too
    # the harness's own seconds per shape, and its wait for a child started ahead, as stored
    raws = [r.raw for r in ShapeResult.every_tier.all()]
    harness_s = sum(float(r.get("seconds") or 0.0) for r in raws)
    child_wait_s = sum(float(((r.get("steps") or {}).get("seconds") or {}).get(
        "child_start_wait") or 0.0) for r in raws)
    statuses: dict[str, int] = {}
    for job in jobs:
        statuses[job.status] = statuses.get(job.status, 0) + 1
    return {
        "workers": workers, "submissions": submissions, "shapes": shapes, "seconds": seconds,
        "shapes_per_minute": shapes / seconds * 60, "statuses": statuses,
        "seconds_per_shape": seconds / shapes if shapes else None,
        "upload_to_first_start_s": (first_start - uploaded).total_seconds(),
        "job_run_s": run_s,
        "harness_s": harness_s,
        "child_wait_s": child_wait_s,
        "settle_s": settle_s,
        # the poll that saw every job ended came this long after the last one's "ended"
        "last_end_to_stored_s": seconds - (last_end - uploaded).total_seconds(),
        "repeated_attempts": sum(1 for job in jobs if job.attempts > 1),
        "missing_results": shapes - stored,
        "device": torch.cuda.get_device_name() if gpus else "cpu (Triton interpreter)",
    }


if __name__ == "__main__":
    main()
