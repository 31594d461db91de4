"""``/api/v1/…`` (the audit API), ``/api/schema/`` (OpenAPI 3) and ``/api/docs/`` (Swagger UI, local assets)."""

from __future__ import annotations

from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.routers import SimpleRouter

from dashboard.api import outcome_views, pending_views, replay_views, views

app_name = "api"

router = SimpleRouter()
router.register("cycles", views.CycleViewSet, basename="cycle")
router.register("nodes", views.NodeViewSet, basename="node")
router.register("profiles", views.ProfileViewSet, basename="profile")
router.register("profile-versions", views.ProfileVersionViewSet, basename="profile-version")
router.register("traffic/refreshes", views.TrafficRefreshViewSet, basename="traffic-refresh")
router.register("traffic/snapshots", views.TrafficSnapshotViewSet, basename="traffic-snapshot")
router.register("replays", replay_views.ReplayViewSet, basename="replay")

urlpatterns = [
    path("v1/cycles/export.csv", views.CycleCsvExport.as_view({"get": "export"}), name="cycle-export-csv"),
    path("v1/cycles/export.ndjson", views.CycleNdjsonExport.as_view({"get": "export"}), name="cycle-export-ndjson"),
    path("v1/why/", views.WhyView.as_view(), name="why"),
    path("v1/cycles/<int:pk>/outcome/", outcome_views.OutcomeView.as_view(), name="cycle-outcome"),
    path("v1/balance/", outcome_views.BalanceView.as_view(), name="balance"),
    path("v1/pending/", pending_views.PendingListView.as_view(), name="pending"),
    path("v1/pending/<str:namespace>/<str:name>/", pending_views.PendingPodView.as_view(), name="pending-pod"),
    path("v1/audit/verify", views.AuditVerifyView.as_view(), name="audit-verify"),
    path("v1/", include(router.urls)),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    # The split view serves Swagger UI's initialisation as a script of its own (?script=), which the
    # Content-Security-Policy allows; the single-request view inlines it.
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="api:schema"), name="docs"),
    re_path(r"^", views.api_not_found, name="not-found"),
]
