"""The web tier's name for a call's wall time is `wall_time_s`; the harness's report and the
API keep their key (`submissions/results.py` reads it, `submissions/api.py` gives it)."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("submissions", "0018_baseline_library_kinds"),
    ]

    operations = [
        migrations.RenameField(model_name="shaperesult", old_name="wall_median_s",
                               new_name="wall_time_s"),
    ]
