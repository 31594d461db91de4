"""A WSGI app for the worker tests: answers which thread served the request, after reading its body.

``/spread`` answers only once ``SPREAD`` such requests are in the app at the same time: the test that sends them
from as many connections has made the pool start that many threads.
"""

import threading
from collections.abc import Callable, Iterable
from typing import Any

SPREAD = 3
_spread = threading.Barrier(SPREAD)


def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    if environ["PATH_INFO"] == "/spread":
        _spread.wait(timeout=10)
    body = str(threading.get_ident()).encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
