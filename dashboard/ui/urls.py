from django.urls import path

from dashboard.ui import balance_views, pending_views, profile_views, replay_views, views

app_name = "ui"

urlpatterns = [
    path("", views.history, name="history"),
    path("history/new/", views.history_new_rows, name="history-new"),
    path("cycles/<int:pk>/", views.decision, name="decision"),
    path("cycles/<int:pk>/why-not/", views.why_not, name="why-not"),
    path("cycles/<int:pk>/what-if/", views.what_if, name="what-if"),
    path("pending/", pending_views.pending, name="pending"),
    path("pending/rows/", pending_views.pending_rows, name="pending-rows"),
    path("pending/<str:namespace>/<str:name>/", pending_views.pending_pod_page, name="pending-pod"),
    path("pending/<str:namespace>/<str:name>/body/", pending_views.pending_pod_body, name="pending-pod-body"),
    path("nodes/", views.nodes, name="nodes"),
    path("profiles/", profile_views.profiles, name="profiles"),
    path("health/", views.health, name="health"),
    path("balance/", balance_views.balance, name="balance"),
    path("replays/", replay_views.replays, name="replays"),
    path("replays/list/", replay_views.replays_list, name="replays-list"),
    path("replays/<int:pk>/", replay_views.replay, name="replay"),
    path("replays/<int:pk>/progress/", replay_views.replay_progress, name="replay-progress"),
]
