"""Stored summaries are dropped once, so that the next rescore (setup_demo's, `manage.py
rescore`, a weight activation) rebuilds every one from its shape results, and with it what
the boards now keep of each submission (0009-0012: per-DSL tallies, recorded sources, the
operator boards' rows) and each hidden shape beside its public sibling (0008). Summaries are
derived data: nothing is lost; scores stay as they were until that rescore."""

from django.db import migrations


def drop_summaries(apps, schema_editor):
    # the board totals are sums of the summaries' shares: they go with them, to be added
    # up again as the summaries are rebuilt
    for model in ("ScoreSummary", "OperatorSummary", "BoardTally", "BoardRecorded"):
        apps.get_model("leaderboard", model).objects.all().delete()


class Migration(migrations.Migration):

    dependencies = [
        ('leaderboard', '0012_operator_summary_generalisation_reasons'),
    ]

    operations = [
        migrations.RunPython(drop_summaries, migrations.RunPython.noop),
    ]
