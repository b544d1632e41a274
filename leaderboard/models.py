"""Weight sets (immutable, versioned, one active per release) and stored scores."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from evaluation.catalog.models import HardwareProfile, Operator, Release
from portal.accounts.models import Team
from submissions.models import Submission


class WeightSet(models.Model):
    class Source(models.TextChoices):
        RELEASE = "release", "operator_importance.json at import"
        MANUAL = "manual", "entered by an admin"
        IMPORTANCE_FILE = "importance_file", "uploaded operator_importance.json"
        TRACES = "traces", "derived from profiler traces"

    release = models.ForeignKey(Release, on_delete=models.CASCADE, related_name="weight_sets")
    version = models.PositiveIntegerField()
    weights = models.JSONField(help_text="operator -> weight, normalised to sum 1")
    source = models.CharField(max_length=20, choices=Source.choices)
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True,
                               blank=True)
    note = models.CharField(max_length=300, blank=True)
    report = models.JSONField(default=dict, blank=True,
                              help_text="how the weights were derived (trace import: shares "
                              "per operator and phase, unattributed share)")
    active = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["release", "version"], name="weight_set_version"),
            models.UniqueConstraint(fields=["release"], condition=Q(active=True),
                                    name="one_active_weight_set"),
        ]
        ordering = ["release", "-version"]

    def __str__(self) -> str:
        return f"{self.release} weights v{self.version}{' (active)' if self.active else ''}"


class SubmissionScore(models.Model):
    """Derived data: recomputed from stored shape results, never by re-running kernels."""

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="scores")
    weight_set = models.ForeignKey(WeightSet, on_delete=models.CASCADE, related_name="scores")
    ranked = models.BooleanField()
    aggregate = models.FloatField(null=True)
    unweighted_mean = models.FloatField(null=True)
    memory = models.FloatField(null=True)
    compute = models.FloatField(null=True)
    prefill = models.FloatField(null=True)
    decode = models.FloatField(null=True)
    correctness_rate = models.FloatField()
    dsl_adoption_rate = models.FloatField()
    mixed_shapes = models.PositiveIntegerField(default=0)
    fallback_shapes = models.PositiveIntegerField(default=0)
    # Whole evaluations only are ranked: False while a job is queued or running, or after one
    # ended by an infrastructure failure (boards show "evaluating" instead).
    complete = models.BooleanField(default=True)
    unevaluated_shapes = models.PositiveIntegerField(default=0)  # cancelled/failed jobs: 0
    lost_jobs = models.PositiveIntegerField(default=0)  # ended by an infrastructure failure
    # Jobs run in Triton's CPU interpreter: a check without times, never ranked on a board.
    interpreter_jobs = models.PositiveIntegerField(default=0)
    by_operator = models.JSONField()
    intervals = models.JSONField(
        default=dict, help_text="95% intervals [low, high] or null: aggregate, memory, compute, "
                                "prefill, decode, by_operator {op: ...} (leaderboard/scoring.py)")
    hidden_by_operator = models.JSONField(
        default=dict, help_text="S_op over the release's hidden shapes, per operator with some")
    not_generalising = models.JSONField(
        default=list, help_text="operators with a hidden shape that failed, fell back, or whose "
                                "attainment with the launch floor is below its public "
                                "sibling's / the release's generalisation factor")
    generalisation = models.JSONField(
        default=dict, help_text="per operator with hidden shapes: the medians of attainment "
                                "with the launch floor of both tiers, {public, hidden}")
    generalisation_reasons = models.JSONField(
        default=dict, help_text="per flagged operator, each hidden shape that flagged it: "
                                "{hidden_shape (its number), public_shape (its sibling), hidden, "
                                "public (attainment with the launch floor), why, factor}")
    generalisation_note = models.TextField(
        blank=True, default="", help_text="the flag's why as a board's badge says it: the "
        "first hidden shapes of generalisation_reasons (leaderboard/scoring.py)")
    excluded = models.BooleanField(default=False, help_text="taken off the ranks by an admin "
                                   "(Submission.ranking_excluded)")
    library_shapes = models.PositiveIntegerField(default=0, help_text="correct shapes run by an "
                                                 "installed library's kernels (verdict library)")
    tier = models.CharField(max_length=20, null=True, blank=True,
                            help_text="the narrowest tier holding every shape that earned "
                                      "(leaderboard/tiers.py); null: none earned")
    computed_at = models.DateTimeField(auto_now=True)
    # The submission's, copied: a board finds each team's best row with one index probe per
    # team (the board_best_* indexes), whatever the number of submissions
    # (leaderboard/selectors.py, `best_per_team`).
    team = models.ForeignKey(Team, on_delete=models.CASCADE, null=True, related_name="+",
                             db_index=False)
    hardware = models.ForeignKey(HardwareProfile, on_delete=models.CASCADE, null=True,
                                 related_name="+", db_index=False)
    created_at = models.DateTimeField(null=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["submission", "weight_set"],
                                               name="one_score_per_weight_set")]
        # and, on PostgreSQL, one board_best_<board> index per board's score
        # (migration 0010_board_best_per_team; SQLite has no NULLS FIRST in an index)
        indexes = [models.Index(fields=["weight_set", "-aggregate"])]


class ScoreSummary(models.Model):
    """A submission's weight-independent scores (scoring.SubmissionSummary as JSON).

    Written when its jobs finish; activating weights only combines these, so a bulk
    rescore never reads shape results again.
    """

    submission = models.OneToOneField(Submission, on_delete=models.CASCADE, primary_key=True,
                                      related_name="score_summary")
    summary = models.JSONField()
    # What the boards' aggregates count of this submission (kept with the summary, so a
    # rewrite knows what to take off the board's totals): per declared DSL, its latest public
    # shape results [files, shapes, correct, native, unverified-cpu]; and where its recorded
    # results were measured (leaderboard/demo.py), one line per source.
    tally = models.JSONField(default=dict)
    recorded = models.JSONField(default=list)
    # What a bulk rescore reads of the summary, as text it sends on without re-encoding:
    # the generalisation factor, the weighted inputs (the summary without its hidden tier's
    # keys) and the score rows' hidden-tier columns (scoring.FLAG_COLUMNS) under that factor,
    # one JSON text a line (services.rescore_text). Written with the summary; empty, or under
    # another factor: written again by the next bulk rescore. Plain text, not JSON: at 100,000
    # submissions PostgreSQL took 8.7 s to turn the summaries' jsonb into text, 5 s to send
    # this (issue 42).
    rescore_text = models.TextField(blank=True, default="")
    computed_at = models.DateTimeField(auto_now=True)


class BoardTally(models.Model):
    """A board's per-DSL rates, kept as totals: the tallies (ScoreSummary.tally) of every
    ranked-mode submission of one release on one hardware profile that is not a baseline,
    every team's (a hidden team's are taken off when read). Changed by the difference
    whenever a submission's summary is written, so a board reads one row per DSL."""

    release = models.ForeignKey(Release, on_delete=models.CASCADE, related_name="+")
    hardware = models.ForeignKey(HardwareProfile, on_delete=models.CASCADE, related_name="+")
    dsl = models.CharField(max_length=30)
    files = models.BigIntegerField(default=0)
    shapes = models.BigIntegerField(default=0)
    correct = models.BigIntegerField(default=0)
    native = models.BigIntegerField(default=0)
    unverified = models.BigIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["release", "hardware", "dsl"],
                                               name="one_tally_per_board_and_dsl")]


class BoardRecorded(models.Model):
    """Where the recorded results on a release's boards for one hardware profile come from:
    per source line, how many ranked-mode submissions hold results from it (kept like
    BoardTally)."""

    release = models.ForeignKey(Release, on_delete=models.CASCADE, related_name="+")
    hardware = models.ForeignKey(HardwareProfile, on_delete=models.CASCADE, related_name="+")
    source = models.CharField(max_length=1000)
    submissions = models.BigIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["release", "hardware", "source"],
                                               name="one_recorded_per_board_and_source")]


class OperatorSummary(models.Model):
    """One operator of one submission, weight-independent, as its operator board shows it:
    written with the submission's summary, so that board reads its operator's rows only."""

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE,
                                   related_name="operator_summaries")
    operator = models.ForeignKey(Operator, on_delete=models.CASCADE, related_name="+")
    # the submission's, copied: the board's filter and its best-per-team order read one table
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    hardware = models.ForeignKey(HardwareProfile, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField()
    on_board = models.BooleanField(help_text="ranked mode and not a baseline")
    rankable = models.BooleanField(help_text="ranked, complete, no interpreter job, not "
                                             "excluded (selectors.RANKABLE)")
    score = models.FloatField(null=True, help_text="S_op (None: not timed)")
    correctness_rate = models.FloatField(help_text="its public shapes' share correct")
    solved = models.BooleanField(help_text="every public shape correct and native")
    hidden_score = models.FloatField(null=True)
    interval = models.JSONField(null=True)
    not_generalising = models.BooleanField(default=False)
    # why it is flagged: each hidden shape that flagged it (scoring.WeightedScore's)
    generalisation_reasons = models.JSONField(default=list)
    # its latest public results: of the scored tier, and of the dev tier (a board row's
    # coverage note, leaderboard/overview.py `shape_coverage`)
    covered = models.PositiveIntegerField(default=0)
    dev_covered = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["submission", "operator"],
                                               name="one_operator_summary")]
        # and, on PostgreSQL, operator_board_best (migration 0010_board_best_per_team)
        indexes = [models.Index(fields=["operator", "hardware", "team"],
                                condition=Q(on_board=True, rankable=True),
                                name="operator_board_rows")]


class BoardFreeze(models.Model):
    """A frozen board shows only submissions made up to `frozen_at` (e.g. after a deadline)."""

    release = models.ForeignKey(Release, on_delete=models.CASCADE, related_name="freezes")
    hardware = models.ForeignKey(HardwareProfile, on_delete=models.CASCADE)
    frozen_at = models.DateTimeField()
    frozen_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL,
                                  null=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["release", "hardware"],
                                               name="one_freeze_per_board")]
