"""`atrex loop` on a GPU host: a scripted sweep improving a deliberately slow Triton RMSNorm on
the public Atrex-Bench rms_norm (56 shapes), through the portal's real stack.

In a fresh folder: a database (SQLite unless DATABASE_URL is set), the broker (kombu's
filesystem transport unless CELERY_BROKER_URL is set), the release imported with its
weights, a team, the web server, one results worker and one GPU worker from the bundle
(as scale_out.py runs them), and a full token (the checks and the final ranked
submission). Then

    atrex loop --release R --operator rms_norm --hardware H200 \
        --generator "python benchmarks/loop_sweep_generator.py" --rounds 7 --patience 2 \
        --final-ranked

runs against it. The generator sweeps from the row in chunks of 16 elements with one warp
(the row read twice) to the whole row in registers (loop_sweep_generator.SWEEP). The loop's
summary, its audit trail and every round's candidate, result and decision are copied to
--out (default benchmarks/results/loop-gpu/). What it should show on an H200: S_op rising
over the first rounds (each accepted beyond its interval), later configurations rejected as
within the interval or not better, a dropout after two rounds without an accepted revision,
and a final ranked submission of the best.

Usage (repository root, a GPU host; the wheels of scripts/device-wheels on PYTHONPATH):

    python benchmarks/loop_gpu.py --release /path/to/atrex-bench [--rounds 7] [--out DIR]

On a host without a GPU the worker evaluates the dev shapes in Triton's interpreter
(nothing timed): that checks the plumbing only (the fixture release has dev shapes; the
public one has none).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from _path import REPO
from stack import card_profile, gpu_worker, path_with, results_worker, stop, wait_ready

HARDWARE = "H200"  # on a host without a GPU (the plumbing check); else the card's own


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--release", type=Path,
                        default=REPO / "evaluation" / "releases" / "atrex-fixture")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--patience", type=int, default=2)
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "loop-gpu")
    parser.add_argument("--port", type=int, default=0, help="the web server's (default: free)")
    parser.add_argument("--phase", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        run(args)
        return
    with tempfile.TemporaryDirectory(prefix="atrex-loop-gpu-") as folder:
        env = {**os.environ, "ATREX_VAR_DIR": folder,
               "DATABASE_URL": os.environ.get("DATABASE_URL", f"sqlite:///{folder}/db.sqlite3"),
               "DJANGO_SETTINGS_MODULE": "portal.settings", "PYTHONPATH": path_with(str(REPO))}
        done = subprocess.run([sys.executable, __file__, "--phase", "--folder", folder,
                               "--release", str(args.release.resolve()), "--rounds",
                               str(args.rounds), "--patience", str(args.patience), "--out",
                               str(args.out.resolve()), "--port", str(args.port)],
                              env=env, cwd=REPO)
        sys.exit(done.returncode)


def run(args: argparse.Namespace) -> None:
    import django

    django.setup()
    import torch
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from evaluation.catalog.importing import release_import
    from evaluation.catalog.models import HardwareProfile
    from evaluation.worker.bundle import build as build_bundle
    from leaderboard.services import weight_set_from_release
    from portal.accounts.models import Membership, Team, token_create

    folder: Path = args.folder
    gpus = torch.cuda.device_count()
    hardware = card_profile(HARDWARE)
    print(f"hardware: {hardware}", flush=True)
    shape_filter = "" if gpus else "dev-*"
    settings.ATREX_SHAPE_FILTER = shape_filter
    call_command("migrate", verbosity=0)
    release = release_import(path=args.release).release
    if not HardwareProfile.objects.filter(name=hardware).exists():
        call_command("import_hardware", verbosity=0)
    if not release.weight_sets.filter(active=True).exists():
        weight_set_from_release(release)
    team = Team.objects.create(name="loop", slug="loop", daily_submission_quota=100,
                               concurrent_job_quota=4)
    user = get_user_model().objects.create_user("looper", password="loop-gpu-password")
    Membership.objects.create(team=team, user=user)
    # A full token: the loop's checks and, with --final-ranked, the ranked submission.
    full_token = token_create(team=team, name="loop", created_by=user, scope="full")[1]

    # Written under --out as they happen (not copied at the end), with the loop's progress on
    # stderr as it goes: a run its device call cut short still shows how far it got (the first
    # H200 run, killed at its limit, left nothing to read).
    args.out.mkdir(parents=True, exist_ok=True)
    logs = args.out / "logs"
    logs.mkdir(exist_ok=True)
    bundle = folder / "gpu-worker"
    build_bundle(bundle)
    port = args.port or _free_port()
    web_env = {**os.environ, "ATREX_SHAPE_FILTER": shape_filter}
    with open(logs / "web.log", "wb") as out:
        web = subprocess.Popen([sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}",
                                "--noreload"], cwd=REPO, env=web_env, stdout=out,
                               stderr=subprocess.STDOUT)
    pin = {"ATREX_SANDBOX_UID": "60001", "ATREX_SANDBOX_GID": "60001",
           "ATREX_SHAPE_FILTER": shape_filter}
    if gpus:
        pin["CUDA_VISIBLE_DEVICES"] = "0"
    processes = [results_worker("results", "results", {"ATREX_SHAPE_FILTER": shape_filter},
                                logs),
                 gpu_worker("eval0", f"eval.{hardware}", pin, logs, bundle)]
    server = f"http://127.0.0.1:{port}"
    workdir = args.out / "loop"
    try:
        wait_ready(processes, logs)
        _wait_http(server, web, logs)
        started = time.monotonic()
        loop = subprocess.run(
            [sys.executable, "-m", "atrex_cli", "loop", "--server", server, "--release",
             str(release.pk), "--operator", "rms_norm", "--hardware", hardware,
             "--generator", f"{sys.executable} {REPO / 'benchmarks' / 'loop_sweep_generator.py'}",
             "--rounds", str(args.rounds), "--patience", str(args.patience), "--final-ranked",
             "--workdir", str(workdir), "--agent", "scripted-sweep", "--model", "none",
             "--wait-timeout", "1200"],
            cwd=REPO, env={**os.environ, "ATREX_TOKEN": full_token,
                           "ATREX_CONFIG": os.devnull, "PYTHONUNBUFFERED": "1"},
            stdout=subprocess.PIPE, stderr=None, text=True)
        seconds = time.monotonic() - started
    finally:
        stop(processes + [("web", web)])
    if loop.returncode not in (0, 9):
        raise SystemExit(f"atrex loop failed ({loop.returncode}); its stderr is above")
    summary: dict[str, Any] = json.loads(loop.stdout)
    summary["seconds"] = seconds
    summary["device"] = torch.cuda.get_device_name() if gpus else "cpu (Triton interpreter)"
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    trail = [json.loads(line) for line in (workdir / "audit.jsonl").read_text().splitlines()]
    for event in trail:
        if event["event"] == "round":
            print(f"round {event['round']}: {event['decision']:8} S_op "
                  f"{_score(event.get('s_op'), event.get('interval'))}  {event['reason']}")
        else:
            rest = {k: v for k, v in event.items() if k not in ("at", "loop", "event")}
            print(f"{event['event']}: {json.dumps(rest)}")
    print(f"best: {json.dumps(summary['best'])}")
    print(f"{summary['rounds']} rounds, accepted {summary['accepted']}, rejected "
          f"{summary['rejected']}, dropouts {summary['dropouts']}, {seconds:.0f} s on "
          f"{summary['device']}; saved under {args.out}")


def _score(value: float | None, interval: list[float] | None) -> str:
    if value is None:
        return "-"
    return f"{value:.4f}" + (f" [{interval[0]:.4f}, {interval[1]:.4f}]" if interval else "")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _wait_http(server: str, web: subprocess.Popen[bytes], logs: Path) -> None:
    deadline = time.monotonic() + 120
    while True:
        try:
            urllib.request.urlopen(f"{server}/api/releases/", timeout=5).read()
            return
        except OSError:
            if web.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the web server did not start:\n"
                                 f"{(logs / 'web.log').read_text()[-3000:]}") from None
            time.sleep(0.5)


if __name__ == "__main__":
    main()
