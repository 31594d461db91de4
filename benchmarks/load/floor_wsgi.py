"""WSGI entry of the floors (``gunicorn benchmarks.load.floor_wsgi:application``): no extender runtime.

``/floor/`` is an empty Django view behind the production middleware (``floor_urls.py``); ``/floor/wsgi`` is
answered before Django, as the extender fast path answers the verbs (``dashboard/extender/fast_path.py``): the
floor of gunicorn itself reading a body and writing an answer.
"""

import os
from collections.abc import Callable, Iterable
from typing import Any

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchmarks.load.floor_settings")
django_application = get_wsgi_application()


def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    if environ["PATH_INFO"] != "/floor/wsgi":
        return django_application(environ, start_response)
    environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))  # transferred like a verb's body
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", "2")])
    return [b"{}"]
