"""The extender verbs as a Django view: the adapter Django's test client and any non-fast-path stack reach.

In production ``config.wsgi`` answers these URLs before Django (``fast_path.py``); both adapters call
:func:`dashboard.extender.calls.answer_call`, so they answer the same bytes with the same status.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from dashboard.extender.calls import JSON, answer_call, confirm, read_body


@csrf_exempt
@require_POST
def verb(request: HttpRequest, profile: str, verb: str) -> HttpResponse:
    declared = request.META.get("CONTENT_LENGTH") or ""
    # Django reads a request without Content-Length as empty; the WSGI server (gunicorn) decodes the chunks.
    reader = request.read if declared else request.META["wsgi.input"].read
    chunked = "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower()
    answer = answer_call(
        profile=profile,
        verb=verb,
        content_type=request.content_type or "",
        body=lambda: read_body(declared_length=declared, chunked=chunked, read=reader),
    )
    if answer.row_id is None:
        return HttpResponse(answer.body, status=answer.status, content_type=JSON)
    return ConfirmedAnswer(answer.row_id, answer.body, status=answer.status, content_type=JSON)


class ConfirmedAnswer(HttpResponse):
    """An answer that confirms its spooled record once the WSGI server has written its last byte.

    The server iterates the response and writes each item; the code after the last ``yield`` runs only when it
    asks for more, i.e. after the write returned. A failed write (client gone) ends the iteration at the
    ``yield`` and the record stays unconfirmed. A caller that never iterates (Django's test client reads
    ``content``) gets the record confirmed at ``close()``.
    """

    def __init__(self, row_id: int, content: bytes, **kwargs: Any) -> None:
        super().__init__(content, **kwargs)
        self._row_id = row_id
        self._iterated = False

    def __iter__(self) -> Iterator[bytes]:
        self._iterated = True
        yield from self._container  # type: ignore[attr-defined]  # HttpResponse's chunks: private, not in django-stubs
        confirm(self._row_id)

    def close(self) -> None:
        try:
            super().close()
        finally:
            if not self._iterated:
                confirm(self._row_id)
