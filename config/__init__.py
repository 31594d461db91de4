"""The project's configuration, apart from the app (``dashboard``): settings, URL and WSGI wiring, Celery, gunicorn.

The Celery app is loaded with Django (``DJANGO_SETTINGS_MODULE=config.settings`` imports this package first), so
that ``shared_task`` binds to it (``celery -A config``).
"""

from config.celery import app as celery_app

__all__ = ["celery_app"]
