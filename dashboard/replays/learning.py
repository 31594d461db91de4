"""What a history replay's comparison of learned traffic with the constant reads from the database: the recorded
binds around the replayed cycles and the placement outcomes before them (``scheduler_core.history_replay.learning``
does the rest, without the database)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from django.conf import settings

from dashboard.models import Outcome, SchedulingCycle
from dashboard.outcomes.codec import windows_decode
from dashboard.outcomes.models import OutcomeStatus, PlacementOutcome
from scheduler_core.history_replay.learning import (
    Assumptions,
    Bind,
    LearnedHistory,
    LearningComparer,
    MeasuredPod,
    RecordedBinds,
)
from scheduler_core.plugins.traffic import NetworkTraffic, NetworkTrafficArgs
from scheduler_core.traffic_terms import window_seconds
from scheduler_core.workload_traffic import LOOKBACK_DAYS, PodSample, rate_after_warmup, workload_of

OWN_BIND_WITHIN = timedelta(minutes=10)
"""How long after its cycle started a pod's bind is looked for."""


def _traffic_args(description: Mapping[str, Any]) -> tuple[float, float]:
    """The candidate's ``assumedBytesPerPod`` and ``herdDecaySeconds`` (0: the traffic refresh interval, as the
    serving processes' bind log decays)."""
    given: Mapping[str, Any] = (description.get("pluginConfig") or {}).get(NetworkTraffic.name) or {}
    defaults = NetworkTrafficArgs()
    constant = float(given.get("assumedBytesPerPod", defaults.assumed_bytes_per_pod))
    decay = float(given.get("herdDecaySeconds", defaults.herd_decay_seconds))
    return constant, decay or settings.SCHEDLENS_TRAFFIC_REFRESH_SECONDS


def _measured(row: tuple[Any, ...]) -> MeasuredPod:
    cycle_id, bound_at, node, namespace, kind, name, status, stored = row
    windows = windows_decode(stored)
    longest = windows[-1] if windows else None
    measured = status == OutcomeStatus.MEASURED
    rate = rate_after_warmup((w.seconds, w.pod_bytes) for w in windows) if measured else None
    bound = bound_at.timestamp()
    return MeasuredPod(
        cycle_id=cycle_id,
        workload=workload_of(namespace, kind, name),
        sample=PodSample(rate, bound) if rate is not None else None,
        available_at=bound + (longest.seconds if longest is not None else 0),
        pod_bytes=longest.pod_bytes if longest is not None and measured else None,
        seconds=longest.seconds if longest is not None else 0,
        node_bytes={node: longest.node_bytes, **longest.runner_up_bytes} if longest is not None else {},
    )


def learning_comparer(
    *, ids: Sequence[int], before: str, candidate: Mapping[str, Any], cycles_limit: int = 200
) -> LearningComparer | None:
    """The comparer of the cycles ``ids`` (oldest first) under ``candidate`` (``Profile.describe()``), from
    ``before`` (``constant`` or ``learned``) to the other; None without cycles."""
    if not ids:
        return None
    times = SchedulingCycle.objects.filter(id__in=[ids[0], ids[-1]]).values_list("started_at", flat=True)
    if not times:
        return None
    first, last = min(times), max(times)
    constant, decay = _traffic_args(candidate)
    fields = ("cycle_id", "bound_at", "node", "pod_namespace", "workload_kind", "workload_name", "status", "windows")
    # The compared cycles' own outcomes too: a pod binds a moment after its cycle starts (its outcome says what it
    # measured; the learned table takes a pod only once its windows ended: ``LearnedHistory``).
    outcomes = PlacementOutcome.objects.filter(
        bound_at__gte=first - timedelta(days=LOOKBACK_DAYS), bound_at__lte=last + OWN_BIND_WITHIN
    ).values_list(*fields)
    pods = {pod.cycle_id: pod for pod in map(_measured, outcomes.iterator(chunk_size=2000))}
    bound = SchedulingCycle.objects.filter(
        outcome=Outcome.BOUND, finished_at__gt=first - timedelta(seconds=decay), finished_at__lte=last
    ).exclude(chosen_node="")
    binds = [
        Bind(cycle_id, at.timestamp(), node, pods[cycle_id].workload if cycle_id in pods else None)
        for cycle_id, at, node in bound.values_list("id", "finished_at", "chosen_node").iterator(chunk_size=2000)
    ]
    window = window_seconds(candidate.get("pluginConfig") or {})
    return LearningComparer(
        before=before,
        assumptions=Assumptions(LearnedHistory(pods.values()), constant, window),
        binds=RecordedBinds(binds),
        pods=pods,
        decay_seconds=decay,
        cycles_limit=cycles_limit,
    )
