"""The WSGI fast path (what gunicorn serves) answers as the Django view does, and leaves the rest to Django."""

from __future__ import annotations

import io
import json
import logging
from typing import Any

import pytest
from django.core.handlers.wsgi import WSGIHandler

from dashboard.extender.fast_path import ExtenderFastPath
from tests.support.paths import CAPTURES

JSON = "application/json"
FILTER = "001-filter.body.json"
PRIORITIZE = "002-prioritize.body.json"
"""Captured bodies, read when a test runs (a missing shared/ fails those tests, not the collection)."""


def body_of(body: bytes | str) -> bytes:
    if isinstance(body, str):
        return (CAPTURES / "B-filter-prioritize-nodecache-true" / body).read_bytes()
    return body


class Answer:
    def __init__(self, status: str, headers: list[tuple[str, str]], body: Any) -> None:
        self.status_code = int(status.split()[0])
        self.headers = dict(headers)
        self._body = body

    def read(self) -> bytes:
        """The answer as the server writes it: iterated, then closed."""
        try:
            return b"".join(self._body)
        finally:
            getattr(self._body, "close", lambda: None)()


def wsgi_call(path: str, body: bytes | str = b"", *, method: str = "POST", content_type: str = JSON) -> Answer:
    body = body_of(body)
    environ = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "8000",
        "HTTP_HOST": "127.0.0.1:8000",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "CONTENT_TYPE": content_type,
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": io.BytesIO(body),
        "wsgi.url_scheme": "http",
        "wsgi.errors": io.StringIO(),
    }
    started: list[Any] = []
    result = ExtenderFastPath(WSGIHandler())(
        environ, lambda status, headers, exc_info=None: started.append((status, headers))
    )
    return Answer(*started[0], result)


@pytest.mark.parametrize(
    ("path", "body", "content_type", "status"),
    [
        ("/extender/default/filter", FILTER, JSON, 200),
        ("/extender/default/prioritize", PRIORITIZE, JSON, 200),
        ("/extender/default/filter", FILTER, "application/json; charset=utf-8", 200),
        ("/extender/default/filter", b"", JSON, 400),
        ("/extender/default/filter", b'{"Pod":[],"Nodes":null,"NodeNames":[]}', JSON, 400),
        ("/extender/default/filter", FILTER, "text/plain", 415),
        ("/extender/nosuchprofile/filter", FILTER, JSON, 404),
        ("/extender/default/bind", b'{"PodName":"p","PodNamespace":"default","PodUID":"u","Node":"node-1"}', JSON, 200),
    ],
    ids=["filter", "prioritize", "charset", "empty", "wrong-type", "text-plain", "unknown-profile", "bind"],
)
def test_the_fast_path_answers_what_the_django_view_answers(client, runtime, path, body, content_type, status):
    body = body_of(body)
    through_django = client.post(path, data=body, content_type=content_type, CONTENT_TYPE=content_type)
    fast = wsgi_call(path, body, content_type=content_type)

    assert (fast.status_code, through_django.status_code) == (status, status)
    assert fast.read() == through_django.content
    assert fast.headers["Content-Type"] == through_django["Content-Type"] == JSON
    assert runtime.spool.depth() == 2, "each call is spooled once, whichever way it came"


def test_a_body_over_the_limit_is_refused_with_413_naming_the_limit(runtime, settings):
    settings.SCHEDLENS_MAX_BODY_BYTES = 1000
    answer = wsgi_call("/extender/default/filter", b'{"Pod":{},"NodeNames":[' + b'"n",' * 400 + b'"m"]}')
    assert answer.status_code == 413
    assert "exceeds the limit of 1000 bytes" in json.loads(answer.read())["error"]
    assert runtime.spool.depth() == 1


def test_the_record_is_confirmed_only_once_the_answer_was_written(runtime):
    answer = wsgi_call("/extender/default/filter", FILTER)
    assert [row.answered for row in runtime.spool.read_rows(10)] == [False]

    answer.read()

    assert [row.answered for row in runtime.spool.read_rows(10)] == [True]


def test_an_answer_the_server_never_wrote_stays_unconfirmed(runtime):
    answer = wsgi_call("/extender/default/filter", FILTER)
    getattr(answer._body, "close", lambda: None)()  # the client was gone before the write
    assert [row.answered for row in runtime.spool.read_rows(10)] == [False]


@pytest.mark.django_db  # Django's handler closes stale database connections per request
def test_other_methods_on_a_verb_url_are_django_s_405_and_not_recorded(runtime):
    answer = wsgi_call("/extender/default/filter", method="GET")
    assert answer.status_code == 405
    assert answer.headers["Allow"] == "POST"
    assert runtime.spool.depth() == 0


@pytest.mark.django_db  # Django's handler closes stale database connections per request
@pytest.mark.parametrize("path", ["/extender/default/filter/", "/extender/default/score", "/extender/default"])
def test_other_paths_under_the_prefix_are_django_s_404(runtime, path):
    answer = wsgi_call(path, FILTER)
    assert answer.status_code == 404
    assert runtime.spool.depth() == 0


@pytest.mark.django_db  # Django's handler closes stale database connections per request
def test_the_rest_of_the_site_is_still_django(runtime):
    answer = wsgi_call("/healthz", method="GET")
    assert answer.status_code == 200
    assert answer.headers["X-Frame-Options"] == "DENY"  # the production middleware ran


def test_a_refused_call_is_logged_as_django_logs_a_bad_request(runtime, caplog):
    with caplog.at_level(logging.WARNING, logger="dashboard.extender.fast_path"):
        answer = wsgi_call("/extender/default/filter", b"{")
    assert answer.status_code == 400
    assert "Bad Request: /extender/default/filter" in caplog.text
