from django.contrib import admin
from django.urls import include, path, re_path

from dashboard import health, metrics
from dashboard.extender import views as extender
from dashboard.extender.calls import VERB_ROUTE

urlpatterns = [
    re_path(
        f"^{VERB_ROUTE}$",
        extender.verb,
        name="extender-verb",
    ),
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics.metrics_view, name="metrics"),
    path("admin/", admin.site.urls),
    path("api/", include("dashboard.api.urls")),
    path("accounts/", include("django.contrib.auth.urls")),
    path("", include("dashboard.ui.urls")),
]
