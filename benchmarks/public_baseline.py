"""A release's PyTorch-eager baseline through the portal's real stack (the public Atrex-Bench's).

In a state folder kept between runs: a SQLite database and kombu's filesystem broker, one
results worker and one GPU worker from the bundle, started as scale_out.py starts them. The
first run imports the release (`import_release`: the catalog and weights v1) and queues its
baseline (`evaluate_baselines NAME --hardware H200 --kinds pytorch`). A run on a folder that
already holds the database goes on where the last one stopped: the jobs that had not ended
are sent again, the heaviest operators first (one cut off while it ran starts again, last,
as a new attempt, as an admin's re-run does). Each run stops at its deadline and writes what
the portal stored: per operator the shapes evaluated, passed and failed (with their
errors), S_op, and the baseline row's S_agg as the portal scores it (the release's weights;
fallbacks count for a baseline).

`--carry-from OLD_DB` (first run only): an earlier run's database of the same references.
An operator whose public files are byte for byte the same there, and whose every shape was
timed by graph replay (whose scored time, the span of the replay, the timing definition of
2026-12-02 left unchanged), is not evaluated again: its stored shape results are reported
to the portal as a GPU worker reports a job (`submissions.jobs.record_event`: "started",
then "result"), each marked `carried_from`, and the portal stores and scores them as it
stores any. Every other operator is evaluated. With `--rederive-eager` the eager operators
are carried over too, each eager shape's scored time re-derived from its stored event and
busy times under the rule of 2026-12-02 (`rederived`: no upper bound); `--evaluate-again
OP,OP` evaluates those operators on the GPU instead, to check the re-derivation.

Usage on a GPU host (no network; Python 3.12): run `scripts/device-wheels` here first, carry
`.whl`, the release folder and the state folder, and begin with the install line that script
prints:
    python benchmarks/public_baseline.py --release DIR --state DIR --deadline-s 500 --json OUT \
        [--carry-from OLD_DB]
Here, from the JSON of the last run (no GPU):
    python benchmarks/public_baseline.py --render OUT [--previous EARLIER_RUN_JSON]
(writes its section of docs/baselines.md, with an earlier run's S_op beside this one's).
`--stored RUN_JSON` summarises a state folder's database with no GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from _path import REPO
from _wire import WALL_KEY, wall_time_s
from stack import gpu_worker, path_with, results_worker, stop, wait_ready

HARDWARE = "H200"
DOC = REPO / "docs" / "baselines.md"
SECTION = "## The public Atrex-Bench: PyTorch-eager baseline"


def run(args: argparse.Namespace) -> dict[str, Any]:
    state: Path = args.state.resolve()
    state.mkdir(parents=True, exist_ok=True)
    database = state / "db.sqlite3"
    resuming = database.exists()
    os.environ.update(ATREX_VAR_DIR=str(state), DATABASE_URL=f"sqlite:///{database}",
                      DJANGO_SETTINGS_MODULE="portal.settings", PYTHONPATH=path_with(str(REPO)))
    os.environ.pop("CELERY_BROKER_URL", None)  # the filesystem broker, in the state folder
    shutil.rmtree(state / "broker", ignore_errors=True)  # jobs are sent again below, once
    import django

    django.setup()
    import torch
    from django.core.management import call_command

    from evaluation.catalog.models import Release
    from evaluation.worker.bundle import build as build_bundle
    from submissions.jobs import dispatch_job, job_rerun
    from submissions.models import EvaluationJob

    started = time.monotonic()
    deadline = started + args.deadline_s
    call_command("migrate", verbosity=0)
    if resuming:
        release = Release.objects.order_by("-pk").first()
        assert release is not None
        weights = release.weight_sets.get(active=True).weights
        unfinished = list(EvaluationJob.objects.filter(status__in=EvaluationJob.Status.active())
                          .select_related("candidate__operator"))
        # the heaviest operators first; a job cut off while it ran last (it starts again
        # from its first shape)
        unfinished.sort(key=lambda job: (job.status == EvaluationJob.Status.RUNNING,
                                         -weights.get(job.candidate.operator.name, 0.0)))
        for job in unfinished:
            if job.status == EvaluationJob.Status.RUNNING:
                job_rerun(job=job, actor=None)
            else:
                dispatch_job(job.pk)
    else:
        # the catalog and weights v1, named as the folder is without the leading dot of a
        # copy carried to a GPU host (the run of 2026-12-01f stored ".atrex-bench")
        call_command("import_release", str(args.release),
                     "--name", args.release.resolve().name.lstrip("."))
        call_command("import_hardware")  # an upstream release brings no H200 profile
        release = Release.objects.order_by("-pk").first()
        assert release is not None
        call_command("evaluate_baselines", release.name, "--hardware", HARDWARE,
                     "--kinds", "pytorch")
        if args.carry_from is not None:
            # the queued messages go; the jobs not carried over are sent again, once
            for message in (state / "broker" / "queue").glob("*"):
                message.unlink()
            carried = carry_over(args.carry_from, args.rederive_eager,
                                 frozenset(filter(None, args.evaluate_again.split(","))))
            print(f"carried over from {args.carry_from.name}: {', '.join(carried) or 'nothing'}",
                  flush=True)
            for job in EvaluationJob.objects.filter(status__in=EvaluationJob.Status.active()):
                dispatch_job(job.pk)
    logs = state / "logs"
    logs.mkdir(exist_ok=True)
    bundle = state / "gpu-worker"
    shutil.rmtree(bundle, ignore_errors=True)
    build_bundle(bundle)
    pin = {"ATREX_SANDBOX_UID": "60001", "ATREX_SANDBOX_GID": "60001"}
    if torch.cuda.is_available():
        pin["CUDA_VISIBLE_DEVICES"] = "0"
    processes = [results_worker("results", "results", {}, logs),
                 gpu_worker("eval0", f"eval.{HARDWARE}", pin, logs, bundle)]
    try:
        wait_ready(processes, logs)
        last = 0.0
        while EvaluationJob.objects.filter(status__in=EvaluationJob.Status.active()).exists():
            if time.monotonic() > deadline:
                print("deadline: stopping with jobs still to run", flush=True)
                break
            for name, process in processes:
                if process.poll() is not None:
                    raise SystemExit(f"worker {name} exited:\n"
                                     f"{(logs / f'{name}.log').read_text()[-3000:]}")
            if time.monotonic() - last > 30:
                last = time.monotonic()
                print(progress_line(), flush=True)
            time.sleep(1)
    finally:
        stop(processes)
    report = summary(release, time.monotonic() - started, resuming)
    report["device"] = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    report["torch"] = torch.__version__
    return report


def carry_over(old_db: Path, rederive: bool = False, again: frozenset[str] = frozenset()
               ) -> list[str]:
    """Report an earlier run's graph-timed results of unchanged operators as the results of
    this baseline's jobs (see the module docstring); with `rederive` the eager ones too,
    their scored time re-derived (`rederived`); never those in `again`. The operators
    carried over."""
    import sqlite3

    from evaluation.catalog.selectors import evaluated_shape_ids
    from submissions.jobs import record_event
    from submissions.models import EvaluationJob

    old = sqlite3.connect(f"file:{old_db}?mode=ro", uri=True)
    earlier: dict[str, tuple[Any, ...]] = {}
    rows = old.execute(
        "select o.name, o.reference_py, o.input_py, o.shapes_json, j.id, j.attempts, "
        "j.evaluator_version, r.name || ' v' || r.version from evaluation_operator o "
        "join evaluation_release r on r.id = o.release_id "
        "join submissions_candidate c on c.operator_id = o.id "
        "join submissions_evaluationjob j on j.candidate_id = c.id "
        "where j.status = 'scored'").fetchall()
    for name, reference, inputs, shapes, job_id, attempt, version, release in rows:
        earlier[name] = ((reference, inputs, json.loads(shapes) if isinstance(shapes, str)
                          else shapes), job_id, attempt, version, release)
    carried = []
    for job in EvaluationJob.objects.filter(status="queued").select_related("candidate__operator"):
        operator = job.candidate.operator
        found = earlier.get(operator.name)
        if found is None:
            continue
        files, old_job, old_attempt, version, release = found
        if files != (operator.reference_py, operator.input_py, json.loads(operator.shapes_json)):
            continue
        results = [(json.loads(raw), method) for raw, method in old.execute(
            "select raw, launch_method from submissions_shaperesult where job_id = ? and "
            "attempt = ?", (old_job, old_attempt))]
        if len(results) != len(evaluated_shape_ids(operator)) or operator.name in again:
            continue
        if any(method != "graph" for _, method in results) and not rederive:
            continue
        source = f"{release}, job {old_job} attempt {old_attempt}"
        shapes = [rederived(raw, source) if method == "eager" else {**raw, "carried_from": source}
                  for raw, method in results]
        report = {"job_id": job.pk, "attempt": job.attempts, "run": f"carried-{old_job}",
                  "worker": f"carried over from {release}", "mode": "gpu"}
        record_event("started", report)
        record_event("result", {**report, "result": {"shapes": shapes, "mode": "gpu",
                                                     "evaluator_version": version}})
        carried.append(operator.name)
    return sorted(carried)


def rederived(raw: dict[str, Any], source: str) -> dict[str, Any]:
    """An eager shape result of the run before 2026-12-02 under today's rule: its scored
    samples were each call's event time held between the profiled busy time and the
    profiled span; they are now the event time held above the busy time alone
    (timing.bounded_event_spans). max(x, busy) is monotone, so the new median is the stored
    event-time median raised to the busy time: exact for an odd sample count and, for an
    even one, unless the busy time falls between the two middle samples (host-bound forwards'
    busy time is a fraction of their event time). The spread is not stored: p10 and p90 are
    kept where the old bound did not reach them, else set to the median; mean and rse are
    the old samples'. Marked `rederived` with what it came from."""
    timing = dict(raw.get("timing") or {})
    if not timing.get("measured") or timing.get("span_measured_by") != "events":
        return {**raw, "carried_from": source}  # scored by the profiled span: unchanged
    wall, busy, span = wall_time_s(timing), timing["busy_median_s"], timing["span_median_s"]
    median = max(wall, busy)
    capped = span * (1 - 1e-9)
    timing.update(
        median_s=median,
        p10_s=max(timing["p10_s"], busy) if timing["p10_s"] < capped else median,
        p90_s=max(timing["p90_s"], busy, median) if timing["p90_s"] < capped else median)
    # the portal computes the attainment from median_s, as for any report
    return {**raw, "timing": timing, "carried_from": source,
            "rederived": {"old_median_s": raw["timing"]["median_s"],
                          "rule": f"max({WALL_KEY}, busy_median_s)",
                          "approximate": ["p10_s", "p90_s", "mean_s", "rse"]}}


def stored_summary(state: Path, like: dict[str, Any]) -> dict[str, Any]:
    """What a state folder's database holds, read here (no GPU, no workers): for a run the
    host's time limit cut off before it wrote its JSON. Device and torch as in `like`, the
    JSON of an earlier run on the same host."""
    os.environ.update(DATABASE_URL=f"sqlite:///{state.resolve() / 'db.sqlite3'}",
                      DJANGO_SETTINGS_MODULE="portal.settings")
    import django

    django.setup()
    from evaluation.catalog.models import Release

    release = Release.objects.order_by("-pk").first()
    assert release is not None
    report = summary(release, 0.0, True)
    report.update(device=like["device"], torch=like["torch"], date=like["date"])
    return report


def progress_line() -> str:
    from submissions.models import EvaluationJob, ShapeResult

    ended = EvaluationJob.objects.exclude(status__in=("queued", "running")).count()
    running = EvaluationJob.objects.filter(status="running").values_list(
        "candidate__operator__name", flat=True)
    return (f"{time.strftime('%H:%M:%S')} jobs ended {ended}/{EvaluationJob.objects.count()}, "
            f"shape results {ShapeResult.objects.count()}, running: {', '.join(running) or '-'}")


def summary(release: Any, seconds: float, resumed: bool) -> dict[str, Any]:
    """What the portal stored, per operator, and the baseline row's score."""
    from leaderboard.models import SubmissionScore
    from leaderboard.services import rescore_submission
    from submissions.models import EvaluationJob, ShapeResult, Submission

    submission = Submission.objects.get(release=release, baseline=Submission.Baseline.PYTORCH)
    # The results worker rescores when a job ends, as a task of its own; the workers are
    # stopped now, so the last one may not have run: score what is stored, here.
    rescore_submission(submission)
    operators = {}
    for job in EvaluationJob.objects.filter(candidate__submission=submission).select_related(
            "candidate__operator").order_by("candidate__operator__name"):
        results = list(ShapeResult.objects.filter(job=job, attempt=job.attempts)
                       .select_related("shape"))
        attainments = [(r.attainment or 0.0) if r.status == "passed" else 0.0 for r in results]
        operators[job.candidate.operator.name] = {
            "status": job.status, "shapes_total": job.shapes_total, "evaluated": len(results),
            "passed": sum(r.status == "passed" for r in results),
            "timed": sum(r.median_s is not None for r in results),
            "s_op": statistics.median(attainments) if job.status == "scored" and attainments
            else None,
            "failed": [{"shape": r.shape.shape_id, "stage": r.failed_stage,
                        "error": (r.error or "")[:300]} for r in results if r.status != "passed"],
            "seconds": sum(float(r.raw.get("seconds") or 0.0) for r in results),
            "launched": ", ".join(f"{method} {n}" for method, n in sorted(Counter(
                r.launch_method for r in results if r.launch_method).items())),
            "carried_from": next((r.raw["carried_from"] for r in results
                                  if r.raw.get("carried_from")), None),
            "rederived": sum(bool(r.raw.get("rederived")) for r in results),
            "error": job.error[:300]}
    score = SubmissionScore.objects.filter(submission=submission,
                                           weight_set__active=True).first()
    hidden = getattr(release, "hidden", None)
    return {"release": str(release), "seconds": seconds, "resumed": resumed,
            "date": time.strftime("%Y-%m-%d"), "operators": operators,
            "weights": dict(score.weight_set.weights) if score else {},
            # the release's own importance scores, before the portal normalises them over
            # its operators
            "importance": {op: entry["importance_score"]
                           for op, entry in (hidden.importance if hidden else {}).items()},
            "score": {"aggregate": score.aggregate, "unweighted_mean": score.unweighted_mean,
                      "complete": score.complete, "by_operator": score.by_operator,
                      "correctness_rate": score.correctness_rate} if score else None}


def render(report: dict[str, Any], previous: dict[str, Any] | None = None) -> str:
    """The doc section: per operator S_op as the portal stores it, how its shapes were
    measured, and (from `previous`, an earlier run's JSON) the S_op that run stored."""
    operators = report["operators"]
    weights = report.get("weights") or {}
    score = report.get("score") or {}
    by_operator = score.get("by_operator") or {}
    old_score = (previous or {}).get("score") or {}
    old_by_operator = old_score.get("by_operator") or {}
    ended = [op for op in operators.values() if op["status"] not in ("queued", "running")]
    shapes = sum(op["shapes_total"] for op in operators.values())
    carried = [name for name, op in operators.items() if op.get("carried_from")]
    lines = [SECTION, "",
             f"Written by `benchmarks/public_baseline.py` on {report['device']} (torch "
             f"{report['torch']}), {report['date']}: the release's own references "
             "(`reference.py`, eager PyTorch) submitted by `evaluate_baselines --kinds pytorch` "
             "and evaluated by a GPU worker of the portal's real stack (results worker, GPU "
             f"worker from the bundle, SQLite, filesystem broker), every shape of {report['release']} "
             f"as imported ({len(operators)} operators, {shapes} shapes). {len(ended)} of "
             f"{len(operators)} operator jobs ended; S_op and S_agg as the "
             "portal stores them for the baseline row, one submission (a failed shape scores 0; "
             "fallbacks count for a baseline). The scored time is the device span of one "
             "forward in either launch mode." + (
                 f" Nothing was evaluated in this run: the portal stored and scored the carried "
                 f"results on {report['derived_on']}." if report.get("derived_on") else ""), ""]
    rederived = [name for name, op in operators.items() if op.get("rederived")]
    graph_carried = [name for name in carried if name not in rederived]
    if graph_carried:
        lines += [f"{len(graph_carried)} operators were graph-captured on every shape in the run "
                  f"of {carried_release(operators)}: their scored time, the span of the replay, "
                  "is what the timing definition still scores, so their stored results were "
                  "reported to the portal again (`--carry-from`) instead of evaluated again; "
                  "\"how\" says which.", ""]
    if rederived:
        shapes_rederived = sum(operators[name]["rederived"] for name in rederived)
        lines += [f"{len(rederived)} eager operators ({shapes_rederived} shapes) were re-derived "
                  "from the same run (`--rederive-eager`): each shape's scored median is its "
                  "stored uninstrumented event-time median raised to its profiled busy time, "
                  "the rule without the old upper bound (the profiled span of other calls); "
                  "the portal stored and scored them as reports.", ""]
    header = "| operator | weight | shapes | passed | timed | launched | S_op | how |"
    rule = "| --- | ---: | ---: | ---: | ---: | --- | ---: | --- |"
    if previous is not None:
        header, rule = header + " S_op before |", rule + " ---: |"
    lines += [header, rule]
    for name, op in sorted(operators.items(), key=lambda kv: -weights.get(kv[0], 0.0)):
        s_op = by_operator.get(name) if op["status"] not in ("queued", "running") else None
        how = f"re-derived ({op['rederived']} shapes)" if op.get("rederived") else \
            "carried over" if op.get("carried_from") else f"evaluated {report['date']}"
        row = (f"| {name} | {weights.get(name, 0.0):.3f} | {op['shapes_total']} | "
               f"{op['passed']} | {op['timed']} | {op.get('launched') or '–'} | "
               f"{s_op_text(s_op)} | {how if op['status'] == 'scored' else op['status']} |")
        if previous is not None:
            before = old_by_operator.get(name)
            row += f" {s_op_text(before) if before is not None else 'not run'} |"
        lines.append(row)
    aggregate = score.get("aggregate")
    if aggregate is not None and score.get("complete") and len(ended) == len(operators):
        lines += ["", f"S_agg over its {len(operators)} operators (release weights): "
                      f"**{aggregate:.4f}**"]
    else:
        unfinished = [name for name, op in operators.items() if op not in ended]
        share = sum(weights.get(name, 0.0) for name in unfinished)
        lines += ["", f"**No S_agg yet**: {len(unfinished)} operator jobs, {share:.0%} of the "
                      "weight, had not ended when the run's deadline came (queued, or cut off "
                      "while running: that one starts again from its first shape). A run on the "
                      "same state folder goes on from there and rewrites this section."]
    failed = [(name, f) for name, op in sorted(operators.items()) for f in op["failed"]]
    if failed:
        lines += ["", "Shapes that failed (scored 0):", "", "| operator | shape | stage | error |",
                  "| --- | --- | --- | --- |"]
        lines += [f"| {name} | {f['shape']} | {f['stage']} | {f['error'][:160].replace('|', '/')} |"
                  for name, f in failed]
    return "\n".join(lines) + "\n"


def carried_release(operators: dict[str, Any]) -> str:
    sources = sorted({str(op["carried_from"]).split(",")[0] for op in operators.values()
                      if op.get("carried_from")})
    return ", ".join(sources)


def s_op_text(s_op: float | None) -> str:
    """Four decimals; the few S_op below 0.001 (index-sorting references) in two figures."""
    if s_op is None:
        return "–"
    return f"{s_op:.4f}" if s_op >= 0.001 or s_op == 0 else f"{s_op:.1e}"


def write_section(text: str, doc: Path = DOC) -> None:
    """Replace (or append) this section of docs/baselines.md, up to the next '## ' heading."""
    current = doc.read_text() if doc.exists() else ""
    start = current.find(SECTION)
    if start < 0:
        doc.write_text(current.rstrip("\n") + "\n\n" + text)
        return
    end = current.find("\n## ", start + len(SECTION))
    doc.write_text(current[:start] + text + (current[end:] if end >= 0 else ""))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--release", type=Path)
    parser.add_argument("--state", type=Path)
    parser.add_argument("--deadline-s", type=float, default=500)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--carry-from", type=Path, metavar="OLD_DB",
                        help="first run: an earlier run's database whose graph-timed results of "
                             "unchanged operators are stored instead of evaluated again")
    parser.add_argument("--rederive-eager", action="store_true",
                        help="with --carry-from: carry eager operators too, their scored time "
                             "re-derived from the stored event and busy times (rederived())")
    parser.add_argument("--evaluate-again", default="", metavar="OP,OP",
                        help="with --carry-from: operators evaluated again, never carried")
    parser.add_argument("--measured-on", type=Path, metavar="RUN_JSON",
                        help="with --carry-from and nothing evaluated: the device and torch of "
                             "the run whose results were carried (its JSON)")
    parser.add_argument("--render", type=Path, help="the JSON of a run: write its doc section")
    parser.add_argument("--previous", type=Path, metavar="RUN_JSON",
                        help="with --render: an earlier run's JSON, its S_op shown beside")
    parser.add_argument("--stored", type=Path, metavar="RUN_JSON",
                        help="no run: summarise --state's database into --json, with the "
                             "device and torch of this earlier run's JSON")
    args = parser.parse_args()
    if args.render:
        previous = json.loads(args.previous.read_text()) if args.previous else None
        write_section(render(json.loads(args.render.read_text()), previous))
        print(f"wrote {DOC}")
        return 0
    if args.stored:
        if args.state is None or args.json is None:
            parser.error("--stored needs --state and --json")
        report = stored_summary(args.state, json.loads(args.stored.read_text()))
        args.json.write_text(json.dumps(report, indent=1, default=str) + "\n")
        print(render(report))
        return 0
    if args.state is None or (args.release is None and not (args.state / "db.sqlite3").exists()):
        parser.error("--state, and --release for a first run")
    report = run(args)
    if args.measured_on is not None:  # re-derived here from a GPU run's stored results
        like = json.loads(args.measured_on.read_text())
        report.update(device=like["device"], torch=like["torch"],
                      derived_on=f"{report['device']} (torch {report['torch']})")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, default=str) + "\n")
    print(render(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
