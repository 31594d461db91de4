from django.contrib import admin
from django.http import HttpRequest

from dashboard.models import SchedulingCycle, VerbCall


class VerbCallInline(admin.TabularInline):  # type: ignore[type-arg]  # generic only in django-stubs, not at run time
    model = VerbCall
    extra = 0
    fields = ("verb", "started_at", "duration_ms", "http_status", "error", "server")
    readonly_fields = fields
    can_delete = False


@admin.register(SchedulingCycle)
class SchedulingCycleAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # (as VerbCallInline)
    list_display = (
        "started_at",
        "pod_namespace",
        "pod_name",
        "profile",
        "outcome",
        "chosen_node",
        "preferred_node",
    )
    list_filter = ("outcome", "profile", "node_mode")
    search_fields = ("pod_name", "pod_namespace", "pod_uid", "chosen_node")
    inlines = [VerbCallInline]

    # The record is an audit trail: readable here, never editable.
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object | None = None) -> bool:
        return False
