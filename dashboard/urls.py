from django.contrib import admin
from django.urls import path, re_path

from dashboard import health
from dashboard.extender import views as extender

urlpatterns = [
    re_path(
        r"^extender/(?P<profile>[^/]+)/(?P<verb>filter|prioritize|bind|preempt)$",
        extender.verb,
        name="extender-verb",
    ),
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("admin/", admin.site.urls),
]
