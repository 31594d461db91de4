"""The extender verbs: parse, call the core, spool the record, answer. The leanest views in the codebase.

No request transaction and no ORM call: a verb must answer even with PostgreSQL down. The record goes to
the local spool; an ingester moves it to the database.
"""

from __future__ import annotations

import logging
import time

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from dashboard import metrics
from dashboard.extender.runtime import get_runtime
from scheduler_core import wire
from scheduler_core.record import encode_event
from scheduler_core.verbs import VerbResult

log = logging.getLogger(__name__)

VERBS = ("filter", "prioritize", "bind", "preempt")
JSON = "application/json"


def _json_error(status: int, message: str) -> HttpResponse:
    return HttpResponse(wire.encode({"error": message}), status=status, content_type=JSON)


def _read_body(request: HttpRequest) -> bytes | HttpResponse:
    limit = settings.SCHEDLENS_MAX_BODY_BYTES
    declared = request.META.get("CONTENT_LENGTH") or ""
    if declared:
        try:
            length = int(declared)
        except ValueError:
            return _json_error(400, "Content-Length is not a number")
        if length > limit:
            return _json_error(413, f"request body of {length} bytes exceeds the limit of {limit} bytes")
    # Read at most one byte past the limit so a body without a length cannot exhaust memory.
    body = request.read(limit + 1)
    if len(body) > limit:
        return _json_error(413, f"request body exceeds the limit of {limit} bytes")
    return body


@csrf_exempt
@require_POST
def verb(request: HttpRequest, profile: str, verb: str) -> HttpResponse:
    started = time.perf_counter()
    body = _read_body(request)
    if isinstance(body, HttpResponse):
        return body
    content_type = request.content_type or ""
    runtime = get_runtime()
    handler = getattr(runtime.extender, verb)
    if content_type != JSON:
        result: VerbResult = runtime.extender.refuse(
            verb, profile, 415, f"Content-Type must be {JSON}, got {content_type or 'none'}"
        )
    else:
        result = handler(profile, body)
    try:
        runtime.spool.append(encode_event(result.event))
    except Exception:
        # The spool is the record's only home until ingest: failing here fails the call, so kube-scheduler
        # (or its `ignorable` setting) decides, rather than placing a pod nobody can explain.
        log.exception("could not append the %s record to the spool", verb)
        result = VerbResult(
            503, wire.encode({"error": "schedlens could not record this call (spool unavailable)"}), result.event
        )
    seconds = time.perf_counter() - started
    metrics.observe_verb(
        verb=verb, profile=profile, known=profile in runtime.profiles, status=result.status, seconds=seconds
    )
    return HttpResponse(result.body, status=result.status, content_type=JSON)
