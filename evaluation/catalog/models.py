"""The benchmark catalog: releases, operators, shapes, hardware profiles.

Public parts (what teams and GPU hosts may see) and hidden parts (provenance, roofline,
importance) live in separate tables, so a query for public data cannot pull hidden columns
by accident and hidden rows are never serialised with public ones.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from evaluation.harness.release import HardwareSpec, ShapeRoofline, accepted_by_default, stored_shape_roofline
from evaluation.protocol import eval_queue


class HardwareProfile(models.Model):
    """The current figures of one hardware target: those of its version `version`.

    Shared by every release. An import only creates a profile that does not exist yet; a
    change is an admin's new version (leaderboard/hardware.py), which rescales stored results.
    """

    name = models.CharField(max_length=50, unique=True)
    arch = models.CharField(max_length=50, blank=True)
    peak_flops = models.JSONField(help_text="precision path -> dense FLOP/s")
    hbm_bytes_per_s = models.FloatField()
    launch_floor_s = models.FloatField()
    source = models.JSONField(default=dict, blank=True)
    version = models.PositiveIntegerField(default=1, help_text="the HardwareProfileVersion "
                                          "whose figures these are")

    def __str__(self) -> str:
        return self.name

    def as_spec(self) -> HardwareSpec:
        """The harness's plain profile (roofline arithmetic runs on it)."""
        return HardwareSpec(name=self.name, arch=self.arch or None, peak_flops=self.peak_flops,
                            hbm_bytes_per_s=self.hbm_bytes_per_s,
                            launch_floor_s=self.launch_floor_s)

    @property
    def queue(self) -> str:
        """The Celery queue GPU workers of this hardware consume."""
        return eval_queue(self.name)


class HardwareProfileVersion(models.Model):
    """One immutable set of a profile's figures, with who made it and why."""

    profile = models.ForeignKey(HardwareProfile, on_delete=models.CASCADE,
                                related_name="versions")
    version = models.PositiveIntegerField()
    arch = models.CharField(max_length=50, blank=True)
    peak_flops = models.JSONField(help_text="precision path -> dense FLOP/s")
    hbm_bytes_per_s = models.FloatField()
    launch_floor_s = models.FloatField()
    source = models.JSONField(default=dict, blank=True)
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True,
                               blank=True)
    note = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["profile", "version"],
                                               name="hardware_profile_version")]
        ordering = ["profile", "-version"]

    def __str__(self) -> str:
        return f"{self.profile} v{self.version}"


class Release(models.Model):
    name = models.CharField(max_length=100)
    version = models.PositiveIntegerField()
    content_sha256 = models.CharField(max_length=64)
    dsl = models.CharField(max_length=30, default="triton")
    # The DSLs a submission may declare, the upload default first; empty: every DSL the
    # evaluator supports (evaluation.harness.release.accepted_by_default).
    dsls = models.JSONField(default=list, blank=True)
    dsl_ratio_threshold = models.FloatField(default=0.95)
    fallback_scores_zero = models.BooleanField(
        default=True, help_text="Scoring policy: a correct but fallback shape (PyTorch, vendor "
        "library, torch.compile) scores 0. Off: it scores its attainment.")
    ranked_tier = models.CharField(
        max_length=20, default="explicit-dsl",
        help_text="The widest tier this release's boards rank (leaderboard/tiers.py): "
        "explicit-dsl (only native shapes earn), self-authored (mixed too), libraries "
        "(library kernels too). Boards offer a filter for each tier up to it.")
    generalisation_factor = models.FloatField(
        default=2.0, help_text="An operator's candidate 'does not generalise' when its S_op on "
        "the hidden shapes is below its public S_op divided by this factor.")
    # The hidden tier without a clock (submissions/jobs.py, protocol.release_delay): a job's
    # hidden results and its end are shown at a time fixed when its hidden shapes begin.
    hidden_shape_budget_s = models.FloatField(
        default=2.0, help_text="Seconds per hidden shape at least: a job's hidden tier is "
        "released this many seconds per hidden shape after it began, or the multiple below of "
        "its slowest public shape per hidden shape if that is longer (protocol.hidden_budget). "
        "Its GPU host waits for the release before its next job.")
    hidden_budget_per_public = models.FloatField(
        default=3.0, help_text="A hidden tier's budget per hidden shape in multiples of its "
        "job's slowest public shape, when that is longer than the seconds above (0: the "
        "seconds above alone; both 0 and no quantum: no hold, the hidden tier's end shows).")
    hidden_release_quantum_s = models.FloatField(
        default=1800.0, help_text="Seconds: a hidden tier over its budget is released at the "
        "next multiple of this past the budget. Larger: fewer release times, fewer bits a "
        "team can read from the end of the job (docs/teams.md); 0: at the end itself.")
    imported_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["name", "version"], name="release_version"),
            models.UniqueConstraint(fields=["name", "content_sha256"], name="release_content"),
        ]
        ordering = ["name", "-version"]

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"

    def accepted_dsls(self) -> tuple[str, ...]:
        """The DSLs a submission to this release may declare; the first is the default."""
        return tuple(self.dsls) or accepted_by_default(self.dsl)


class ReleaseHidden(models.Model):
    release = models.OneToOneField(Release, on_delete=models.CASCADE, related_name="hidden")
    importance = models.JSONField(default=dict, help_text="operator_importance.json as imported")
    trace_rules = models.JSONField(default=dict, blank=True,
                                   help_text="data/trace_rules.json: which profiler kernels and "
                                   "ranges belong to which operator (evaluation/traces.py)")


class Operator(models.Model):
    """Public files of one operator, verbatim."""

    release = models.ForeignKey(Release, on_delete=models.CASCADE, related_name="operators")
    name = models.CharField(max_length=100)
    reference_py = models.TextField()
    input_py = models.TextField()
    shapes_json = models.TextField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["release", "name"], name="operator_name")]
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.release}: {self.name}"


class OperatorHidden(models.Model):
    """metadata.json and roofline.json: never served to non-admins."""

    operator = models.OneToOneField(Operator, on_delete=models.CASCADE, related_name="hidden")
    metadata = models.JSONField(null=True, blank=True)
    roofline = models.JSONField(null=True, blank=True)
    atol = models.FloatField()
    rtol = models.FloatField()

    def shape_roofline(self, shape_id: str) -> ShapeRoofline | None:
        """The shape's W, Q and SOL convention (None without a roofline entry)."""
        return stored_shape_roofline(self.roofline, shape_id)


class PublicShapes(models.Manager["Shape"]):
    """The shapes teams may see. It is Shape's default manager, and so `operator.shapes`:
    a page, an API view or an export that forgets to ask for public shapes gets them anyway.
    Code that must see the hidden tier (jobs, results, scoring) says so: `Shape.every_tier`.
    """

    def get_queryset(self) -> models.QuerySet[Shape]:
        return super().get_queryset().filter(hidden=False)


class Shape(models.Model):
    operator = models.ForeignKey(Operator, on_delete=models.CASCADE, related_name="shapes")
    shape_id = models.CharField(max_length=200)
    init_kwargs = models.JSONField(default=dict)
    input_kwargs = models.JSONField(default=dict)
    position = models.PositiveIntegerField()
    # The release's hidden tier (data/<op>/hidden_shapes.json): evaluated for every ranked
    # submission, never shown to a team (docs/admins.md, "The hidden shape tier").
    hidden = models.BooleanField(default=False)

    objects = PublicShapes()
    every_tier = models.Manager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["operator", "shape_id"], name="shape_id")]
        ordering = ["operator", "position"]

    def __str__(self) -> str:
        return f"{self.operator.name}/{self.shape_id}"


class EvaluationWorker(models.Model):
    """A GPU worker as it last announced itself (evaluation/protocol.Announcement): what this
    portal can evaluate is what its workers announced lately (evaluation/catalog/capability.py)."""

    name = models.CharField(max_length=200, unique=True)
    hardware = models.JSONField(default=list, help_text="hardware profiles whose queue it consumes")
    mode = models.CharField(max_length=30, blank=True, help_text="gpu, or cpu-interpreter")
    device = models.CharField(max_length=200, blank=True)
    dsls = models.JSONField(default=list)
    evaluator_version = models.CharField(max_length=30, blank=True)
    first_seen = models.DateTimeField(auto_now_add=True)
    last_seen = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return f"{self.name} ({self.device or self.mode})"
