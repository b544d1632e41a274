"""Writing submissions: validate, check quota, store in one transaction, dispatch on commit
(the jobs' life cycle from there on: submissions/jobs.py)."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Exists, OuterRef
from django.utils import timezone

from evaluation.baselines import baseline_source
from evaluation.catalog.capability import cannot_evaluate
from evaluation.catalog.models import HardwareProfile, Release
from evaluation.catalog.selectors import evaluated_hidden_shape_ids, evaluated_shape_ids
from portal.accounts.models import Team, signed_in
from portal.audit.models import audit
from portal.errors import DomainError
from submissions.jobs import dispatch_all, rescore_on_commit
from submissions.models import (
    MODE_CHECK,
    MODE_RANKED,
    Candidate,
    EvaluationJob,
    ShapeResult,
    Submission,
)
from submissions.upload import UploadLimits, UploadRejected, read_upload

# The largest value a PositiveBigIntegerField or BigAutoField holds: a larger number reaches
# the database driver as an overflow (a 500), so it is refused before.
MAX_BIG_INTEGER = 2**63 - 1
MAX_NOTES_CHARS = 10_000
MAX_METADATA_CHARS = 100  # agent, model: their columns' width


class QuotaExceeded(DomainError):
    """HTTP 429: the team has used its daily submissions or its concurrent evaluations."""

    http_status = 429


@dataclass(frozen=True)
class QuotaStatus:
    daily_limit: int
    used_today: int
    concurrent_limit: int
    active: int
    resets_at: datetime
    # Check submissions: their own daily allowance (they never enter a board).
    check_limit: int = 0
    checks_today: int = 0

    @property
    def remaining_today(self) -> int:
        return max(0, self.daily_limit - self.used_today)

    @property
    def remaining_checks(self) -> int:
        return max(0, self.check_limit - self.checks_today)


def upload_limits() -> UploadLimits:
    return UploadLimits(max_file_bytes=settings.ATREX_UPLOAD_MAX_FILE_BYTES,
                        max_files=settings.ATREX_UPLOAD_MAX_FILES,
                        max_total_bytes=settings.ATREX_UPLOAD_MAX_TOTAL_BYTES)


def quota_status(team: Team) -> QuotaStatus:
    """Today's submissions against the daily quotas (ranked and check, each its own), and
    those still being evaluated (both kinds).

    A submission counts from its upload on, cancelled ones too (they held a GPU worker), but
    not when every one of its jobs failed for infrastructure reasons or ran in Triton's CPU
    interpreter (a check of correctness and adoption: no GPU time, never ranked). A job
    counts from the moment it is accepted until its worker reports the interpreter mode.
    """
    now = timezone.now()
    day_start = now.replace(hour=0, minute=0, second=0, microsecond=0)
    counted = dict(Submission.objects.filter(team=team, created_at__gte=day_start).filter(
        Exists(EvaluationJob.objects.filter(candidate__submission=OuterRef("pk"),
                                            infrastructure_failure=False)
               .exclude(mode=EvaluationJob.Mode.INTERPRETER)))
        .values_list("mode").annotate(n=Count("pk")).order_by())
    # An admin's re-run (a low-priority attempt) is the portal's work, not the team's: it
    # holds none of the team's concurrent slots.
    active = Submission.objects.filter(team=team).filter(
        Exists(EvaluationJob.objects.filter(candidate__submission=OuterRef("pk"),
                                            status__in=EvaluationJob.Status.active(),
                                            low_priority=False)))
    return QuotaStatus(daily_limit=team.daily_submission_quota,
                       used_today=counted.get(MODE_RANKED, 0),
                       concurrent_limit=team.concurrent_job_quota, active=active.count(),
                       resets_at=day_start + timedelta(days=1),
                       check_limit=team.daily_check_quota,
                       checks_today=counted.get(MODE_CHECK, 0))


def submission_create(*, team: Team, user: object | None, release: Release,
                      hardware: HardwareProfile, filename: str, data: bytes,
                      operator: str | None = None, agent: str = "", model_name: str = "",
                      output_tokens: int | None = None, notes: str = "",
                      mode: str = MODE_RANKED, dsl: str = "", harness: str = "",
                      input_tokens: int | None = None, idempotency_key: str = "",
                      request_digest: str = "") -> Submission:
    """Check the upload, then store submission, candidates and jobs atomically.

    `mode` "check" evaluates it like any submission but keeps it off every board; it uses
    the team's daily check quota instead of its submission quota. Raises UploadRejected
    (nothing stored) or QuotaExceeded (nothing stored). Jobs are sent to the GPU queue only
    once the transaction has committed. A non-empty `idempotency_key` is stored, unique per
    team (`submission_create_once` answers a repeat with the submission it made).
    """
    if mode not in Submission.Mode.values:
        raise UploadRejected(f"mode: expected one of {', '.join(Submission.Mode.values)}")
    _check_metadata(agent=agent, model_name=model_name, output_tokens=output_tokens, notes=notes)
    _check_metadata(agent=harness, model_name="", output_tokens=input_tokens, notes="",
                    names=("harness", "model", "input_tokens"))
    operators = {op.name: op for op in release.operators.all()}
    sources = read_upload(filename=filename, data=data, operators=operators, operator=operator,
                          limits=upload_limits())
    dsls = declared_dsls(dsl, sorted(sources), release)
    with transaction.atomic():
        # The team row lock serialises concurrent uploads of one team: no quota overrun.
        Team.objects.select_for_update().get(pk=team.pk)
        quota = quota_status(team)
        if mode == MODE_CHECK and quota.checks_today >= quota.check_limit:
            raise QuotaExceeded(f"daily quota of {quota.check_limit} check submissions used; it "
                                f"resets at {quota.resets_at:%Y-%m-%d %H:%M} UTC")
        if mode == MODE_RANKED and quota.used_today >= quota.daily_limit:
            raise QuotaExceeded(f"daily quota of {quota.daily_limit} submissions used; it resets "
                                f"at {quota.resets_at:%Y-%m-%d %H:%M} UTC")
        if quota.active >= quota.concurrent_limit:
            raise QuotaExceeded(f"{quota.active} submissions are still being evaluated (limit "
                                f"{quota.concurrent_limit}); wait for one to finish")
        submission = Submission.objects.create(
            team=team, release=release, hardware=hardware,
            created_by=signed_in(user), agent=agent,
            model_name=model_name, output_tokens=output_tokens, notes=notes, mode=mode,
            harness=harness, input_tokens=input_tokens, idempotency_key=idempotency_key,
            request_digest=request_digest)
        job_ids = []
        for name, source in sorted(sources.items()):
            shapes = evaluated_shape_ids(operators[name])
            if not shapes:
                raise UploadRejected(cannot_evaluate(release, operator=name))
            candidate = Candidate.objects.create(
                submission=submission, operator=operators[name], source=source,
                sha256=hashlib.sha256(source.encode()).hexdigest(), dsl=dsls[name])
            # a check is the team's own look: the hidden tier is for what gets ranked
            hidden = [] if mode == MODE_CHECK else evaluated_hidden_shape_ids(operators[name])
            job = EvaluationJob.objects.create(
                candidate=candidate, shapes_total=len(shapes) + len(hidden), shape_ids=shapes,
                hidden_shape_ids=hidden)
            job_ids.append(job.pk)
        transaction.on_commit(lambda: dispatch_all(job_ids))
    return submission


def submission_set_ranking_excluded(*, submission: Submission, excluded: bool, reason: str,
                                    actor: object) -> None:
    """An admin takes a submission off the boards' ranks (a candidate that does not
    generalise to the hidden shapes, say), or puts it back; audited, then rescored. It
    stays on the boards, badged with the reason."""
    with transaction.atomic():
        locked = Submission.objects.select_for_update().get(pk=submission.pk)
        before = {"excluded": locked.ranking_excluded, "reason": locked.ranking_excluded_reason}
        locked.ranking_excluded = excluded
        locked.ranking_excluded_reason = reason[:300] if excluded else ""
        locked.save(update_fields=["ranking_excluded", "ranking_excluded_reason"])
        audit(actor=actor, action="submission.exclude" if excluded else "submission.include",
              target=f"submission:{locked.pk}", before=before,
              after={"excluded": excluded, "reason": locked.ranking_excluded_reason})
        rescore_on_commit(locked.pk)
    submission.ranking_excluded = excluded
    submission.ranking_excluded_reason = locked.ranking_excluded_reason


def declared_dsls(declared: str, operators: Sequence[str], release: Release) -> dict[str, str]:
    """The DSL of each uploaded file: `declared` is empty (the release's default), one DSL
    for every file, or `operator=dsl` pairs separated by commas (the others get the default).
    UploadRejected when a DSL is not one the release accepts, or names no uploaded file."""
    accepted = release.accepted_dsls()
    chosen = {name: accepted[0] for name in operators}
    text = declared.strip()
    pairs = [p.strip() for p in text.split(",") if p.strip()] if "=" in text else []
    if text and not pairs:
        chosen = dict.fromkeys(operators, text)
    for pair in pairs:
        name, _, value = (part.strip() for part in pair.partition("="))
        if name not in chosen:
            raise UploadRejected(f"dsl: {name!r} is not a file of this upload (its files: "
                                 f"{', '.join(operators)})")
        chosen[name] = value
    for name, value in chosen.items():
        if value not in accepted:
            raise UploadRejected(f"dsl: {value!r} (for {name}) is not a DSL {release} accepts; "
                                 f"it accepts {', '.join(accepted)}")
    return chosen


class UploadTargetUnknown(DomainError):
    """The release or hardware an upload names does not exist."""

    http_status = 404


def submission_from_upload(*, team: Team, user: object | None, fields: Mapping[str, Any],
                           idempotency_key: str = "", request_digest: str = "") -> Submission:
    """`submission_create` from an upload's parsed fields (submissions.forms.SubmissionForm,
    for the page and the API alike)."""
    release = Release.objects.filter(pk=fields["release"]).first()
    if release is None:
        raise UploadTargetUnknown(f"release: no release with id {fields['release']}")
    hardware = HardwareProfile.objects.filter(name=fields["hardware"]).first()
    if hardware is None:
        raise UploadTargetUnknown(f"hardware: no hardware profile named {fields['hardware']!r}")
    upload = fields["file"]
    return submission_create(
        team=team, user=user, release=release, hardware=hardware, filename=upload.name or "",
        data=upload.read(), operator=fields.get("operator") or None,
        agent=fields.get("agent") or "", model_name=fields.get("model") or "",
        output_tokens=fields.get("output_tokens"), notes=fields.get("notes") or "",
        mode=fields.get("mode") or MODE_RANKED, dsl=fields.get("dsl") or "",
        harness=fields.get("harness") or "", input_tokens=fields.get("input_tokens"),
        idempotency_key=idempotency_key, request_digest=request_digest)


class IdempotencyConflict(DomainError):
    """HTTP 409: an Idempotency-Key the team used before, for a different upload."""

    http_status = 409


MAX_IDEMPOTENCY_KEY_CHARS = 100
# The upload's fields that make two POSTs the same request (with the file's bytes).
_DIGESTED_FIELDS = ("release", "hardware", "operator", "dsl", "mode", "agent", "model",
                    "output_tokens", "input_tokens", "harness", "notes")


def upload_digest(fields: Mapping[str, Any], data: bytes) -> str:
    """What identifies an upload's request: its file and its fields."""
    digest = hashlib.sha256(data)
    for name in _DIGESTED_FIELDS:
        digest.update(f"\x00{name}={fields.get(name)!s}".encode())
    return digest.hexdigest()


def submission_create_once(*, team: Team, user: object | None, fields: Mapping[str, Any],
                           idempotency_key: str) -> tuple[Submission, bool]:
    """`submission_from_upload`, made at most once per (team, key): a repeat of the same
    request (after a lost answer, say) gets the submission the first one made, and True,
    without another quota charge; a different upload under a used key is refused
    (IdempotencyConflict). Two concurrent requests with one key: the unique constraint lets
    one commit, and the other, rolled back whole, answers the winner's submission."""
    from django.db import IntegrityError

    key = idempotency_key.strip()
    if len(key) > MAX_IDEMPOTENCY_KEY_CHARS or text_problems(key, None):
        raise UploadRejected(f"Idempotency-Key: at most {MAX_IDEMPOTENCY_KEY_CHARS} "
                             "characters, no NUL")
    upload = fields["file"]
    data = upload.read()
    upload.seek(0)
    digest = upload_digest(fields, data)
    if key:
        earlier = _keyed(team, key, digest)
        if earlier is not None:
            return earlier, True
    try:
        submission = submission_from_upload(team=team, user=user, fields=fields,
                                             idempotency_key=key, request_digest=digest)
    except IntegrityError:
        earlier = _keyed(team, key, digest) if key else None
        if earlier is None:
            raise
        return earlier, True
    return submission, False


def _keyed(team: Team, key: str, digest: str) -> Submission | None:
    earlier = Submission.objects.filter(team=team, idempotency_key=key).first()
    if earlier is not None and earlier.request_digest != digest:
        raise IdempotencyConflict(
            f"Idempotency-Key {key!r} was used for submission {earlier.pk}, a different "
            "upload; use a new key for a new upload")
    return earlier


def _check_metadata(*, agent: str, model_name: str, output_tokens: int | None,
                    notes: str, names: tuple[str, str, str] = ("agent", "model",
                                                               "output_tokens")) -> None:
    """Refuse what the database would fail on (a 500) or silently cut: UploadRejected."""
    problem = None if output_tokens is None else whole_number_problem(output_tokens)
    if problem:
        raise UploadRejected(f"{names[2]}: {problem}")
    for name, value, limit in ((names[0], agent, MAX_METADATA_CHARS),
                               (names[1], model_name, MAX_METADATA_CHARS),
                               ("notes", notes, MAX_NOTES_CHARS)):
        problems = text_problems(value, limit)
        if problems:
            raise UploadRejected(f"{name}: {problems[0]}")


# The rules of what an upload's (and the team page's) fields may hold: refused here, and
# checked by the forms with the same messages (submissions/forms.py), field by field.

def text_problems(value: str, limit: int | None) -> list[str]:
    """What the database would fail on or silently cut in a text: longer than its column,
    or NUL (PostgreSQL cannot store it)."""
    problems = []
    if limit is not None and len(value) > limit:
        problems.append(f"at most {limit} characters")
    if "\x00" in value:
        problems.append("text may not contain NUL characters")
    return problems


def whole_number_problem(value: int) -> str | None:
    """A number beyond a bigint reaches the database driver as an overflow (a 500)."""
    if 0 <= value <= MAX_BIG_INTEGER:
        return None
    return f"expected a whole number from 0 to {MAX_BIG_INTEGER}"


def shape_result_review(*, result: ShapeResult, accept: bool, actor: object) -> None:
    """Settle a quarantined (suspicious) result: accept it as measured, or reject it (0)."""
    with transaction.atomic():
        before = {"status": result.status, "attainment": result.attainment,
                  "suspicious": result.suspicious}
        if accept:
            result.suspicious = False
            result.review = ShapeResult.Review.ACCEPTED
        else:
            result.status, result.attainment, result.suspicious = "failed", 0.0, False
            result.error = "rejected in admin review (attainment above 1 is impossible)"
            result.review = ShapeResult.Review.REJECTED
        result.save(update_fields=["status", "attainment", "suspicious", "error", "review"])
        audit(actor=actor, action="result.accept" if accept else "result.reject",
              target=f"shape-result:{result.pk}", before=before,
              after={"status": result.status, "attainment": result.attainment,
                     "suspicious": result.suspicious})
        rescore_on_commit(result.job.candidate.submission_id)


BASELINE_TEAM = "Portal baselines"


def baseline_team() -> Team:
    """The hidden system team that owns every baseline submission."""
    team, _ = Team.objects.get_or_create(
        slug="portal-baselines", defaults={"name": BASELINE_TEAM, "hidden": True})
    return team


def baseline_submissions_create(*, release: Release, hardware: HardwareProfile,
                                actor: object | None = None,
                                kinds: Sequence[str] | None = None,
                                shape_filter: str | None = None) -> list[Submission]:
    """The release's references as baseline submissions: eager and torch.compile, or the
    `kinds` named (Submission.Baseline values), on the shapes `shape_filter` selects (a glob;
    default: the deployment's, `evaluated_shape_ids`).

    Owned by a hidden system team, outside every quota; evaluated by the GPU workers of
    `hardware` like any submission, and shown beside the boards, never ranked.
    """
    chosen = [Submission.Baseline(k) for k in kinds] if kinds is not None \
        else [Submission.Baseline.PYTORCH, Submission.Baseline.TORCH_COMPILE]
    team = baseline_team()
    operators = list(release.operators.order_by("name"))
    created = []
    with transaction.atomic():
        for kind in chosen:
            submission = Submission.objects.create(
                team=team, release=release, hardware=hardware, baseline=kind,
                created_by=signed_in(actor),
                agent="portal", notes=f"{Submission.Baseline(kind).label} of {release}")
            job_ids = []
            for operator in operators:
                shapes = evaluated_shape_ids(operator, shape_filter)
                if not shapes:
                    continue
                source = baseline_source(operator.reference_py, str(kind))
                candidate = Candidate.objects.create(
                    submission=submission, operator=operator, source=source,
                    sha256=hashlib.sha256(source.encode()).hexdigest())
                hidden = evaluated_hidden_shape_ids(operator, shape_filter)
                job_ids.append(EvaluationJob.objects.create(
                    candidate=candidate, shapes_total=len(shapes) + len(hidden),
                    shape_ids=shapes, hidden_shape_ids=hidden).pk)
            transaction.on_commit(functools.partial(dispatch_all, job_ids))
            created.append(submission)
        audit(actor=actor, action="baselines.create", target=f"release:{release}/{hardware}",
              before={}, after={"submissions": [s.pk for s in created]})
    return created
