"""One extender call, whichever HTTP layer carried it: read the body, call the core, spool the record, answer.

Two thin adapters call :func:`answer_call`: the WSGI fast path (``dashboard/extender/fast_path.py``), which
serves kube-scheduler in production without Django's request machinery, and the Django view
(``dashboard/extender/views.py``), which serves the same URLs through Django's test client and any stack that
does not go through ``config.wsgi``. Both answer the same bytes with the same status.

No request transaction and no ORM call: a verb must answer even with PostgreSQL down. The record goes to the
local spool; an ingester moves it to the database.

The record is appended *before* the answer is written and confirmed (:func:`confirm`) once the answer's last
byte was handed to the server; a record never confirmed (the process was killed in between, or the client was
gone) is stored by the ingester as a failed call. When the spool cannot take the record (disk full,
unwritable), ``SCHEDLENS_SPOOL_FAILURE`` decides: ``fail`` (default) answers 503 so kube-scheduler's
``ignorable`` setting decides; ``answer`` answers anyway. Either way the record is written to the log at
ERROR and ``schedlens_spool_append_failures_total`` counts it: never a silent drop.

A bind through the API server spooled its intent before asking (``dashboard.bind_intents``); its record is appended
in the transaction that removes the intent (``settles``), so a process killed in between leaves the intent for a
restarted replica to reconcile, and one killed after leaves the record.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import NamedTuple

from django.conf import settings

from dashboard.extender import metrics
from dashboard.runtime import get_runtime
from dashboard.spool import SPOOL_APPEND_FAILURES
from scheduler_core.extender.protocol import wire
from scheduler_core.extender.record.spool_codec import encode_event
from scheduler_core.extender.record.structs import PRIORITIZE, VERBS
from scheduler_core.extender.verbs import VerbResult

log = logging.getLogger(__name__)

JSON = "application/json"
VERB_ROUTE = rf"extender/(?P<profile>[^/]+)/(?P<verb>{'|'.join(VERBS)})"
"""A verb's URL path (``urlPrefix`` + verb), without the leading slash: routed by ``config/urls.py`` and
answered by the fast path."""


BODY_CUT_SHORT = "the request body could not be read: the connection broke before its end"
BODY_CHUNKS_MALFORMED = "the request body could not be read: its chunked transfer encoding is malformed"


class BodyRefusedError(Exception):
    """The request cannot be answered by a verb (size, length, type): answered with ``status``, and recorded."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class Answer(NamedTuple):
    status: int
    body: bytes
    row_id: int | None
    """The spooled record to confirm once the answer is written; None when the spool refused it."""


def read_body(*, declared_length: str, chunked: bool, read: Callable[[int], bytes]) -> bytes:
    """The request body, at most ``SCHEDLENS_MAX_BODY_BYTES``; ``read(n)`` reads up to n bytes of it.

    A body without a length is read only when it is chunked (the WSGI server decodes the chunks); otherwise it
    is empty, as Django reads it.
    """
    limit: int = settings.SCHEDLENS_MAX_BODY_BYTES
    length = limit + 1  # at most one byte past the limit, so a body without a length cannot exhaust memory
    if declared_length:
        try:
            length = int(declared_length)
        except ValueError:
            raise BodyRefusedError(400, "Content-Length is not a number") from None
        if length > limit:
            raise BodyRefusedError(413, f"request body of {length} bytes exceeds the limit of {limit} bytes")
        if length < 0:
            raise BodyRefusedError(400, "Content-Length is negative")
    elif not chunked:
        return b""
    try:
        body = read(length)
    except OSError:  # the connection broke or timed out mid-body
        log.warning("the request body could not be read", exc_info=True)
        raise BodyRefusedError(400, BODY_CUT_SHORT) from None
    except Exception:  # the WSGI server's parser refused the chunks, in its own words: those are for the log
        log.warning("the request body could not be read", exc_info=True)
        raise BodyRefusedError(400, BODY_CHUNKS_MALFORMED) from None
    if len(body) > limit:
        raise BodyRefusedError(413, f"request body exceeds the limit of {limit} bytes")
    return body


def answer_call(*, profile: str, verb: str, content_type: str, body: Callable[[], bytes]) -> Answer:
    """Answer one verb call and spool its record; ``body()`` reads the request body or raises BodyRefusedError."""
    started = time.perf_counter()
    runtime = get_runtime()
    try:
        data = body()
        if content_type != JSON:
            raise BodyRefusedError(415, f"Content-Type must be {JSON}, got {content_type or 'none'}")
    except BodyRefusedError as refusal:  # recorded like any call
        result: VerbResult = runtime.extender.refuse(verb, profile, refusal.status, refusal.message)
    else:
        result = getattr(runtime.extender, verb)(profile, data)
    record = encode_event(result.event, deriving=settings.SCHEDLENS_SPOOL_FORM == "deriving")
    row_id: int | None = None
    try:
        row_id = runtime.spool.append(record, confirm_later=True, settles=result.intent)
    except Exception:
        result = _spool_failed(verb, result)
    seconds = time.perf_counter() - started
    known = profile in runtime.profiles
    metrics.observe_verb(verb=verb, profile=profile, known=known, status=result.status, seconds=seconds)
    if verb == PRIORITIZE:
        metrics.observe_prioritize(profile=profile, known=known, status=result.status, record=result.event.prioritize)
    return Answer(result.status, result.body, row_id)


def confirm(row_id: int) -> None:
    """The answer of spool row ``row_id`` was handed to the server in full."""
    try:
        get_runtime().spool.confirm(row_id)
    except Exception:  # the ingester will store the call as "answer not confirmed": a false alarm, not a loss
        log.warning("could not confirm the answer of spool row %s", row_id, exc_info=True)


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
