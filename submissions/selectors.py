"""Reads of submissions, shaped by who asks (a Viewer): a team sees its own, admins see all.
A submission the viewer may not see is None, whether it exists or not; views answer 404."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import Count, F, Q, QuerySet

from evaluation.catalog.capability import Capability
from evaluation.catalog.models import HardwareProfile, Release
from evaluation.catalog.selectors import newest_versions
from portal.accounts.models import Team
from portal.accounts.viewer import Viewer
from portal.audit.models import AuditEntry
from submissions.models import (
    MODE_CHECK,
    MODE_RANKED,
    Candidate,
    EvaluationJob,
    ShapeResult,
    Submission,
)

PUBLIC_RESULT_FIELDS = ("status", "stage_reached", "failed_stage", "error", "max_abs_error",
                        "max_rel_error", "verdict", "dsl_ratio", "median_s", "p10_s", "p90_s",
                        "samples", "launch_method", "wall_time_s", "attainment",
                        "attainment_with_floor", "suspicious")
ADMIN_RESULT_FIELDS = ("sol_s",)  # derived from the hidden roofline


def submissions_visible(viewer: Viewer) -> QuerySet[Submission]:
    base = Submission.objects.select_related("team", "release", "hardware")
    if viewer.admin:
        return base
    return base.filter(team=viewer.team) if viewer.team is not None else base.none()


def submission_visible(viewer: Viewer, pk: int) -> Submission | None:
    return submissions_visible(viewer).filter(pk=pk).first()


def recent_submissions(viewer: Viewer, limit: int = 50) -> list[dict[str, Any]]:
    """The newest submissions `viewer` may see, each with its outcome (the views add its
    score: leaderboard.submission_scores.with_active_aggregates)."""
    submissions = list(submissions_visible(viewer).order_by("-created_at")[:limit])
    outcomes = submission_outcomes(s.pk for s in submissions)
    return [{"submission": s, "outcome": outcomes[s.pk]} for s in submissions]


def submission_detail(submission: Submission, *, admin: bool) -> dict[str, Any]:
    """A submission with its jobs and their latest results; `admin` adds the numbers derived
    from the hidden roofline."""
    jobs = list(EvaluationJob.objects.filter(candidate__submission=submission)
                .select_related("candidate__operator").order_by("candidate__operator__name"))
    # Every job's latest-attempt results in one query of plain rows (a submission can hold
    # hundreds), not one query of model instances per job.
    fields = PUBLIC_RESULT_FIELDS + (ADMIN_RESULT_FIELDS if admin else ())
    results: dict[int, list[dict[str, Any]]] = {job.pk: [] for job in jobs}
    for job_id, shape_id, adoption, *values in (
            ShapeResult.objects
            .filter(job__candidate__submission=submission, attempt=F("job__attempts"))
            .order_by("shape__position")
            .values_list("job_id", "shape__shape_id", "raw__adoption", *fields)):
        results[job_id].append({"shape_id": shape_id, **dict(zip(fields, values, strict=True)),
                                **_fallback_evidence(adoption)})
    tallies = [JobTally(status=job.status, mode=job.mode,
                        infrastructure_failure=job.infrastructure_failure,
                        shapes=public_shapes_total(job), evaluated=len(results[job.pk]),
                        correct=sum(r["status"] == "passed" for r in results[job.pk]),
                        native=sum(r["status"] == "passed" and r["verdict"] == "native"
                                   for r in results[job.pk]))
               for job in jobs]
    return {
        "id": submission.pk, "team": submission.team.name,
        "release": {"id": submission.release_id, "name": submission.release.name,
                    "version": submission.release.version},
        "hardware": submission.hardware.name, "agent": submission.agent,
        "model": submission.model_name, "output_tokens": submission.output_tokens,
        "harness": submission.harness, "input_tokens": submission.input_tokens,
        "notes": submission.notes, "created_at": submission.created_at.isoformat(),
        "mode": submission.mode,
        "status": submission_status(jobs),
        "outcome": submission_outcome(tallies, check=submission.is_check),
        "jobs": [job_detail(job, results[job.pk], queue.get(job.pk), hidden.get(job.pk),
                            admin=admin)
                 for queue in [queue_places(jobs, submission.hardware_id)]
                 for hidden in [hidden_tallies(jobs)] for job in jobs],
    }


def team_operators(team: Team) -> list[str]:
    """The names of the operators the team has submitted, for links to their histories."""
    return sorted(set(Candidate.objects.filter(submission__team=team)
                      .values_list("operator__name", flat=True)))


def compare_choices(submissions: Iterable[Submission], submission: Submission,
                    count: int = 5) -> list[Submission]:
    """What the submission page offers to compare with: the newest others of its team, those
    on the same release and hardware first."""
    others = [s for s in submissions if s.pk != submission.pk and s.team_id == submission.team_id]
    same = [s for s in others if (s.release_id, s.hardware_id) ==
            (submission.release_id, submission.hardware_id)]
    return (same + [s for s in others if s not in same])[:count]


def iteration_links(viewer: Viewer, submission: Submission) -> dict[str, Any]:
    """The submission page's links into the iteration pages: compare with the team's other
    submissions; each operator's history, for the team only (a history is always the
    viewer's own team's)."""
    own = viewer.team == submission.team
    recent = (submissions_visible(viewer).filter(team=submission.team)
              .order_by("-created_at"))
    return {"operators": sorted(submission.candidates.values_list("operator__name", flat=True))
            if own else [],
            "choices": compare_choices(recent[:50], submission)}


def public_shapes_total(job: EvaluationJob) -> int:
    """The public shapes a job covers (its shapes_total counts the hidden ones too)."""
    return job.shapes_total - len(job.hidden_shape_ids or ())


def hidden_tallies(jobs: Sequence[EvaluationJob]) -> dict[int, dict[str, Any]]:
    """Per job with hidden shapes, all a team learns of them: how many, how many reported,
    how many passed (never which, nor anything a result of one holds), and whether they are
    held (running, or ended and not released: nothing of them is counted until then)."""
    counted: dict[int, dict[str, Any]] = {
        job.pk: {"shapes": len(job.hidden_shape_ids), "evaluated": 0, "passed": 0,
                 "held": job.hidden_tier_held}
        for job in jobs if job.hidden_shape_ids}
    for job_id, status, n in (ShapeResult.every_tier
                              .filter(job__in=list(counted), attempt=F("job__attempts"),
                                      shape__hidden=True)
                              .values("job_id", "status").annotate(n=Count("id"))
                              .values_list("job_id", "status", "n")):
        counted[job_id]["evaluated"] += n
        if status == "passed":
            counted[job_id]["passed"] += n
    return counted


RECENT_JOBS = 20  # finished jobs whose median duration estimates a wait


def queue_places(jobs: Sequence[EvaluationJob], hardware_id: int) -> dict[int, dict[str, Any]]:
    """Where each queued job of `jobs` stands in its hardware's queue, and when it may start.

    Ahead of it: the jobs for the same hardware queued before it (the broker hands them out
    in order), every waiting team job if it is a low-priority one (a baseline's, an admin's
    re-run: workers take those last), and the jobs running now. The estimate is the median
    duration of the last RECENT_JOBS finished jobs on that hardware times the rounds the
    workers seen running now need to get through the jobs ahead; None without such history.
    """
    queued = [job for job in jobs if job.status == EvaluationJob.Status.QUEUED]
    if not queued:
        return {}
    same_hardware = EvaluationJob.objects.filter(candidate__submission__hardware_id=hardware_id)
    running = list(same_hardware.filter(status=EvaluationJob.Status.RUNNING)
                   .values_list("worker", flat=True))
    workers = len({w for w in running if w}) or 1
    finished = (same_hardware.filter(status=EvaluationJob.Status.SCORED,
                                     started_at__isnull=False, finished_at__isnull=False)
                .order_by("-finished_at").values_list("started_at", "finished_at")
                [:RECENT_JOBS])
    durations = sorted((end - start).total_seconds() for start, end in finished
                       if start is not None and end is not None)
    median = durations[len(durations) // 2] if durations else None
    places: dict[int, dict[str, Any]] = {}
    for job in queued:
        waiting = same_hardware.filter(status=EvaluationJob.Status.QUEUED)
        if job.low_priority:  # behind every waiting team job, and the low ones before it
            before = waiting.filter(Q(low_priority=False) | Q(pk__lt=job.pk)).count()
        else:  # low-priority jobs wait for it
            before = waiting.filter(low_priority=False, pk__lt=job.pk).count()
        ahead = before + len(running)
        rounds = -(-ahead // workers)  # ceil: the workers take the jobs ahead in rounds
        places[job.pk] = {
            "position": before + 1, "queued_ahead": before, "running": len(running),
            "estimated_start_s": None if median is None else round(rounds * median, 1),
            "estimate_basis": (f"median of the last {len(durations)} finished jobs on this "
                               f"hardware ({median:.0f} s), {workers} worker(s) seen running")
            if median is not None else "no finished job on this hardware yet",
        }
    return places


def _fallback_evidence(adoption: Any) -> dict[str, Any]:
    """What ran besides the candidate's own DSL kernels, as the harness recorded it: foreign
    kernels (name, category, launches; device time on a GPU) and aten compute ops."""
    adoption = adoption if isinstance(adoption, dict) else {}
    kernels = [{"name": str(k.get("name", "")), "category": str(k.get("category", "")),
                "count": int(k.get("count") or 0),
                **({"dsl": str(k["dsl"])} if k.get("dsl") else {})}
               for k in adoption.get("foreign_kernels") or [] if isinstance(k, dict)]
    ops = adoption.get("aten_compute_ops") or {}
    return {"foreign_kernels": kernels,
            "aten_compute_ops": {str(op): int(n) for op, n in ops.items()}
            if isinstance(ops, dict) else {}}


@dataclass(frozen=True)
class JobTally:
    """One job's state and the counts of its latest attempt's shape results."""

    status: str
    mode: str
    infrastructure_failure: bool
    shapes: int  # the shapes the job covers
    evaluated: int  # of them, those reported
    correct: int  # passed: compiled and correct
    native: int  # correct and run by the candidate's own DSL kernels


def submission_outcome(jobs: Sequence[JobTally], *, check: bool = False) -> dict[str, Any]:
    """What happened to a submission, in shapes, for teams and their scripts.

    `status` is the submission's job status refined by its results: "scored" only when some
    shape was correct; "failed" when every job ended and none was; "cancelled" or "lost" (an
    infrastructure failure) when they ended before any shape was evaluated; "queued",
    "running" and "empty" as the submission's status. `interpreter` marks a run in Triton's
    CPU interpreter: a check, not a verdict on the kernel. `check` marks a submission made
    in check mode (evaluated, never ranked). `summary` says it in one line, e.g. "failed: 0
    of 14 shapes correct".
    """
    shapes, evaluated = sum(j.shapes for j in jobs), sum(j.evaluated for j in jobs)
    correct, native = sum(j.correct for j in jobs), sum(j.native for j in jobs)
    status = submission_status(jobs)
    going = status in EvaluationJob.Status.active()
    if jobs and not going:  # every job ended: the results say what happened
        status = ("scored" if correct else
                  "failed" if evaluated or any(j.status == EvaluationJob.Status.FAILED
                                               and not j.infrastructure_failure for j in jobs)
                  else "lost" if any(j.infrastructure_failure for j in jobs) else "cancelled")
    # an interpreter check's verdicts are stored as unverified, never native: no count
    interpreter = any(j.mode == "cpu-interpreter" for j in jobs)
    if going:
        summary = f"{status}: {evaluated} of {shapes} shapes evaluated" + (
            f", {correct} correct so far" if evaluated else "")
    elif status == "empty":
        summary = "empty: no operator submitted"
    else:
        summary = f"{status}: {correct} of {shapes} shapes correct"
        if correct and native < correct and not interpreter:
            summary += f", {native} native"
        if evaluated < shapes:
            summary += f", {shapes - evaluated} not evaluated"
        if status == "lost":
            summary += " (infrastructure failure)"
    marks = [mark for mark, on in (("check mode", check), ("interpreter check", interpreter))
             if on]
    if marks:
        summary += f" ({', '.join(marks)})"
    return {"status": status, "summary": summary, "shapes": shapes, "evaluated": evaluated,
            "correct": correct, "native": native, "interpreter": interpreter, "check": check}


def submission_outcomes(submission_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
    """`submission_outcome` of many submissions (a team's list) in one query."""
    # a join ignores ShapeResult's default manager: public results are asked for here
    latest = Q(results__attempt=F("attempts"), results__shape__hidden=False)
    tallies: dict[int, list[JobTally]] = {pk: [] for pk in submission_ids}
    checks = set(Submission.objects.filter(pk__in=list(tallies), mode=Submission.Mode.CHECK)
                 .values_list("pk", flat=True))
    for submission_id, *tally in (
            EvaluationJob.objects.filter(candidate__submission__in=list(tallies))
            .annotate(evaluated=Count("results", filter=latest),
                      correct=Count("results", filter=latest & Q(results__status="passed")),
                      native=Count("results", filter=latest & Q(results__status="passed",
                                                                results__verdict="native")))
            .values_list("candidate__submission_id", "status", "mode", "infrastructure_failure",
                         "shapes_total", "hidden_shape_ids", "evaluated", "correct", "native")):
        status, mode, infrastructure, total, hidden, evaluated, correct, native = tally
        tallies[submission_id].append(JobTally(status, mode, infrastructure,
                                               total - len(hidden or ()), evaluated, correct,
                                               native))
    return {pk: submission_outcome(jobs, check=pk in checks) for pk, jobs in tallies.items()}


def submission_status(jobs: Iterable[Any]) -> str:
    """A submission's status from its jobs' (each with a `status`): running while one runs,
    else queued while one waits, "empty" without jobs; once every job ended, failed when all
    failed, scored when one scored, else one of theirs. `submission_outcome` refines it."""
    statuses = {job.status for job in jobs}
    for status in (EvaluationJob.Status.RUNNING, EvaluationJob.Status.QUEUED):
        if status in statuses:
            return str(status)
    if statuses == {EvaluationJob.Status.FAILED}:
        return str(EvaluationJob.Status.FAILED)
    if EvaluationJob.Status.SCORED in statuses:
        return str(EvaluationJob.Status.SCORED)
    return str(next(iter(statuses), "empty"))


def job_progress(job: EvaluationJob, *, admin: bool) -> dict[str, Any]:
    """What a viewer may see of a job's progress: the one decision of what a team sees of a
    running job, for the pages (htmx polling), the API, the CLI and long polling alike.

    The stored state already holds the hidden tier back (submissions/jobs.py): until the
    release its shapes are not stored, `shapes_done` counts the public ones, the job stays
    running. What remains is the heartbeat, which goes on while the hidden shapes run (the
    sweeper's): a team sees it as it was when they began. An admin sees it all, and the
    hold (`hidden_tier`: when it began, its release time, when the worker really ended, how
    many hidden shapes have reported)."""
    heartbeat = job.heartbeat_at
    if job.hidden_tier_held and not admin:
        heartbeat = job.hidden_started_at
    progress: dict[str, Any] = {
        "status": job.status, "shapes_done": job.shapes_done, "shapes_total": job.shapes_total,
        "heartbeat_at": heartbeat.isoformat() if heartbeat else None,
    }
    if admin and job.hidden_started_at is not None:
        progress["hidden_tier"] = {
            "started_at": job.hidden_started_at.isoformat(),
            "release_at": job.release_at.isoformat() if job.release_at else None,
            "worker_ended_at": job.worker_ended_at.isoformat() if job.worker_ended_at else None,
            "reported": len(job.held.get("shapes", [])), "released": job.held.get("released",
                                                                                  False)}
    return progress


def job_detail(job: EvaluationJob, results: list[dict[str, Any]],
               queue: dict[str, Any] | None = None,
               hidden: dict[str, Any] | None = None, *, admin: bool = False) -> dict[str, Any]:
    """A job and its results (those of its latest attempt, in shape order, public shapes
    only); a queued job with its place in the queue (`queue_places`); the counts of its
    hidden shapes (`hidden_tallies`); its progress as `job_progress` lets the viewer see it."""
    return {
        "id": job.pk, "operator": job.candidate.operator.name, "dsl": job.candidate.dsl,
        "mode": job.mode, "attempts": job.attempts, **job_progress(job, admin=admin),
        "error": job.error, "source": job.candidate.source, "sha256": job.candidate.sha256,
        "queue": queue,
        "results": results,
        "hidden_shapes": hidden,
    }


def quarantined_results(*, include_reviewed: bool = False) -> list[dict[str, Any]]:
    """Suspicious shape results with the evidence an admin needs to judge them.

    Reviewed results are found through the audit log's "result.accept"/"result.reject"
    entries, so the page can show what was decided, by whom and when.
    """
    results = (ShapeResult.every_tier.filter(suspicious=True)  # admins review every tier
               .select_related("shape__operator__release", "job__candidate__submission__team",
                               "job__candidate__submission__hardware")
               .order_by("-pk"))
    rows = [_evidence(r) for r in results]
    if include_reviewed:
        reviewed = {int(e.target.split(":")[1]): e for e in
                    AuditEntry.objects.filter(action__in=("result.accept", "result.reject"))
                    .select_related("actor")}
        for result in ShapeResult.every_tier.filter(pk__in=list(reviewed)).select_related(
                "shape__operator__release", "job__candidate__submission__team",
                "job__candidate__submission__hardware"):
            entry = reviewed[result.pk]
            rows.append({**_evidence(result), "decision": entry.action.split(".")[1],
                         "decided_by": str(entry.actor or "–"), "decided_at": entry.at})
    return rows


def _evidence(result: ShapeResult) -> dict[str, Any]:
    raw = result.raw or {}
    adoption = raw.get("adoption") or {}
    submission = result.job.candidate.submission
    checks = []
    if result.attainment is not None and result.attainment > 1:
        checks.append(f"attainment {result.attainment:.2f} > 1: faster than the hardware's "
                      "speed of light")
    if result.wall_time_s and result.median_s and result.wall_time_s < 0.5 * result.median_s:
        # the wall time of a call holds its span: less than half of it means the two
        # passes did not time the same work
        checks.append("the wall time of a call is less than half its scored device span")
    checks += [str(n) for n in adoption.get("notes") or []]
    return {
        "pk": result.pk, "submission": submission.pk, "team": submission.team.name,
        "release": str(result.shape.operator.release), "hardware": submission.hardware.name,
        "operator": result.shape.operator.name, "shape": result.shape.shape_id,
        "median_us": result.median_s * 1e6 if result.median_s else None,
        "sol_us": result.sol_s * 1e6 if result.sol_s else None,
        "attainment": result.attainment, "samples": result.samples,
        "method": result.launch_method, "verdict": result.verdict,
        "dsl_ratio": result.dsl_ratio,
        "dsl_kernels": list(adoption.get("dsl_kernels") or []),
        "foreign_kernels": [f"{k.get('name')} ("
                            f"{'other DSL: ' + str(k['dsl']) if k.get('dsl') else k.get('category')})"
                            for k in adoption.get("foreign_kernels") or []],
        "checks": checks, "decision": None,
    }


@dataclass(frozen=True)
class ReleaseChoice:
    pk: int
    label: str  # "atrex-fixture v2 (newest)", "… v1 (superseded by v2)", "… (not evaluated here)"
    evaluable: bool  # it has shapes the jobs here evaluate
    operators: list[str]


@dataclass(frozen=True)
class HardwareChoice:
    name: str
    label: str  # "H200 (GPU: NVIDIA H200)", "H200 (CPU interpreter)", "H100 (no worker)"
    served: bool  # a live worker consumes its queue (or none announced: unknown)


@dataclass(frozen=True)
class UploadChoices:
    """What the upload form offers, marked and defaulted by what this portal evaluates."""

    releases: list[ReleaseChoice]
    hardware_choices: list[HardwareChoice]
    release: int | None  # the default release
    hardware: str  # the default hardware
    mode: str  # the default mode: a check where nothing can be ranked
    ranked_offered: bool  # some hardware has a GPU worker (or the workers are unknown)


def upload_choices(capability: Capability, *, release: str | None = None) -> UploadChoices:
    """The upload form's releases, hardware and mode: the newest version of each release
    marked, those with no shape evaluated here disabled, hardware without a live worker
    disabled; the defaults are what can run (`release` asked for by a link wins)."""
    newest = newest_versions()
    releases = []
    for r in Release.objects.order_by("name", "-version").prefetch_related("operators"):
        shapes = capability.evaluated_shapes(r.pk)
        state = ("newest" if newest[r.name] == r.version
                 else f"superseded by v{newest[r.name]}")
        label = f"{r.name} v{r.version} ({state}" + ("" if shapes else
                                                    "; not evaluated here") + ")"
        releases.append(ReleaseChoice(pk=r.pk, label=label, evaluable=bool(shapes),
                                      operators=sorted(op.name for op in r.operators.all())))
    hardware = []
    for name in HardwareProfile.objects.order_by("name").values_list("name", flat=True):
        if not capability.workers_known:
            hardware.append(HardwareChoice(name, name, True))
        elif name in capability.gpu:
            hardware.append(HardwareChoice(name, f"{name} (GPU: {capability.gpu[name]})", True))
        elif name in capability.interpreter:
            hardware.append(HardwareChoice(name, f"{name} (no GPU: Triton's CPU interpreter)",
                                           True))
        else:
            hardware.append(HardwareChoice(name, f"{name} (no worker)", False))
    asked = int(release) if release and release.isdigit() else None
    current = [r.pk for r in capability.current_releases]
    default_release = asked if any(r.pk == asked for r in releases) else \
        (current[0] if current else (releases[0].pk if releases else None))
    served = [h.name for h in hardware if h.served]
    # a GPU-served profile first; else the H200 (the profile recorded results are on), if served
    preferred = [*sorted(capability.gpu), *(["H200"] if "H200" in served else []), *served]
    default_hardware = next((h for h in preferred if any(c.name == h for c in hardware)),
                            hardware[0].name if hardware else "")
    return UploadChoices(releases=releases, hardware_choices=hardware, release=default_release,
                         hardware=default_hardware,
                         mode=MODE_RANKED if capability.anything_ranked else MODE_CHECK,
                         ranked_offered=capability.anything_ranked)
