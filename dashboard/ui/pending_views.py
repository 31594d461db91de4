"""The pending pages: the pods waiting for a node now and, per pod, what holds it back (both sides, with counts,
the nodes closest to passing with the figure and the limit, what changed between attempts).

Thin views over ``dashboard.placements.selectors`` (the live list the placement watcher keeps): a page view reads
the database, never the API server. Both pages redraw their body every few seconds (htmx, as the history polls).
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import render
from django.views.decorators.http import require_GET

from dashboard.placements.selectors import pending_list, pending_pod, pending_total
from scheduler_core.explanation.pending import name_problem

POLL_SECONDS = 5


def _namespace(request: HttpRequest) -> tuple[str | None, HttpResponse | None]:
    namespace = request.GET.get("namespace", "").strip() or None
    if namespace is not None:
        problem = name_problem(namespace=namespace)
        if problem is not None:
            return None, HttpResponseBadRequest(f"{problem[0]}: {problem[1]}")
    return namespace, None


def _list_context(namespace: str | None) -> dict[str, object]:
    pods = pending_list(namespace=namespace)
    return {"pods": pods, "total": pending_total(namespace=namespace), "namespace": namespace or ""}


@require_GET
@login_required
def pending(request: HttpRequest) -> HttpResponse:
    namespace, refused = _namespace(request)
    if refused is not None:
        return refused
    context = {**_list_context(namespace), "poll_seconds": POLL_SECONDS}
    return render(request, "dashboard/pending.html", context)


@require_GET
@login_required
def pending_rows(request: HttpRequest) -> HttpResponse:
    """The list's body, for the page's poll."""
    namespace, refused = _namespace(request)
    if refused is not None:
        return refused
    context = {**_list_context(namespace), "poll_seconds": POLL_SECONDS}
    return render(request, "dashboard/_pending_list.html", context)


def _pod(request: HttpRequest, namespace: str, name: str, template: str, *, polled: bool) -> HttpResponse:
    problem = name_problem(namespace=namespace, name=name)
    if problem is not None:
        return HttpResponseBadRequest(f"{problem[0]}: {problem[1]}")
    pod = pending_pod(namespace=namespace, name=name)
    context = {"pod": pod, "namespace": namespace, "name": name, "poll_seconds": POLL_SECONDS}
    # The poll of a page already open gets a 200 saying the pod no longer waits: htmx swaps no error response.
    return render(request, template, context, status=200 if pod is not None or polled else 404)


@require_GET
@login_required
def pending_pod_page(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    return _pod(request, namespace, name, "dashboard/pending_pod.html", polled=False)


@require_GET
@login_required
def pending_pod_body(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    """The per-pod view's body, for the page's poll (it says so once the pod is no longer waiting)."""
    return _pod(request, namespace, name, "dashboard/_pending_pod_body.html", polled=True)
