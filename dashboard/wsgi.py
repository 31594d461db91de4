"""WSGI entry point (gunicorn ``dashboard.wsgi:application``).

The extender runtime is built here, in each worker after the fork, rather than on the first request: a bad
profile file then stops the worker at boot (and gunicorn with it) with a message naming profile, plugin and
field, and the first kube-scheduler call does not pay for loading profiles and the first traffic refresh.
Extender verb calls are answered before Django's request machinery (``dashboard/extender/fast_path.py``).
"""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")

django_application = get_wsgi_application()

from dashboard.extender.fast_path import ExtenderFastPath  # noqa: E402  (needs the configured Django above)
from dashboard.extender.runtime import get_runtime  # noqa: E402

application = ExtenderFastPath(django_application)
get_runtime()
