"""A submission's life cycle: candidates per operator, evaluation jobs, shape results."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from evaluation.catalog.models import HardwareProfile, Operator, Release, Shape
from portal.accounts.models import Team

# Submission.Mode's values, for typed code (a TextChoices member reads as a tuple to mypy here).
MODE_RANKED, MODE_CHECK = "ranked", "check"


class Submission(models.Model):
    class Mode(models.TextChoices):
        # A check is evaluated like any submission (on the GPU, timed) but never enters a
        # board, an export or an analysis, and uses the team's daily check quota instead.
        RANKED = MODE_RANKED, "ranked"
        CHECK = MODE_CHECK, "check (not ranked)"

    class Baseline(models.TextChoices):
        NONE = "", "not a baseline"
        PYTORCH = "pytorch", "PyTorch reference"
        TORCH_COMPILE = "torch_compile", "torch.compile reference"
        # an open kernel library's adapters (evaluation/library_candidates), one row per
        # package (its name and version in `agent`), and the best of them per operator
        LIBRARY = "library", "open library kernels"
        BEST_OPEN = "best_open", "best open kernel"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="submissions")
    release = models.ForeignKey(Release, on_delete=models.PROTECT, related_name="submissions")
    hardware = models.ForeignKey(HardwareProfile, on_delete=models.PROTECT)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True)
    agent = models.CharField(max_length=100, blank=True)
    model_name = models.CharField(max_length=100, blank=True)
    output_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    # Which agent harness drove the model (Claude Code, Codex, `atrex loop`, ...) and the
    # tokens it read: the agents' table sets a kernel against what it cost (issue 45).
    harness = models.CharField(max_length=100, blank=True)
    input_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    notes = models.TextField(blank=True)
    # The release's own references, evaluated by the portal: shown beside the board, never ranked.
    baseline = models.CharField(max_length=20, choices=Baseline.choices, blank=True,
                                default=Baseline.NONE)
    mode = models.CharField(max_length=10, choices=Mode.choices, default=Mode.RANKED,
                            db_index=True)
    # The public summary's link (/shared/<token>/), when the team shared it; None: not shared.
    share_token = models.CharField(max_length=64, null=True, blank=True, unique=True)
    # The jobs' last end the team's webhook was called for: one call per end, however many
    # rescores follow it (an admin's re-run ends it again, and calls again).
    webhook_ended_at = models.DateTimeField(null=True, blank=True)
    # Derived from its results (submissions/environment.py), rewritten when a job ends: the
    # GPUs, drivers, CUDA, torch and DSL versions its shapes were measured with.
    environment = models.CharField(max_length=500, blank=True)
    # An admin's decision (submissions/services.py `submission_set_ranking_excluded`): shown
    # on the boards, never ranked; for a candidate that does not generalise, say.
    ranking_excluded = models.BooleanField(default=False)
    ranking_excluded_reason = models.CharField(max_length=300, blank=True)
    # The client's Idempotency-Key header: a POST repeated after a network error with the
    # same key answers this submission instead of making (and charging) another one;
    # `request_digest` tells a repeat from a different upload under a reused key.
    idempotency_key = models.CharField(max_length=100, blank=True)
    request_digest = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(
            fields=["team", "idempotency_key"], condition=~models.Q(idempotency_key=""),
            name="one_submission_per_idempotency_key")]

    def __str__(self) -> str:
        return f"#{self.pk} {self.team} on {self.release} / {self.hardware}"

    @property
    def is_check(self) -> bool:
        return bool(self.mode == MODE_CHECK)


class Candidate(models.Model):
    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="candidates")
    operator = models.ForeignKey(Operator, on_delete=models.PROTECT)
    source = models.TextField()
    sha256 = models.CharField(max_length=64)
    # The DSL the team declared for this file (one of the release's accepted_dsls()).
    dsl = models.CharField(max_length=30, default="triton")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["submission", "operator"],
                                               name="one_candidate_per_operator")]

    def __str__(self) -> str:
        return f"{self.submission_id}/{self.operator.name}"


class EvaluationJob(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SCORED = "scored"
        FAILED = "failed"
        CANCELLED = "cancelled"

        # "Is this job still going?" is read here only; its writes are submissions/jobs.py.
        @classmethod
        def active(cls) -> tuple[EvaluationJob.Status, ...]:
            """Still going: a worker may yet report on it."""
            return (cls.QUEUED, cls.RUNNING)

        @classmethod
        def ended(cls) -> tuple[EvaluationJob.Status, ...]:
            """Over: no report of it is stored any more."""
            return (cls.SCORED, cls.FAILED, cls.CANCELLED)

    class Mode(models.TextChoices):
        # As the harness reports it (EvaluationResult.mode); blank until a worker said.
        UNKNOWN = "", "not reported yet"
        GPU = "gpu", "GPU"
        INTERPRETER = "cpu-interpreter", "Triton's CPU interpreter"

    candidate = models.OneToOneField(Candidate, on_delete=models.CASCADE, related_name="job")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED,
                              db_index=True)
    attempts = models.PositiveIntegerField(default=0)
    worker = models.CharField(max_length=200, blank=True)
    # The execution that holds the current attempt: a redelivered message runs the same
    # attempt again under a new run id, and only the holder's reports are stored.
    run = models.CharField(max_length=32, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    shapes_done = models.PositiveIntegerField(default=0)
    shapes_total = models.PositiveIntegerField(default=0)
    # The shapes this job covers, fixed when it is created (the deployment's shape filter
    # may change later); its submission is scored over these shapes only.
    shape_ids = models.JSONField(default=list, blank=True)
    # The release's hidden shapes this job covers too (ranked submissions only), run after
    # the public ones; shapes_total counts both, a team is shown only how many are hidden.
    hidden_shape_ids = models.JSONField(default=list, blank=True)
    # Sent to eval.<hardware>.low: a baseline's job or an admin's re-run, which GPU workers
    # take only while no team job waits (evaluation/protocol.py)
    low_priority = models.BooleanField(default=False)
    error = models.TextField(blank=True)
    # A failure's reason where it may tell of a hidden shape (submissions/jobs.py
    # `hidden_failure`): for the admins; the team reads `error`, which says only that.
    hidden_error = models.TextField(blank=True)
    infrastructure_failure = models.BooleanField(default=False,
                                                 help_text="Not counted against quotas.")
    evaluator_version = models.CharField(max_length=30, blank=True)
    # Where the worker ran it. An interpreter run checks correctness and adoption only: it
    # measures no time, is never ranked and uses no daily quota (docs/teams.md).
    mode = models.CharField(max_length=20, choices=Mode.choices, blank=True,
                            default=Mode.UNKNOWN)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    # For a job with hidden shapes, its end as teams see it: the release time (below), never
    # the moment the worker ended.
    finished_at = models.DateTimeField(null=True, blank=True)
    # The hidden tier's hold (submissions/jobs.py; docs/teams.md, "Hidden shapes"): when the
    # portal saw it begin (its last public shape stored), when its results and the job's end
    # may be shown (the budget after the start; past it, the next quantum), when the worker
    # really ended it, and what the worker reported of it until then (its shapes' reports, and
    # its end: status, evaluator version, failure). Admins only; a team sees the job running,
    # its public shapes done, until the release.
    hidden_started_at = models.DateTimeField(null=True, blank=True)
    release_at = models.DateTimeField(null=True, blank=True)
    worker_ended_at = models.DateTimeField(null=True, blank=True)
    held = models.JSONField(default=dict, blank=True)

    def __str__(self) -> str:
        return f"job {self.pk} ({self.status})"

    @property
    def hidden_tier_held(self) -> bool:
        """The hidden tier has begun and its results are not released yet: a team sees none
        of it (nor the heartbeat)."""
        return self.hidden_started_at is not None and self.status in self.Status.active()


class PublicTierResults(models.Manager["ShapeResult"]):
    """Results of public shapes only: ShapeResult's default manager, and so `job.results`.
    Scoring and the job life cycle read every tier (`ShapeResult.every_tier`)."""

    def get_queryset(self) -> models.QuerySet[ShapeResult]:
        return super().get_queryset().filter(shape__hidden=False)


class ShapeResult(models.Model):
    """Everything the harness reported for one shape, per job attempt (stored idempotently)."""

    job = models.ForeignKey(EvaluationJob, on_delete=models.CASCADE, related_name="results")
    attempt = models.PositiveIntegerField()
    shape = models.ForeignKey(Shape, on_delete=models.PROTECT)
    status = models.CharField(max_length=10)
    stage_reached = models.CharField(max_length=20, blank=True)
    failed_stage = models.CharField(max_length=20, blank=True)
    error = models.TextField(blank=True)
    max_abs_error = models.FloatField(null=True)
    max_rel_error = models.FloatField(null=True)
    verdict = models.CharField(max_length=20, blank=True)
    dsl_ratio = models.FloatField(null=True)
    median_s = models.FloatField(
        null=True, help_text="the scored time: the device span of one forward (median)")
    median_se_s = models.FloatField(
        null=True, help_text="the median's bootstrap standard error from the timing samples "
                             "(evaluation/harness/confidence.py): intervals and ties rest on it")
    p10_s = models.FloatField(null=True)
    p90_s = models.FloatField(null=True)
    samples = models.PositiveIntegerField(null=True)
    launch_method = models.CharField(max_length=10, blank=True)
    wall_time_s = models.FloatField(
        null=True, help_text="the end-to-end wall time of one call (median): what the host "
                             "adds on top of the span")
    sol_s = models.FloatField(null=True)
    attainment = models.FloatField(null=True)
    attainment_with_floor = models.FloatField(null=True)
    suspicious = models.BooleanField(default=False)

    class Review(models.TextChoices):
        NONE = "", "not reviewed"
        ACCEPTED = "accepted"  # measured as reported: stays unsuspicious through a rescale
        REJECTED = "rejected"  # failed, scored 0

    # An admin's quarantine decision (services.shape_result_review); the audit log keeps who
    # decided and when.
    review = models.CharField(max_length=10, choices=Review.choices, blank=True, default="")
    raw = models.JSONField(help_text="the harness's ShapeReport, schema atrex.evaluation-result/2 "
                                     "(results stored before 2026-12-02: /1)")

    objects = PublicTierResults()
    every_tier = models.Manager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["job", "attempt", "shape"],
                                               name="one_result_per_attempt_and_shape")]

    def __str__(self) -> str:
        return f"{self.job_id}/{self.shape.shape_id} ({self.status})"


class NcuProfile(models.Model):
    """A team's Nsight Compute profile of one public shape of its candidate (submissions/ncu.py):
    hardware counters per kernel, run on a GPU host in the candidate's sandbox. Never scored."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        DONE = "done"
        FAILED = "failed"

    candidate = models.ForeignKey(Candidate, on_delete=models.CASCADE,
                                  related_name="ncu_profiles")
    shape = models.ForeignKey(Shape, on_delete=models.PROTECT)  # a public shape, never hidden
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    # evaluation.harness.ncu.sandbox.NcuProfile as JSON: kernels, clocks, error, seconds
    result = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    worker = models.CharField(max_length=200, blank=True)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL,
                                     null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"ncu profile {self.pk} of {self.candidate} on {self.shape.shape_id}"
