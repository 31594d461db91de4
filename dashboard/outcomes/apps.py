from django.apps import AppConfig


class OutcomesConfig(AppConfig):
    name = "dashboard.outcomes"
    label = "outcomes"
    verbose_name = "placement outcomes"
    default_auto_field = "django.db.models.BigAutoField"
