"""Reads of the live pending list: the waiting pods with both halves of why (``scheduler_core.explanation.pending``).

The pods are the placement watcher's (``WaitingPod``, kept equal to its pod informer's unbound pods); their
attempts are the cycles recorded since the pod was created and the FailedScheduling Events the watcher recorded.
A few queries per list however many pods wait: never one per pod, never the API server.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Min, QuerySet
from django.utils import timezone

from dashboard.models import SchedulingCycle, VerbCall
from dashboard.placements.models import ObservationKind, PlacementObservation, WaitingPod
from dashboard.selectors.cycles import call_reads
from scheduler_core.explanation.pending import CycleAttempt, FailedEvent, PendingView, pair_attempts, pending_view
from scheduler_core.extender.record.structs import FILTER

LIST_LIMIT = 500
"""Pods listed at most (the longest waiting first): a page and a scrape stay bounded in a pod storm."""
ATTEMPTS_SHOWN = 20
"""Attempts kept per pod in the per-pod view (the newest)."""
SINCE_SLACK = timedelta(seconds=5)
"""Clocks differ between the API server and the replicas that timed our records."""


@dataclass(frozen=True, slots=True)
class PendingPod:
    namespace: str
    name: str
    uid: str
    scheduler_name: str
    waiting_since: datetime
    attempts: int
    last_attempt_at: datetime | None
    view: PendingView

    @property
    def waited_seconds(self) -> float:
        return max(0.0, (timezone.now() - self.waiting_since).total_seconds())

    @property
    def profile(self) -> str:
        """The schedlens profile of its newest cycle, else the scheduler name (kube-scheduler's profile)."""
        return self.view.profile or self.scheduler_name

    @property
    def summary(self) -> str:
        return self.view.summary


def waiting_pods(namespace: str | None = None) -> QuerySet[WaitingPod]:
    rows = WaitingPod.objects.all()
    return rows.filter(pod_namespace=namespace) if namespace else rows


def _views(rows: list[WaitingPod], *, attempts_shown: int) -> list[PendingPod]:
    if not rows:
        return []
    uids = [row.pod_uid for row in rows]
    since = min(row.waiting_since for row in rows) - SINCE_SLACK
    cycles: dict[str, list[SchedulingCycle]] = defaultdict(list)
    for cycle in (
        SchedulingCycle.objects.filter(pod_uid__in=uids, started_at__gte=since)
        .only("id", "pod_uid", "profile", "started_at", "candidate_count", "error")
        .order_by("started_at", "id")
    ):
        cycles[cycle.pod_uid].append(cycle)
    events: dict[str, list[PlacementObservation]] = defaultdict(list)
    for observation in PlacementObservation.objects.filter(
        pod_uid__in=uids, kind=ObservationKind.FAILED_SCHEDULING, occurred_at__gte=since
    ).order_by("occurred_at", "id"):
        events[observation.pod_uid].append(observation)
    # Only the attempts shown (and the one before, to say what changed) need their filter record: the others
    # count, and pair, by their times alone.
    shown = [c.pk for row in rows for c in _own(cycles[row.pod_uid], row)[-(attempts_shown + 1) :]]
    filter_calls = list(VerbCall.objects.filter(cycle_id__in=shown, verb=FILTER, http_status=200).order_by("id"))
    records = {read.call.cycle_id: read.recorded.filter for read in call_reads(calls=filter_calls)}
    pods = []
    for row in rows:
        own = [
            CycleAttempt(
                at=c.started_at.timestamp(),
                cycle_id=c.pk,
                profile=c.profile,
                filter_record=records.get(c.pk),
                candidates=c.candidate_count,
                error=c.error,
            )
            for c in _own(cycles[row.pod_uid], row)
        ]
        failed = [
            FailedEvent(at=o.occurred_at.timestamp(), message=o.message)
            for o in events[row.pod_uid]
            if o.occurred_at >= row.waiting_since - SINCE_SLACK
        ]
        view = pending_view(own, failed, limit=attempts_shown)
        times = [c.started_at for c in _own(cycles[row.pod_uid], row)] + [o.occurred_at for o in events[row.pod_uid]]
        pods.append(
            PendingPod(
                namespace=row.pod_namespace,
                name=row.pod_name,
                uid=row.pod_uid,
                scheduler_name=row.scheduler_name,
                waiting_since=row.waiting_since,
                attempts=len(pair_attempts(own, failed)),
                last_attempt_at=max(times) if times else None,
                view=view,
            )
        )
    return pods


def _own(cycles: list[SchedulingCycle], row: WaitingPod) -> list[SchedulingCycle]:
    return [c for c in cycles if c.started_at >= row.waiting_since - SINCE_SLACK]


def pending_list(*, namespace: str | None = None, limit: int = LIST_LIMIT) -> list[PendingPod]:
    """The waiting pods (the longest waiting first), each with its latest attempt's combined reasons."""
    return _views(list(waiting_pods(namespace)[:limit]), attempts_shown=1)


def pending_total(*, namespace: str | None = None) -> int:
    return waiting_pods(namespace).count()


def pending_glimpse(*, at_most: int = 99) -> tuple[int, bool]:
    """How many pods wait, up to ``at_most`` (and whether there are more): for a link on a busy page, without a
    COUNT over the whole list."""
    found = len(WaitingPod.objects.values_list("pk", flat=True)[: at_most + 1])
    return min(found, at_most), found > at_most


def pending_pod(*, namespace: str, name: str) -> PendingPod | None:
    """One waiting pod with its recent attempts, or None when no pod of that name is waiting."""
    row = WaitingPod.objects.filter(pod_namespace=namespace, pod_name=name).order_by("-waiting_since").first()
    if row is None:
        return None
    [pod] = _views([row], attempts_shown=ATTEMPTS_SHOWN)
    return pod


NO_ATTEMPT = "no attempt seen yet"
"""The reason label of a pod nothing has tried to place yet (kube-scheduler's queue, or its Events not yet seen)."""


@dataclass(frozen=True, slots=True)
class WaitingCount:
    scheduler: str
    profile: str
    source: str
    reason: str
    pods: int


def pending_by_reason(*, limit: int = LIST_LIMIT) -> list[WaitingCount]:
    """Pods waiting per (scheduler name, schedlens profile, source, reason) of their latest attempt, for ``/metrics``:
    a pod held back by two reasons counts under each. Over the ``limit`` pods waiting longest."""
    counts: dict[tuple[str, str, str, str], int] = defaultdict(int)
    for pod in pending_list(limit=limit):
        latest = pod.view.latest
        groups = latest.groups if latest is not None else ()
        if not groups:
            counts[(pod.scheduler_name, pod.view.profile, "", NO_ATTEMPT if latest is None else pod.summary)] += 1
        for group in groups:
            counts[(pod.scheduler_name, pod.view.profile, group.source, group.reason)] += 1
    return [WaitingCount(*key, pods=n) for key, n in sorted(counts.items())]


def pending_longest() -> dict[str, datetime]:
    """Per scheduler name, since when its longest-waiting pod waits (one aggregate over the whole list)."""
    rows = WaitingPod.objects.values("scheduler_name").annotate(since=Min("waiting_since")).order_by()
    return {row["scheduler_name"]: row["since"] for row in rows}
