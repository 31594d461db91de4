from django.apps import AppConfig


class ReplaysConfig(AppConfig):
    """History replays: a stretch of recorded cycles replayed under a candidate profile, with the report."""

    name = "dashboard.replays"
    label = "replays"
    verbose_name = "history replays"
    default_auto_field = "django.db.models.BigAutoField"
