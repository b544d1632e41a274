"""Who did what, when, with the state before and after (admin actions, weight changes)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models


class AuditEntry(models.Model):
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True,
                              blank=True)
    action = models.CharField(max_length=100)
    target = models.CharField(max_length=200, help_text="e.g. 'release:atrex-fixture v1'")
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-at"]
        verbose_name_plural = "audit entries"

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.actor} {self.action} {self.target}"


def audit(*, actor: Any, action: str, target: str, before: Any = None, after: Any = None) -> AuditEntry:
    return AuditEntry.objects.create(actor=actor if getattr(actor, "pk", None) else None,
                                     action=action, target=target, before=before, after=after)
