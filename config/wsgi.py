"""WSGI entry point (gunicorn ``config.wsgi:application``): the wiring of a web process.

The runtime is built here, in each worker after the fork, rather than on the first request: a bad profile file
then stops the worker at boot (and gunicorn with it) with a message naming profile, plugin and field, and the
first kube-scheduler call does not pay for loading profiles and the first traffic refresh. Extender verb calls
are answered before Django's request machinery (``dashboard/extender/fast_path.py``). Where the process also
ingests its spool (``SCHEDLENS_INGEST_IN_PROCESS``), that thread is started here too.
"""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

django_application = get_wsgi_application()

# These need the configured Django above.
from django.conf import settings  # noqa: E402

from dashboard.extender.fast_path import ExtenderFastPath  # noqa: E402
from dashboard.ingest.in_process import ingest_in_background  # noqa: E402
from dashboard.runtime import get_runtime  # noqa: E402

application = ExtenderFastPath(django_application)
runtime = get_runtime()
if settings.SCHEDLENS_INGEST_IN_PROCESS:
    ingest_in_background(spool=runtime.spool)
