from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from dashboard.placements.models import PlacementObservation


@admin.register(PlacementObservation)
class PlacementObservationAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # generic only in django-stubs
    """Read-only: observations come from the API, never from a person."""

    list_display = ("occurred_at", "kind", "pod_namespace", "pod_name", "node", "reason", "cycle")
    list_filter = ("kind", "scheduler_name")
    search_fields = ("pod_uid", "pod_name", "pod_namespace", "node")
    raw_id_fields = ("cycle",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object | None = None) -> bool:
        return False
