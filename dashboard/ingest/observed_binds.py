"""Binds the placement watcher observed (kube-scheduler bound the pod itself), as the ingester and watcher share them.

Two writers finish such a cycle, in either order: the ingester brings its calls (through the spools, possibly late,
possibly split across batches) and the watcher brings the node (``dashboard.placements.services``). Both hold the
pod's lock (``cycles.lock_pods``) while they do, and:

* the node stays: a call folded in later re-derives the cycle from its calls (``cycle_summary.summarize``), which
  hold no bind, so :func:`keep_observed` puts the observed node back before the cycle is written;
* the Explained Event is written once, by whichever of the two completes the cycle last: :func:`claim_explanation`
  marks the observation in the same transaction, and only the writer whose mark took queues the Event after commit.
  A cycle is complete once the calls the Event summarizes are in (:func:`explainable`); one that never completes
  (another extender cut the candidates to one, a call lost) is explained without them after ``EXPLAIN_WAIT``.
  A cycle with a bind call was bound by schedlens: the ingester explains that call, as without a watcher.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from django.utils import timezone

from dashboard.models import Outcome, SchedulingCycle
from dashboard.placements.models import ObservationKind, PlacementObservation

EXPLAIN_WAIT = timedelta(seconds=30)
"""How long after an observed bind its Event waits for the cycle's calls; far beyond a spool's usual lag."""


def observed_binds(cycles: Iterable[SchedulingCycle]) -> dict[int, PlacementObservation]:
    """The bind observations linked to these stored cycles, by cycle id (one query)."""
    ids = [cycle.pk for cycle in cycles if cycle.pk is not None]
    if not ids:
        return {}
    rows = PlacementObservation.objects.filter(cycle_id__in=ids, kind=ObservationKind.BOUND).order_by("id")
    return {row.cycle_id: row for row in rows if row.cycle_id is not None}


def keep_observed(cycle: SchedulingCycle, observation: PlacementObservation) -> None:
    """After :func:`cycle_summary.summarize`: a cycle no bind call placed keeps the node the watcher saw."""
    if not cycle.chosen_node:
        cycle.chosen_node = observation.node
        cycle.outcome = Outcome.BOUND


def explainable(cycle: SchedulingCycle) -> bool:
    """The calls the Event summarizes are in: the filter, and prioritize unless the filter left a single node
    (kube-scheduler then asks no extender to prioritize)."""
    return cycle.filter_ms is not None and (cycle.prioritize_ms is not None or cycle.feasible_count == 1)


def claim_explanation(
    observation: PlacementObservation, cycle: SchedulingCycle, *, now: datetime | None = None
) -> bool:
    """Whether the caller is to queue ``cycle``'s Explained Event for ``observation``: True for exactly one caller.

    Inside the caller's transaction, under the pod's lock, with ``cycle`` as that transaction will write it. A cycle
    with a bind call settles the observation without an Event of its own (the bind's ingest writes it)."""
    if observation.explained_at is not None:
        return False
    now = now or timezone.now()
    ours = cycle.bind_ms is None
    if ours and not explainable(cycle) and observation.occurred_at > now - EXPLAIN_WAIT:
        return False
    claimed = PlacementObservation.objects.filter(pk=observation.pk, explained_at__isnull=True).update(explained_at=now)
    observation.explained_at = now
    return bool(claimed) and ours
