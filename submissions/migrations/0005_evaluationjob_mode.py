from typing import Any

from django.db import migrations, models


def mode_from_stored_results(apps: Any, schema_editor: Any) -> None:
    """Jobs evaluated before workers reported their mode: their stored shape results say
    "not measured: no GPU (CPU interpreter mode)" where an interpreter ran them."""
    job_model = apps.get_model("submissions", "EvaluationJob")
    result_model = apps.get_model("submissions", "ShapeResult")
    interpreter = (result_model.objects.filter(raw__timing__reason__icontains="interpreter")
                   .values_list("job_id", flat=True).distinct())
    job_model.objects.filter(pk__in=list(interpreter)).update(mode="cpu-interpreter")


class Migration(migrations.Migration):

    dependencies = [
        ('submissions', '0004_job_shape_ids'),
    ]

    operations = [
        migrations.AddField(
            model_name='evaluationjob',
            name='mode',
            field=models.CharField(blank=True, choices=[('', 'not reported yet'), ('gpu', 'GPU'), ('cpu-interpreter', "Triton's CPU interpreter")], default='', max_length=20),
        ),
        migrations.RunPython(mode_from_stored_results, migrations.RunPython.noop),
    ]
