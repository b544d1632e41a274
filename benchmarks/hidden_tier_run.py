"""The hidden shape tier through the portal's real stack: the starter release's rms_norm, one
honest Triton kernel and one that special-cases the public shapes, ranked submissions of two
teams, evaluated on the public and the hidden shapes by a GPU worker run as a GPU host runs
it (from the bundle, sandbox required).

Prints, per team, the ranked S_op (public shapes), the S_op over the hidden shapes, the
medians of attainment with the launch floor that the "does not generalise" flag compares and
the flag, then every shape's verdict and attainment as an admin sees them
(hidden ones marked); with --json, writes it all, with the operator board's rows.

Usage: python benchmarks/hidden_tier_run.py [--json OUT] [--operator rms_norm]
           [--candidate TEAM=FILE ...] [--ncu-shape SHAPE]

With --ncu-shape, each team then asks for an ncu profile of that public shape through the
portal (submissions/ncu.py): the GPU worker runs it in the candidate's sandbox, the results
worker stores it, and the kernels are printed and saved.

Default candidates: evaluation/sample_candidates/rms_norm/{triton_native,special_cased}.py.
On a host without a GPU the worker runs the dev tier in Triton's interpreter (the plumbing
only: no time, no attainment, no flag). On the lent H200: as scale_out.py says (device wheels
carried, the install line first).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _path import REPO
from stack import gpu_worker, path_with, results_worker, stop, wait_ready

STARTER = REPO / "evaluation" / "releases" / "atrex-starter"
SAMPLES = REPO / "evaluation" / "sample_candidates" / "rms_norm"
HARDWARE = "H200"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", type=Path)
    parser.add_argument("--operator", default="rms_norm")
    parser.add_argument("--candidate", action="append", default=[], metavar="TEAM=FILE")
    parser.add_argument("--timeout-s", type=float, default=1200)
    parser.add_argument("--hidden-budget-s", type=float, default=5.0,
                        help="the release's budget per hidden shape: each job's hidden tier is "
                             "released this long per hidden shape after it began (the portal's "
                             "default, 60 s, would hold each job, and its GPU, for minutes)")
    parser.add_argument("--ncu-shape", default=None, metavar="SHAPE",
                        help="then ask for an ncu profile of this public shape of each team's "
                             "submission, through the portal, and wait for it")
    parser.add_argument("--inside", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    candidates = args.candidate or [f"honest={SAMPLES / 'triton_native.py'}",
                                    f"special-cased={SAMPLES / 'special_cased.py'}"]
    if args.inside is not None:
        print(json.dumps(run(args.inside, args.operator, candidates, args.timeout_s,
                             args.ncu_shape, args.hidden_budget_s)))
        return
    with tempfile.TemporaryDirectory(prefix="atrex-hidden-") as folder:
        env = {**os.environ, "ATREX_VAR_DIR": folder,
               "DATABASE_URL": os.environ.get("DATABASE_URL", f"sqlite:///{folder}/db.sqlite3"),
               "DJANGO_SETTINGS_MODULE": "portal.settings", "PYTHONPATH": path_with(str(REPO))}
        done = subprocess.run([sys.executable, __file__, "--inside", folder, "--operator",
                               args.operator, "--timeout-s", str(args.timeout_s),
                               "--hidden-budget-s", str(args.hidden_budget_s),
                               *(["--ncu-shape", args.ncu_shape] if args.ncu_shape else []),
                               *[f"--candidate={c}" for c in candidates]],
                              env=env, cwd=REPO, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"the run failed:\n{done.stderr[-4000:]}")
        report = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"{report['release']} / {args.operator} on {report['device']}: "
          f"{report['public_shapes']} public shapes, {report['hidden_shapes']} hidden, "
          f"generalisation factor {report['factor']}")
    for team in report["teams"]:
        print(f"  {team['team']:<14} S_op public {_num(team['s_op'])}  hidden "
              f"{_num(team['s_op_hidden'])}  "
              f"{'DOES NOT GENERALISE' if team['not_generalising'] else 'generalises'} (with "
              f"the launch floor: public {_num((team['generalisation'] or {}).get('public'))}, "
              f"hidden {_num((team['generalisation'] or {}).get('hidden'))}); "
              f"board rank {team['rank']}, badges {team['badges']}")
        for shape in team["shapes"]:
            print(f"      {'hidden ' if shape['hidden'] else 'public '}{shape['shape']:<44} "
                  f"{shape['status']:<7} {shape['verdict'] or '-':<16} "
                  f"attainment {_num(shape['attainment'])}")
    for team in report["teams"]:
        for found in team.get("ncu") or []:
            print(f"  ncu, {team['team']}, {found['shape']}: {found['status']}"
                  f"{' (' + found['error'] + ')' if found['error'] else ''}, clocks "
                  f"{found['clocks']}")
            for kernel in found["kernels"]:
                print(f"      {str(kernel['name'])[:50]:<50} {_num(kernel['duration_s'])} s, "
                      f"DRAM {_num(kernel['dram_of_peak'])} of peak, {kernel['limited_by']}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def run(folder: Path, operator: str, candidates: list[str], timeout_s: float,
        ncu_shape: str | None = None, hidden_budget_s: float = 5.0) -> dict[str, Any]:
    """Inside a fresh process whose environment names this run's database and broker."""
    import django

    django.setup()
    import torch
    from django.conf import settings
    from django.core.management import call_command

    from evaluation.catalog.importing import release_import
    from evaluation.catalog.models import HardwareProfile
    from evaluation.worker.bundle import build as build_bundle
    from leaderboard.models import SubmissionScore
    from leaderboard.selectors import operator_board
    from leaderboard.services import weight_set_from_release
    from portal.accounts.models import Team
    from submissions.models import EvaluationJob, NcuProfile, ShapeResult
    from submissions.ncu import ncu_profile_request, ncu_profiles_of
    from submissions.services import submission_create

    gpus = torch.cuda.device_count()
    if not gpus:
        settings.ATREX_SHAPE_FILTER = "dev-*"
    call_command("migrate", verbosity=0)
    # A secret of this run alone: the starter's hidden tier is drawn at import from an
    # admin's secret and no checkout holds it (docs/starter-release.md, "The hidden tier").
    summary = release_import(path=STARTER, hidden_secret=secrets.token_hex(32).encode())
    release = summary.release
    release.hidden_shape_budget_s = hidden_budget_s
    release.save(update_fields=["hidden_shape_budget_s"])
    weights = weight_set_from_release(release)
    hardware = HardwareProfile.objects.get(name=HARDWARE)
    logs = folder / "logs"
    logs.mkdir()
    bundle = folder / "gpu-worker"
    build_bundle(bundle)
    processes = [results_worker("results", "results", {}, logs),
                 gpu_worker("eval0", f"eval.{HARDWARE}", {"ATREX_SANDBOX_UID": "60001",
                                                          "ATREX_SANDBOX_GID": "60001"},
                            logs, bundle)]
    submissions = {}
    try:
        wait_ready(processes, logs)
        time.sleep(15)  # the worker's first child, started ahead, gets ready
        for entry in candidates:
            name, _, path = entry.partition("=")
            team = Team.objects.create(name=name, slug=name)
            submissions[name] = submission_create(
                team=team, user=None, release=release, hardware=hardware,
                filename=f"{operator}.py", data=Path(path).read_bytes(), agent="hidden-tier-run")
        deadline = time.monotonic() + timeout_s
        while (EvaluationJob.objects.exclude(status__in=("scored", "failed")).exists()
               or SubmissionScore.objects.filter(complete=True, weight_set=weights).count()
               < len(submissions)):
            if time.monotonic() > deadline:
                raise SystemExit("still unfinished at the time limit")
            for name, process in processes:
                if process.poll() is not None:
                    raise SystemExit(f"worker {name} exited:\n"
                                     f"{(logs / f'{name}.log').read_text()[-3000:]}")
            time.sleep(0.5)
        time.sleep(2)  # the last rescore lands
        if ncu_shape:
            for submission in submissions.values():
                ncu_profile_request(submission=submission, operator=operator,
                                    shape_id=ncu_shape, user=None)
            while NcuProfile.objects.filter(status=NcuProfile.Status.QUEUED).exists():
                if time.monotonic() > deadline + 600:
                    raise SystemExit("ncu profiles still queued at the time limit")
                time.sleep(0.5)
    finally:
        stop(processes)
    board = operator_board(release=release, hardware=hardware, weight_set=weights,
                           operator=operator)
    rows = {row["team"]: row for row in board["rows"]}
    teams = []
    for name, submission in submissions.items():
        score = SubmissionScore.objects.get(submission=submission, weight_set=weights)
        job = EvaluationJob.objects.get(candidate__submission=submission)
        shapes = [{"shape": r.shape.shape_id, "hidden": r.shape.hidden, "status": r.status,
                   "verdict": r.verdict, "attainment": r.attainment, "median_s": r.median_s}
                  for r in ShapeResult.every_tier.filter(job=job, attempt=job.attempts)
                  .select_related("shape").order_by("shape__position")]
        teams.append({"team": name, "job": job.status, "error": job.error,
                      "s_op": (score.by_operator or {}).get(operator),
                      "s_op_hidden": (score.hidden_by_operator or {}).get(operator),
                      "not_generalising": operator in (score.not_generalising or []),
                      # what the flag compares: medians of min(1, (SOL + floor) / T)
                      "generalisation": (score.generalisation or {}).get(operator),
                      "rank": rows.get(name, {}).get("rank"),
                      "badges": rows.get(name, {}).get("badges"), "shapes": shapes,
                      "ncu": ncu_profiles_of(submission)})
    return {"release": str(release), "device": torch.cuda.get_device_name() if gpus
            else "cpu (Triton interpreter)", "factor": release.generalisation_factor,
            "public_shapes": len(job.shape_ids), "hidden_shapes": len(job.hidden_shape_ids),
            "teams": teams, "board_rows": board["rows"], "hidden_shapes_on_board":
            board["hidden_shapes"]}


if __name__ == "__main__":
    main()
