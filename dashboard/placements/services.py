"""Writes of placement observations: record one, link it to its cycle, and conclude the cycle from it.

Matching: the newest cycle of the pod's UID that started before the observation (``CLOCK_SKEW`` allows for
one-second API timestamps and clocks of different machines), within ``MATCH_WINDOW``.

The watcher may see a binding before the verbs' records of that cycle reach the database (they travel through
each replica's spool). So :func:`placements_reconcile` runs periodically: it links observations that found no cycle
yet and re-applies recent ones, which makes the outcome converge whatever the order of arrival. A late call the
ingester folds into a concluded cycle keeps its node, and the Explained Event is written by whichever of the two
completes the cycle last (``dashboard.ingest.observed_binds``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from dashboard import pod_events
from dashboard.ingest.cycles import lock_pods
from dashboard.ingest.observed_binds import claim_explanation
from dashboard.models import Outcome, SchedulingCycle
from dashboard.placements.models import ObservationKind, PlacementObservation, WaitingPod
from dashboard.services.node_tallies import tally_placement
from scheduler_core.kube.placement_watch import Observation
from scheduler_core.kube.placement_watch import WaitingPod as WatchedPod

log = logging.getLogger(__name__)

MATCH_WINDOW = timedelta(minutes=10)
"""A cycle older than this before the observation is another attempt (kube-scheduler retries within minutes)."""
CLOCK_SKEW = timedelta(seconds=2)
RECONCILE_WINDOW = MATCH_WINDOW + timedelta(minutes=5)
"""How far back :func:`placements_reconcile` looks: late spools, then re-summarized cycles, settle within it."""


def _when(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


def placements_record(
    *,
    key: str,
    kind: str,
    pod_uid: str,
    pod_namespace: str,
    pod_name: str,
    occurred_at: float,
    node: str = "",
    scheduler_name: str = "",
    reason: str = "",
    message: str = "",
) -> PlacementObservation:
    """Record an observation once (by ``key``), link it to its cycle and conclude the cycle from it."""
    observation = Observation(
        kind,  # type: ignore[arg-type]  # checked by placements_record_all
        key,
        pod_uid,
        pod_namespace,
        pod_name,
        occurred_at,
        node=node,
        scheduler_name=scheduler_name,
        reason=reason,
        message=message,
    )
    return placements_record_all([observation])[0]


def placements_record_all(observations: Sequence[Observation]) -> list[PlacementObservation]:
    """Record each observation once (by ``key``), link each to its cycle and conclude the cycle from it, in order.

    What does not depend on the order is done for all of them at once, since a backlog's binds arrive by the
    hundred: one insert (a fact already recorded, by this watcher or another, is kept as it was), one read, one
    delete of the pending rows of the pods bound or deleted. Then each is linked and applied in turn, as it arrived:
    a pod's FailedScheduling seen before its bind decides which attempt the bind belongs to."""
    for observation in observations:
        if observation.kind not in ObservationKind.values:
            raise ValueError(f"unknown observation kind {observation.kind!r}")
    now = timezone.now()
    first: dict[str, Observation] = {}  # the first of each key, in arrival order (the ids' order, as one by one)
    for observation in observations:
        first.setdefault(observation.key, observation)
    PlacementObservation.objects.bulk_create(
        [
            PlacementObservation(
                key=o.key,
                kind=o.kind,
                pod_uid=o.pod_uid,
                pod_namespace=o.namespace,
                pod_name=o.name,
                node=o.node,
                scheduler_name=o.scheduler_name,
                reason=o.reason,
                message=o.message,
                occurred_at=_when(o.occurred_at),
                observed_at=now,
            )
            for o in first.values()
        ],
        ignore_conflicts=True,
    )
    stored = PlacementObservation.objects.in_bulk(list(first), field_name="key")
    gone = {o.pod_uid for o in observations if o.kind in (ObservationKind.BOUND, ObservationKind.DELETED)}
    if gone:  # no longer waiting, whatever the next sync says
        WaitingPod.objects.filter(pod_uid__in=sorted(gone)).delete()
    recorded = []
    for observation in observations:
        row = stored[observation.key]
        _settle(row)
        recorded.append(row)
    return recorded


def placements_waiting_sync(pods: Sequence[WatchedPod], *, complete: bool = True) -> int:
    """Make the live pending list (``WaitingPod``) what the pod watch says; returns rows added or removed.

    ``complete`` False (a pod watch has not listed yet): add and update only, since a pod missing from an
    incomplete view may still be waiting.
    """
    now = timezone.now()
    by_uid = {pod.pod_uid: pod for pod in pods if pod.pod_uid}
    changed = 0
    with transaction.atomic():
        if complete:
            changed += WaitingPod.objects.exclude(pod_uid__in=list(by_uid)).delete()[0]
        known = set(WaitingPod.objects.filter(pod_uid__in=list(by_uid)).values_list("pod_uid", flat=True))
        fresh = [
            WaitingPod(
                pod_uid=pod.pod_uid,
                pod_namespace=pod.namespace,
                pod_name=pod.name,
                scheduler_name=pod.scheduler_name,
                waiting_since=_when(pod.since),
                seen_at=now,
            )
            for uid, pod in by_uid.items()
            if uid not in known
        ]
        WaitingPod.objects.bulk_create(fresh, ignore_conflicts=True)
        changed += len(fresh)
    return changed


def placements_reconcile(*, now: datetime | None = None) -> int:
    """Link recent observations still without a cycle and re-apply those their cycle does not say yet; returns how
    many changed a row.

    Only the observations :func:`_apply` could still change anything for are read (:func:`_unsettled`): re-applying
    every one in the window on every pass made the watcher's work per pod grow with the rate of binds."""
    since = (now or timezone.now()) - RECONCILE_WINDOW
    changed = 0
    for observation in _unsettled(PlacementObservation.objects.filter(occurred_at__gte=since)).select_related("cycle"):
        changed += _settle(observation)
    return changed


def _unsettled(observations: QuerySet[PlacementObservation]) -> QuerySet[PlacementObservation]:
    """``observations`` that :func:`_settle` may still act on: those without a cycle, binds whose cycle names no node
    or whose Event is not settled (``explained_at``), failures whose cycle is still pending without a node. For any
    other, :func:`_apply` writes nothing."""
    return observations.filter(
        Q(cycle__isnull=True)
        | Q(kind=ObservationKind.BOUND, cycle__chosen_node="")
        | Q(kind=ObservationKind.BOUND, explained_at__isnull=True)
        | Q(kind=ObservationKind.FAILED_SCHEDULING, cycle__outcome=Outcome.PENDING, cycle__chosen_node="")
    )


def _settle(observation: PlacementObservation) -> int:
    """Link if possible, then make the cycle say what the observation says. Returns rows changed (0..2)."""
    changed = 0
    if observation.cycle_id is None:
        cycle = _matching_cycle(observation)
        if cycle is None:
            return 0
        observation.cycle = cycle
        observation.save(update_fields=["cycle"])
        changed += 1
    changed += _apply(observation)
    return changed


def _matching_cycle(observation: PlacementObservation) -> SchedulingCycle | None:
    at = observation.occurred_at
    cycle = (
        SchedulingCycle.objects.filter(
            pod_uid=observation.pod_uid, started_at__lte=at + CLOCK_SKEW, started_at__gte=at - MATCH_WINDOW
        )
        .order_by("-started_at", "-id")
        .first()
    )
    if cycle is None:
        return None
    if observation.kind == ObservationKind.BOUND and cycle.outcome not in (Outcome.PENDING, Outcome.BOUND):
        # The newest cycle we hold failed, yet the pod was bound: the attempt that bound it has not reached
        # the database yet. Wait for it rather than pin the binding on the failed attempt.
        return None
    return cycle


def _apply(observation: PlacementObservation) -> int:
    if observation.cycle_id is None:  # never: _settle links it first (and no cycle has a null id)
        return 0
    cycles = SchedulingCycle.objects.filter(pk=observation.cycle_id)
    if observation.kind == ObservationKind.BOUND:
        with transaction.atomic():
            # The ingester's lock on the pod: a late call it folds into the cycle keeps the node observed
            # (``observed_binds.keep_observed``), and the per-node placements follow whichever writes last.
            lock_pods([observation.pod_uid])
            # Only a cycle that names no node yet: when schedlens bound the pod itself its record already says where.
            concluded = cycles.filter(chosen_node="").update(chosen_node=observation.node, outcome=Outcome.BOUND)
            if concluded:
                tally_placement(observation.node)
            # The Event once the cycle's calls are in: now if they are, else by the ingester when the last arrives.
            explain = False
            if observation.explained_at is None:
                cycle = cycles.only("filter_ms", "prioritize_ms", "feasible_count", "bind_ms").first()
                explain = cycle is not None and claim_explanation(observation, cycle)
        if explain and observation.cycle_id is not None:
            _explain(observation.cycle_id)
        return concluded
    if observation.kind == ObservationKind.FAILED_SCHEDULING:
        # kube-scheduler gave up on this attempt after our verbs answered (in-tree filters, a failed bind, ...).
        return cycles.filter(outcome=Outcome.PENDING, chosen_node="").update(outcome=Outcome.UNSCHEDULABLE)
    return 0


def _explain(cycle_id: int) -> None:
    """Queue the pod's Explained Event (``dashboard.pod_events``): once, by whichever of the watcher and the ingester
    completed the cycle last (``dashboard.ingest.observed_binds``)."""
    try:
        pod_events.explained_placement(cycle_id=cycle_id)
    except Exception as exc:  # the placement is recorded; an Event is a courtesy and never fails it
        log.warning("could not queue the Explained Event of cycle %s", cycle_id, exc_info=True)
        pod_events.emitter().drop("error", f"preparing an Explained Event failed: {type(exc).__name__}: {exc}")
