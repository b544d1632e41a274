from typing import Any

from django.db import migrations, models
from django.db.models import Count


def mark_interpreter_checks(apps: Any, schema_editor: Any) -> None:
    """Stored scores and summaries of submissions evaluated in Triton's CPU interpreter
    (submissions 0005 found them): off the boards from now on."""
    job_model = apps.get_model("submissions", "EvaluationJob")
    counts = dict(job_model.objects.filter(mode="cpu-interpreter")
                  .values("candidate__submission_id")
                  .annotate(n=Count("pk")).values_list("candidate__submission_id", "n"))
    score_model = apps.get_model("leaderboard", "SubmissionScore")
    summary_model = apps.get_model("leaderboard", "ScoreSummary")
    for submission_id, n in counts.items():
        score_model.objects.filter(submission_id=submission_id).update(interpreter_jobs=n)
        for summary in summary_model.objects.filter(submission_id=submission_id):
            summary.summary = {**summary.summary, "interpreter_jobs": n}
            summary.save(update_fields=["summary"])


class Migration(migrations.Migration):

    dependencies = [
        ('leaderboard', '0003_score_complete'),
        ('submissions', '0005_evaluationjob_mode'),
    ]

    operations = [
        migrations.AddField(
            model_name='submissionscore',
            name='interpreter_jobs',
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.RunPython(mark_interpreter_checks, migrations.RunPython.noop),
    ]
