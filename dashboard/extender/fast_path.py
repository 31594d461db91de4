"""The extender verbs answered at the WSGI layer, before Django's request machinery.

kube-scheduler waits for filter and prioritize inside every scheduling cycle, so their fixed cost matters:
Django's handler, its signals and the dashboard's nine middleware (sessions, CSRF, messages, static files,
security headers, all for browsers) cost about as much as a 100-node verb itself. This layer answers
``POST /extender/<profile>/<verb>`` directly through :func:`dashboard.extender.calls.answer_call`, exactly as
the Django view does, and hands every other request, including any other method on those URLs, to Django
unchanged.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Iterator
from http import HTTPStatus
from typing import Any

from django.core.handlers.wsgi import get_path_info
from django.utils.http import parse_header_parameters

from dashboard.extender.calls import JSON, VERB_ROUTE, answer_call, confirm, read_body

log = logging.getLogger(__name__)

WSGIApplication = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

# The same route as config/urls.py's "extender-verb", on the path with its leading slash.
_ROUTE = re.compile(f"/{VERB_ROUTE}")
_STATUS_LINES = {status.value: f"{status.value} {status.phrase}" for status in HTTPStatus}
# Headers a browser would act on, should one ever load an answer: its type is JSON, never sniffed or framed.
_HEADERS = [("Content-Type", JSON), ("X-Content-Type-Options", "nosniff"), ("X-Frame-Options", "DENY")]


class ExtenderFastPath:
    """WSGI middleware: extender verb calls answered here, everything else by ``app`` (Django)."""

    def __init__(self, app: WSGIApplication) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        route = _ROUTE.fullmatch(get_path_info(environ)) if environ["REQUEST_METHOD"] == "POST" else None
        if route is None:
            return self.app(environ, start_response)
        declared = environ.get("CONTENT_LENGTH") or ""
        chunked = "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()
        stream = environ["wsgi.input"]
        content_type, _ = parse_header_parameters(environ.get("CONTENT_TYPE", ""))
        try:
            answer = answer_call(
                profile=route["profile"],
                verb=route["verb"],
                content_type=content_type,
                body=lambda: read_body(declared_length=declared, chunked=chunked, read=stream.read),
            )
        except Exception:  # a bug, not a bad request: logged like Django's handler would, answered as JSON
            log.exception("Internal Server Error: %s", environ.get("PATH_INFO"))
            answer_status, answer_body, row_id = 500, b'{"error":"internal error; see the extender log"}', None
        else:
            answer_status, answer_body, row_id = answer
        if 400 <= answer_status < 500:  # as Django's handler logs a refused request (the record says why in full)
            log.warning("%s: %s", HTTPStatus(answer_status).phrase, environ.get("PATH_INFO"))
        start_response(_STATUS_LINES[answer_status], [*_HEADERS, ("Content-Length", str(len(answer_body)))])
        if row_id is None:
            return [answer_body]
        return _ConfirmedBody(row_id, answer_body)


class _ConfirmedBody:
    """The answer's bytes; its spooled record is confirmed once the server has written them.

    The server asks for the next item only after the write of the previous one returned, so the code after the
    ``yield`` runs once the answer is out; a failed write (client gone) ends the iteration there and the record
    stays unconfirmed, and so does one the server closed without writing.
    """

    def __init__(self, row_id: int, body: bytes) -> None:
        self._row_id = row_id
        self._body = body

    def __iter__(self) -> Iterator[bytes]:
        yield self._body
        confirm(self._row_id)
