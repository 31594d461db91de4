from django.apps import AppConfig


class TrafficConfig(AppConfig):
    name = "dashboard.traffic"
    label = "traffic"
    verbose_name = "traffic prefetch"
    default_auto_field = "django.db.models.BigAutoField"
