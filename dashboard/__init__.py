"""The Django side of schedlens: settings, the extender views, the cycle record, and (later) the UI and API."""

# The Celery app is loaded with Django so that ``shared_task`` binds to it (``celery -A dashboard``).
from dashboard.celery import app as celery_app

__all__ = ["celery_app"]
