from django.apps import AppConfig


class PlacementsConfig(AppConfig):
    """Where pods really went: observations of ``watch_placements`` linked to the scheduling cycles."""

    name = "dashboard.placements"
    label = "placements"
    verbose_name = "placements"
    default_auto_field = "django.db.models.BigAutoField"
