"""The ``Unschedulable`` Event on a waiting pod: what holds it back, both sides, written when that changes.

kube-scheduler's own FailedScheduling Event carries only its counts (an extender's reasons lost from the pod's
condition, Project-HAMi/HAMi#2286); this one says which of schedlens's checks refused how many nodes, which node came
closest and what its check saw against the limit. Run by the placement watcher's pump after each sync of the live
list: a pod whose reasons (their digest, kept on its ``WaitingPod`` row) differ from those of its last Event gets a
new one, at most one per ``SCHEDLENS_PENDING_EVENT_SECONDS``. The Event goes through the same bounded queue and
thread as the Explained Event (``dashboard.pod_events``): dropped and counted, never raised, when it cannot be written.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta
from functools import partial
from urllib.parse import quote

from django.conf import settings
from django.utils import timezone

from dashboard import pod_events
from dashboard.placements.models import WaitingPod
from dashboard.placements.selectors import PendingPod, pending_list

REASON = "Unschedulable"


def reasons_digest(pod: PendingPod) -> str:
    """The same for the same reasons with the same counts, whatever the attempt's time or the figures' last digit; ""
    while the latest attempt is not concluded (our filter answered, kube-scheduler's FailedScheduling not yet seen:
    it may still bind the pod, and an Event now would tell half the story)."""
    latest = pod.view.latest
    if latest is None or not latest.message:
        return ""
    parts = [f"{g.source}|{g.plugin}|{g.reason}|{g.nodes}" for g in latest.groups] or [pod.summary]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def note(pod: PendingPod) -> str:
    """One paragraph: the one-line reasons, then the node closest to passing with its figure and the limit."""
    text = f"Pending after {pod.attempts} attempt{'s' if pod.attempts != 1 else ''}: {pod.summary}."
    latest = pod.view.latest
    if latest is not None and latest.closest:
        miss = latest.closest[0]
        seen = f"{miss.figure}, limit {miss.limit}" if miss.figure and miss.limit else miss.figure or miss.limit
        text += f" Closest: {miss.node}, failing {miss.plugin} only ({miss.reason}{'; ' + seen if seen else ''})."
    return text


def link(pod: PendingPod) -> str:
    base = settings.SCHEDLENS_PUBLIC_URL
    return f"{base}/pending/{quote(pod.namespace)}/{quote(pod.name)}/" if base else ""


def pending_events_emit() -> int:
    """Queue an Unschedulable Event for each waiting pod whose reasons changed since its last one (rate-limited);
    returns how many were queued."""
    if not settings.SCHEDLENS_POD_EVENTS:
        return 0
    emitter = pod_events.emitter()
    now = timezone.now()
    quiet = now - timedelta(seconds=settings.SCHEDLENS_PENDING_EVENT_SECONDS)
    rows = {row.pod_uid: row for row in WaitingPod.objects.only("pod_uid", "reasons_digest", "event_at")}
    queued = 0
    for pod in pending_list():
        row = rows.get(pod.uid)
        digest = reasons_digest(pod)
        if row is None or not digest or digest == row.reasons_digest:
            continue
        if row.event_at is not None and row.event_at > quiet:
            continue  # changed again too soon: the next sync after the quiet time writes the reasons as they are then
        WaitingPod.objects.filter(pk=row.pk).update(reasons_digest=digest, event_at=now)
        if emitter.unavailable:
            emitter.drop("unconfigured", pod_events.UNCONFIGURED)
            continue
        text = note(pod)
        job = pod_events.PodEventJob(
            namespace=pod.namespace,
            name=pod.name,
            uid=pod.uid,
            summary=partial(str, text),
            link=link(pod),
            reason=REASON,
            event_type="Warning",
        )
        queued += emitter.submit(job)
    return queued
