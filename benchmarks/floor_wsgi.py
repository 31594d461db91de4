"""WSGI entry of the empty-view floor (``gunicorn benchmarks.floor_wsgi:application``): no extender runtime."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchmarks.floor_settings")
application = get_wsgi_application()
