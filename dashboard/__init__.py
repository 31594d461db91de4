"""The Django side of schedlens: settings, the extender's HTTP layer, the cycle record, the dashboard, the audit API."""

# The Celery app is loaded with Django so that ``shared_task`` binds to it (``celery -A dashboard``).
from dashboard.celery import app as celery_app

__all__ = ["celery_app"]
