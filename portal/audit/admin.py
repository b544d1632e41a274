from django.contrib import admin

from .models import AuditEntry


@admin.register(AuditEntry)
class AuditEntryAdmin(admin.ModelAdmin[AuditEntry]):
    list_display = ("at", "actor", "action", "target")
    list_filter = ("action",)
    readonly_fields = ("at", "actor", "action", "target", "before", "after")
