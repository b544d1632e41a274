"""The end-to-end time beside the scored span is the wall time of an uninstrumented call
(timing.wall_median_s), no longer CUDA events under the profiler; one name for it."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("submissions", "0006_submission_mode_share_webhook"),
    ]

    operations = [
        migrations.RenameField(model_name="shaperesult", old_name="event_median_s",
                               new_name="wall_median_s"),
        migrations.AlterField(
            model_name="shaperesult", name="wall_median_s",
            field=models.FloatField(help_text="the end-to-end wall time of one call (median): "
                                              "what the host adds on top of the span",
                                    null=True)),
        migrations.AlterField(
            model_name="shaperesult", name="median_s",
            field=models.FloatField(help_text="the scored time: the device span of one forward "
                                              "(median)", null=True)),
        migrations.AlterField(
            model_name="shaperesult", name="raw",
            field=models.JSONField(help_text="the harness's ShapeResult, schema "
                                             "atrex.evaluation-result/2 (results stored before "
                                             "2026-12-02: /1)")),
    ]
