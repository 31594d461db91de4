from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _ensure_partitions(sender: AppConfig, using: str, **kwargs: Any) -> None:
    """After every ``migrate`` (the deploy's migrate job, ``make serve``, a test database): the record's day
    partitions from today on exist before the first cycle is stored, not an hour later when beat first runs."""
    # Imported here: apps.py is loaded before the models exist.
    from dashboard.services.partitions import partitions_ensure

    if using == "default":
        partitions_ensure()


class DashboardConfig(AppConfig):
    name = "dashboard"
    verbose_name = "schedlens"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Registers the system checks; imported once the models are loaded (the checks read them).
        from dashboard import checks  # noqa: F401

        post_migrate.connect(_ensure_partitions, sender=self)
