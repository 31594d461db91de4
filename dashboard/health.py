"""Liveness and readiness for probes.

Readiness means: profiles loaded, the spool writable, and (with the Kubernetes node cache) the first lists of
Nodes and NodeResources read, so no verb answers from an empty cache.

"Writable" is what the verbs last saw: the probe itself writes nothing (it is polled). A failed append (disk
full, unwritable) makes this process unready until an append succeeds again or, since an unready replica gets
no verbs through its Service, until the spool's checkpoint thread manages a write of that record's size
(``Spool.probe_write``). Each gunicorn worker has its own spool handle, so each reports what it saw.

The depth shown is ``Spool.backlog`` (two index lookups), never a count of the rows: probes come every few seconds,
and a count reads the whole spool, which is largest exactly when the database is down and the probes matter most.
"""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse

from dashboard.runtime import get_runtime


def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


def readyz(request: HttpRequest) -> JsonResponse:
    runtime = get_runtime()
    try:
        depth = runtime.spool.backlog()
    except Exception as exc:
        return JsonResponse({"status": "unready", "reason": f"spool unavailable: {exc}"}, status=503)
    if (append_error := runtime.spool.last_append_error) is not None:
        return JsonResponse(
            {"status": "unready", "reason": f"spool cannot take appends: {append_error}", "spool_depth": depth},
            status=503,
        )
    cache = getattr(runtime.cluster, "status", None)
    cluster = cache() if callable(cache) else None
    if cluster is not None and not cluster.get("synced"):
        return JsonResponse(
            {"status": "unready", "reason": "node cache not synced yet", "cluster": cluster}, status=503
        )
    body = {"status": "ready", "profiles": sorted(runtime.profiles), "spool_depth": depth}
    if cluster is not None:
        body["cluster"] = cluster
    return JsonResponse(body)
