"""The extender verbs: parse, call the core, spool the record, answer. The leanest views in the codebase.

No request transaction and no ORM call: a verb must answer even with PostgreSQL down. The record goes to
the local spool; an ingester moves it to the database.

The record is appended *before* the answer is written and confirmed once the answer's last byte was handed
to the server (:class:`ConfirmedAnswer`); a record never confirmed (the process was killed in between, or the
client was gone) is stored by the ingester as a failed call. When the spool cannot take the record (disk full,
unwritable), ``SCHEDLENS_SPOOL_FAILURE`` decides: ``fail`` (default) answers 503 so kube-scheduler's
``ignorable`` setting decides; ``answer`` answers anyway. Either way the record is written to the log at
ERROR and ``schedlens_spool_append_failures_total`` counts it: never a silent drop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from dashboard import metrics
from dashboard.extender.runtime import get_runtime
from dashboard.spool import SPOOL_APPEND_FAILURES, Spool
from scheduler_core import wire
from scheduler_core.record import encode_event
from scheduler_core.verbs import VerbResult

log = logging.getLogger(__name__)

VERBS = ("filter", "prioritize", "bind", "preempt")
JSON = "application/json"


class _Refusal(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _read_body(request: HttpRequest) -> bytes:
    limit = settings.SCHEDLENS_MAX_BODY_BYTES
    declared = request.META.get("CONTENT_LENGTH") or ""
    if declared:
        try:
            length = int(declared)
        except ValueError:
            raise _Refusal(400, "Content-Length is not a number") from None
        if length > limit:
            raise _Refusal(413, f"request body of {length} bytes exceeds the limit of {limit} bytes")
    # Read at most one byte past the limit so a body without a length cannot exhaust memory.
    try:
        if not declared and "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower():
            # Django reads a request without Content-Length as empty; the WSGI server (gunicorn) decodes the chunks.
            body: bytes = request.META["wsgi.input"].read(limit + 1)
        else:
            body = request.read(limit + 1)
    except Exception as exc:  # a malformed chunk, a client gone mid-body: the server's parser raises its own errors
        raise _Refusal(400, f"the request body could not be read: {type(exc).__name__}: {exc}") from None
    if len(body) > limit:
        raise _Refusal(413, f"request body exceeds the limit of {limit} bytes")
    return body


@csrf_exempt
@require_POST
def verb(request: HttpRequest, profile: str, verb: str) -> HttpResponse:
    started = time.perf_counter()
    runtime = get_runtime()
    content_type = request.content_type or ""
    try:
        body = _read_body(request)
        if content_type != JSON:
            raise _Refusal(415, f"Content-Type must be {JSON}, got {content_type or 'none'}")
    except _Refusal as refusal:  # recorded like any call
        result: VerbResult = runtime.extender.refuse(verb, profile, refusal.status, refusal.message)
    else:
        result = getattr(runtime.extender, verb)(profile, body)
    record = encode_event(result.event)
    row_id: int | None = None
    try:
        row_id = runtime.spool.append(record, confirm_later=True)
    except Exception:
        result = _spool_failed(verb, result)
    seconds = time.perf_counter() - started
    metrics.observe_verb(
        verb=verb, profile=profile, known=profile in runtime.profiles, status=result.status, seconds=seconds
    )
    if row_id is None:
        return HttpResponse(result.body, status=result.status, content_type=JSON)
    return ConfirmedAnswer(runtime.spool, row_id, result.body, status=result.status, content_type=JSON)


def _spool_failed(verb: str, result: VerbResult) -> VerbResult:
    """The spool refused the record: fail the call or answer anyway (``SCHEDLENS_SPOOL_FAILURE``), never silently."""
    policy = settings.SCHEDLENS_SPOOL_FAILURE
    SPOOL_APPEND_FAILURES.labels(verb, policy).inc()
    # The log is the record's last home: the whole record, as JSON (the spool's own form may be binary).
    log.exception(
        "could not append the %s record to the spool (SCHEDLENS_SPOOL_FAILURE=%s); the record: %s",
        verb,
        policy,
        wire.encode(result.event).decode("utf-8", "replace"),
    )
    if policy == "answer":
        return result
    # The spool is the record's only durable home until ingest: failing the call lets kube-scheduler (or its
    # `ignorable` setting) decide, rather than placing a pod nobody can explain.
    return VerbResult(
        503, wire.encode({"error": "schedlens could not record this call (spool unavailable)"}), result.event
    )


class ConfirmedAnswer(HttpResponse):
    """An answer that confirms its spooled record once the WSGI server has written its last byte.

    The server iterates the response and writes each item; the code after the last ``yield`` runs only when it
    asks for more, i.e. after the write returned. A failed write (client gone) ends the iteration at the
    ``yield`` and the record stays unconfirmed. A caller that never iterates (Django's test client reads
    ``content``) gets the record confirmed at ``close()``.
    """

    def __init__(self, spool: Spool, row_id: int, content: bytes, **kwargs: Any) -> None:
        super().__init__(content, **kwargs)
        self._spool = spool
        self._row_id = row_id
        self._iterated = False

    def __iter__(self) -> Iterator[bytes]:
        self._iterated = True
        yield from self._container
        self._confirm()

    def close(self) -> None:
        try:
            super().close()
        finally:
            if not self._iterated:
                self._confirm()

    def _confirm(self) -> None:
        try:
            self._spool.confirm(self._row_id)
        except Exception:  # the ingester will store the call as "answer not confirmed": a false alarm, not a loss
            log.warning("could not confirm the answer of spool row %s", self._row_id, exc_info=True)
