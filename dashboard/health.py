"""Liveness and readiness for probes. Readiness means: profiles loaded and the spool writable."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse

from dashboard.extender.runtime import get_runtime


def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


def readyz(request: HttpRequest) -> JsonResponse:
    runtime = get_runtime()
    try:
        depth = runtime.spool.depth()
    except Exception as exc:
        return JsonResponse({"status": "unready", "reason": f"spool unavailable: {exc}"}, status=503)
    return JsonResponse({"status": "ready", "profiles": sorted(runtime.profiles), "spool_depth": depth})
