"""What a team needs to iterate on its kernels (issue 17): one operator's scores across the
team's submissions, oldest to newest, and two submissions compared shape by shape with the
source diff of each operator's candidate.

Selectors only: callers decide who may see what (`submissions.visibility.visible_submission`
for a comparison; a history is always the acting team's own). S_op is read from the stored,
weight-independent summaries (`ScoreSummary`), so it is the number every board uses.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from django.db.models import F

from evaluation.catalog.models import HardwareProfile, Release
from leaderboard.models import ScoreSummary
from leaderboard.submission_scores import active_weights_score
from portal.accounts.models import Team
from submissions.models import Candidate, EvaluationJob, ShapeResult, Submission
from submissions.selectors import submission_outcomes

HISTORY_LIMIT = 200  # the newest entries a history shows (oldest first)
# difflib's matcher is quadratic in the worst case: a larger candidate gets no diff, only a note.
MAX_DIFF_LINES = 5000
_SHAPE_FIELDS = ("status", "verdict", "median_s", "attainment", "dsl_ratio", "suspicious")


def operator_history(*, team: Team, operator: str, release: Release | None = None,
                     hardware: HardwareProfile | None = None,
                     limit: int = HISTORY_LIMIT) -> dict[str, Any]:
    """The team's submissions that included `operator`, oldest to newest (the newest `limit`).

    Each entry: the operator's job status, S_op, correctness and DSL adoption over the
    latest attempt's shapes, verdict counts, the entry before it (`previous`) and whether
    the source changed since; `mode` (ranked or check) and `interpreter` (run in Triton's
    interpreter: nothing timed) mark what no board ranks. Baselines (the portal's own
    reference runs) are left out.
    """
    jobs = (EvaluationJob.objects
            .filter(candidate__submission__team=team, candidate__operator__name=operator,
                    candidate__submission__baseline=Submission.Baseline.NONE)
            .select_related("candidate__submission__release", "candidate__submission__hardware")
            .order_by("-candidate__submission__created_at", "-candidate__submission_id"))
    if release is not None:
        jobs = jobs.filter(candidate__submission__release=release)
    if hardware is not None:
        jobs = jobs.filter(candidate__submission__hardware=hardware)
    newest = list(jobs[:limit + 1])
    chosen = list(reversed(newest[:limit]))
    counts = _shape_counts(job.pk for job in chosen)
    s_op = _operator_scores([job.candidate.submission_id for job in chosen], operator)
    entries: list[dict[str, Any]] = []
    for job in chosen:
        submission = job.candidate.submission
        previous = entries[-1] if entries else None
        tally = counts.get(job.pk, _no_counts())
        entries.append({**_submission_ref(submission),
                        "status": outcome_status(job.status, tally["correct"]),
                        "interpreter": job.mode == EvaluationJob.Mode.INTERPRETER,
                        "s_op": s_op.get(submission.pk), "shapes_total": job.shapes_total,
                        **tally, "sha256": job.candidate.sha256,
                        "previous": previous["submission"] if previous else None,
                        "source_changed": previous is None
                        or previous["sha256"] != job.candidate.sha256})
    return {"team": team.name, "operator": operator, "entries": entries,
            "best": best_entry(entries), "truncated": len(newest) > limit}


def best_entry(entries: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The history's best entry, in the board's order: the higher S_op, then the higher share
    of correct shapes, then the newer. "Not timed" (a CPU check) is no score, not 0: a
    correct untimed entry beats one whose every shape failed, and one with no correct shape
    is never the best."""
    correct = [e for e in entries if e["correct"] > 0]
    return max(correct, key=lambda e: (e["s_op"] or 0.0, e["correct"] / max(e["shapes_total"], 1),
                                       e["created_at"]), default=None)


def history_targets(team: Team, operator: str) -> list[dict[str, Any]]:
    """The (release, hardware) pairs the team submitted `operator` for: a history's filters."""
    pairs = (Submission.objects.filter(team=team, candidates__operator__name=operator)
             .values_list("release_id", "release__name", "release__version", "hardware__name")
             .distinct().order_by("release__name", "-release__version", "hardware__name"))
    return [{"release": pk, "label": f"{name} v{version}", "hardware": hw}
            for pk, name, version, hw in pairs]


def submission_compare(a: Submission, b: Submission) -> dict[str, Any]:
    """Two submissions side by side: B against A (deltas are B − A; speedup is time A / time B).

    Per operator (of either): both S_op and their delta, both job statuses, and the unified
    diff from A's candidate to B's; per shape (matched by operator and shape id): both
    times, attainments and verdicts, and the deltas.
    """
    pair = (a, b)
    candidates = {(c.submission_id, c.operator.name): c for c in
                  Candidate.objects.filter(submission__in=pair)
                  .select_related("operator", "job")}
    shapes = _shape_rows(pair)
    s_op = {s.pk: _summary_scores(s) for s in pair}
    operators = sorted({name for _, name in candidates})
    return {
        "a": _compare_side(a, s_op[a.pk]), "b": _compare_side(b, s_op[b.pk]),
        "same_target": a.release_id == b.release_id and a.hardware_id == b.hardware_id,
        "operators": [_compare_operator(name, a, b, candidates, shapes, s_op)
                      for name in operators],
    }


def unified_diff(before: str, after: str, before_name: str, after_name: str) -> str:
    """The unified diff from one source to another ("" when they are the same)."""
    old, new = before.splitlines(), after.splitlines()
    if len(old) > MAX_DIFF_LINES or len(new) > MAX_DIFF_LINES:
        return f"(not shown: a source has more than {MAX_DIFF_LINES} lines)"
    return "\n".join(difflib.unified_diff(old, new, before_name, after_name, lineterm=""))


def diff_lines(diff: str) -> list[tuple[str, str]]:
    """A unified diff's lines with their kind (file, hunk, add, del, context), for display."""
    kinds = []
    for line in diff.splitlines():
        if line.startswith(("+++", "---")):
            kind = "file"
        elif line.startswith("@@"):
            kind = "hunk"
        else:
            kind = {"+": "add", "-": "del"}.get(line[:1], "context")
        kinds.append((kind, line))
    return kinds


def _submission_ref(submission: Submission) -> dict[str, Any]:
    return {"submission": submission.pk, "created_at": submission.created_at,
            "release": {"id": submission.release_id, "name": submission.release.name,
                        "version": submission.release.version},
            "hardware": submission.hardware.name, "agent": submission.agent,
            "model": submission.model_name, "mode": submission.mode}


def _no_counts() -> dict[str, Any]:
    return {"shapes_evaluated": 0, "correct": 0, "native": 0, "suspicious": 0,
            "correctness_rate": None, "dsl_adoption_rate": None, "verdicts": {}}


def _shape_counts(job_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
    """Per job, over its latest attempt's results: how many shapes were correct, native and
    suspicious, and each verdict's count (a failed shape counts as its status)."""
    rows: dict[int, list[tuple[str, str, bool]]] = {}
    for job_id, status, verdict, suspicious in (
            ShapeResult.objects.filter(job__in=list(job_ids), attempt=F("job__attempts"))
            .values_list("job_id", "status", "verdict", "suspicious")):
        rows.setdefault(job_id, []).append((status, verdict, suspicious))
    counts = {}
    for job_id, results in rows.items():
        correct = sum(status == "passed" for status, _, _ in results)
        native = sum(status == "passed" and verdict == "native" for status, verdict, _ in results)
        counts[job_id] = {
            "shapes_evaluated": len(results), "correct": correct, "native": native,
            "suspicious": sum(s for _, _, s in results),
            "correctness_rate": correct / len(results), "dsl_adoption_rate": native / len(results),
            "verdicts": dict(sorted(Counter(verdict if status == "passed" and verdict else status
                                            for status, verdict, _ in results).items())),
        }
    return counts


def _operator_scores(submission_ids: Sequence[int], operator: str) -> dict[int, float | None]:
    return {pk: (summary.get("by_operator") or {}).get(operator) for pk, summary in
            ScoreSummary.objects.filter(submission_id__in=submission_ids)
            .values_list("submission_id", "summary")}


def _summary_scores(submission: Submission) -> dict[str, float | None]:
    summary = (ScoreSummary.objects.filter(submission=submission)
               .values_list("summary", flat=True).first())
    return dict((summary or {}).get("by_operator") or {})


def _compare_side(submission: Submission, s_op: dict[str, float | None]) -> dict[str, Any]:
    score = active_weights_score(submission)
    jobs = EvaluationJob.objects.filter(candidate__submission=submission)
    return {**_submission_ref(submission), "team": submission.team.name,
            "status": submission_outcomes([submission.pk])[submission.pk]["status"],
            "interpreter": jobs.filter(mode=EvaluationJob.Mode.INTERPRETER).exists(),
            "aggregate": score.aggregate if score else None,
            "weights_version": score.weight_set.version if score else None,
            "by_operator": s_op}


def _shape_rows(pair: Sequence[Submission]) -> dict[tuple[int, str], list[dict[str, Any]]]:
    """Per (submission, operator), the latest attempt's results in shape order."""
    grouped: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for submission_id, operator, shape_id, *values in (
            ShapeResult.objects
            .filter(job__candidate__submission__in=pair, attempt=F("job__attempts"))
            .order_by("shape__position")
            .values_list("job__candidate__submission_id", "job__candidate__operator__name",
                         "shape__shape_id", *_SHAPE_FIELDS)):
        grouped.setdefault((submission_id, operator), []).append(
            {"shape_id": shape_id, **dict(zip(_SHAPE_FIELDS, values, strict=True))})
    return grouped


def _compare_operator(name: str, a: Submission, b: Submission,
                      candidates: dict[tuple[int, str], Candidate],
                      shapes: dict[tuple[int, str], list[dict[str, Any]]],
                      s_op: dict[int, dict[str, float | None]]) -> dict[str, Any]:
    ours, theirs = candidates.get((a.pk, name)), candidates.get((b.pk, name))
    score_a, score_b = s_op[a.pk].get(name), s_op[b.pk].get(name)
    rows_a = {r["shape_id"]: r for r in shapes.get((a.pk, name), [])}
    rows_b = {r["shape_id"]: r for r in shapes.get((b.pk, name), [])}
    order = list(rows_a) + [shape for shape in rows_b if shape not in rows_a]
    return {
        "operator": name,
        "a": _candidate_side(ours, score_a, list(rows_a.values())),
        "b": _candidate_side(theirs, score_b, list(rows_b.values())),
        "s_op_delta": _delta(score_a, score_b),
        "source_changed": (ours.sha256 if ours else None) != (theirs.sha256 if theirs else None),
        "diff": unified_diff(ours.source if ours else "", theirs.source if theirs else "",
                             f"#{a.pk}/{name}.py", f"#{b.pk}/{name}.py"),
        "shapes": [_compare_shape(shape, rows_a.get(shape), rows_b.get(shape)) for shape in order],
    }


def _candidate_side(candidate: Candidate | None, s_op: float | None,
                    shapes: list[dict[str, Any]]) -> dict[str, Any] | None:
    if candidate is None:
        return None
    job = getattr(candidate, "job", None)
    correct = sum(row["status"] == "passed" for row in shapes)
    return {"status": outcome_status(job.status, correct) if job else "empty", "s_op": s_op,
            "sha256": candidate.sha256}


def outcome_status(job_status: str, correct: int) -> str:
    """A job's status as a team reads it: "scored" only when some shape was correct; a job
    that ended with none is "failed" (as a submission's outcome says), never a green
    "scored" over 0 of N correct."""
    return "failed" if job_status == EvaluationJob.Status.SCORED and not correct else job_status


def _compare_shape(shape_id: str, a: dict[str, Any] | None,
                   b: dict[str, Any] | None) -> dict[str, Any]:
    def side(row: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if row is None else {k: row[k] for k in _SHAPE_FIELDS}

    time_a, time_b = (a or {}).get("median_s"), (b or {}).get("median_s")
    return {
        "shape_id": shape_id, "a": side(a), "b": side(b),
        "median_s_delta": _delta(time_a, time_b),
        "speedup": time_a / time_b if time_a and time_b else None,
        "attainment_delta": _delta((a or {}).get("attainment"), (b or {}).get("attainment")),
        "verdict_changed": a is not None and b is not None and
        (a["status"], a["verdict"]) != (b["status"], b["verdict"]),
    }


def _delta(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else b - a
