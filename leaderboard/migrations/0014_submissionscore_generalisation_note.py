"""Each stored score keeps its "does not generalise" badge's why as a short text
(SubmissionScore.generalisation_note), so a board reads that instead of every reason: the
scores stored before it get theirs here, from the reasons they keep."""

from django.db import migrations, models

from leaderboard.scoring import generalisation_note


def fill_notes(apps, schema_editor):
    scores = apps.get_model("leaderboard", "SubmissionScore")
    flagged = scores.objects.exclude(not_generalising=[]).only(
        "pk", "not_generalising", "generalisation_reasons")
    batch = []
    for score in flagged.iterator(chunk_size=2000):
        score.generalisation_note = generalisation_note(score.generalisation_reasons,
                                                        score.not_generalising or [])
        batch.append(score)
        if len(batch) == 2000:
            scores.objects.bulk_update(batch, ["generalisation_note"])
            batch = []
    scores.objects.bulk_update(batch, ["generalisation_note"])


class Migration(migrations.Migration):

    dependencies = [
        ('leaderboard', '0013_summaries_rebuilt_with_board_aggregates'),
    ]

    operations = [
        migrations.AddField(
            model_name='submissionscore',
            name='generalisation_note',
            field=models.TextField(blank=True, default='', help_text="the flag's why as a board's badge says it: the first hidden shapes of generalisation_reasons (leaderboard/scoring.py)"),
        ),
        migrations.RunPython(fill_notes, migrations.RunPython.noop),
    ]
