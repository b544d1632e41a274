"""Each stored result's quarantine review, as the audit log recorded it until now: its latest
"result.accept" or "result.reject" entry (the log stays as the record of who and when)."""

from typing import Any

from django.db import migrations

DECISIONS = {"result.accept": "accepted", "result.reject": "rejected"}


def review_from_audit(apps: Any, schema_editor: Any) -> None:
    audit_entry = apps.get_model("audit", "AuditEntry")
    shape_result = apps.get_model("submissions", "ShapeResult")
    latest: dict[int, str] = {}
    for action, target in (audit_entry.objects.filter(
            action__in=list(DECISIONS), target__startswith="shape-result:")
            .order_by("at", "pk").values_list("action", "target")):
        latest[int(target.split(":")[1])] = DECISIONS[action]
    for review in set(latest.values()):
        shape_result.objects.filter(pk__in=[pk for pk, r in latest.items() if r == review]
                                    ).update(review=review)


def review_back_to_audit(apps: Any, schema_editor: Any) -> None:
    """Nothing to undo: the audit log still holds every decision."""


class Migration(migrations.Migration):

    dependencies = [
        ("audit", "0001_initial"),
        ("submissions", "0014_shaperesult_review"),
    ]

    operations = [migrations.RunPython(review_from_audit, review_back_to_audit)]
