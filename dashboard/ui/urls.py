from django.urls import path

from dashboard.ui import views

app_name = "ui"

urlpatterns = [
    path("", views.history, name="history"),
    path("history/new/", views.history_new_rows, name="history-new"),
    path("cycles/<int:pk>/", views.decision, name="decision"),
    path("cycles/<int:pk>/why-not/", views.why_not, name="why-not"),
    path("cycles/<int:pk>/what-if/", views.what_if, name="what-if"),
    path("nodes/", views.nodes, name="nodes"),
    path("health/", views.health, name="health"),
]
