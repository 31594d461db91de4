"""What a history replay's comparison of learned traffic with the constant reads from the database: the recorded
binds around the replayed cycles and the placement outcomes before them (``scheduler_core.history_replay.learning``
does the rest, without the database)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import numpy as np
from django.conf import settings
from django.db.models import Q

from dashboard.models import Outcome, SchedulingCycle
from dashboard.outcomes.codec import windows_decode
from dashboard.outcomes.models import OutcomeStatus, PlacementOutcome
from scheduler_core.extender.protocol.workloads import WorkloadKey, workload_of
from scheduler_core.extender.record.structs import AssumedBytes
from scheduler_core.extender.scoring.plugins.traffic import NetworkTraffic, NetworkTrafficArgs
from scheduler_core.extender.scoring.traffic_terms import window_seconds
from scheduler_core.extender.scoring.workload_traffic import LOOKBACK_DAYS, PodSample, rate_after_warmup
from scheduler_core.history_replay.learning import (
    LEARNING_FIGURES,
    Assumptions,
    Bind,
    LearnedHistory,
    LearningComparer,
    MeasuredPod,
    RecordedBinds,
    with_herd,
)
from scheduler_core.history_replay.report import CONSTANT, LEARNED
from scheduler_core.history_replay.what_if import RecordedInputs

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


_OUTCOME_FIELDS = (
    "cycle_id",
    "bound_at",
    "node",
    "pod_namespace",
    "workload_kind",
    "workload_name",
    "status",
    "windows",
)
_OWNED_BY_NAME = ("ReplicaSet", "Job")
"""Owners whose name is their workload's and a suffix
(``scheduler_core.extender.protocol.workloads.workload_of``)."""


def _of_workloads(keys: set[WorkloadKey]) -> Q:
    """Outcome rows whose owner may stand for one of ``keys`` (a Deployment's pods are owned by its ReplicaSets)."""
    found = Q(pk__in=[])
    for key in keys:
        found |= Q(pod_namespace=key.namespace) & (
            Q(workload_kind=key.kind, workload_name=key.name)
            | Q(workload_kind__in=_OWNED_BY_NAME, workload_name__startswith=f"{key.name}-")
        )
    return found


def learning_comparer(
    *,
    ids: Sequence[int],
    before: str,
    candidate: Mapping[str, Any],
    cycles_limit: int = 200,
    narrow: bool = False,
) -> LearningComparer | None:
    """The comparer of the cycles ``ids`` (oldest first) under ``candidate`` (``Profile.describe()``), from
    ``before`` (``constant`` or ``learned``) to the other; None without cycles.

    ``narrow``: learn only the workloads of the pods bound around the cycles (a page's one decision), rather than
    every workload with outcomes in the lookback (a replay's thousands of cycles, which meet most of them anyway)."""
    if not ids:
        return None
    times = SchedulingCycle.objects.filter(id__in=[ids[0], ids[-1]]).values_list("started_at", flat=True)
    if not times:
        return None
    first, last = min(times), max(times)
    constant, decay = _traffic_args(candidate)
    # The compared cycles' own outcomes too: a pod binds a moment after its cycle starts (its outcome says what it
    # measured; the learned table takes a pod only once its windows ended: ``LearnedHistory``).
    lookback = PlacementOutcome.objects.filter(
        bound_at__gte=first - timedelta(days=LOOKBACK_DAYS), bound_at__lte=last + OWN_BIND_WITHIN
    )
    if narrow:
        near = lookback.filter(bound_at__gt=first - timedelta(seconds=decay))
        pods = {pod.cycle_id: pod for pod in map(_measured, near.values_list(*_OUTCOME_FIELDS))}
        wanted = {pod.workload for pod in pods.values() if pod.workload is not None}
        for pod in map(_measured, lookback.filter(_of_workloads(wanted)).values_list(*_OUTCOME_FIELDS).iterator()):
            if pod.workload in wanted:
                pods[pod.cycle_id] = pod
    else:
        pods = {pod.cycle_id: pod for pod in map(_measured, lookback.values_list(*_OUTCOME_FIELDS).iterator(2000))}
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


@dataclass(frozen=True, slots=True)
class NodeHerdRow:
    node: str
    measured_bytes: float | None
    recorded_herd: float | None
    """As recorded (None: the record kept no herd bytes for it)."""
    constant_herd: float
    learned_herd: float
    binds: int


@dataclass(frozen=True, slots=True)
class WhatIfLearning:
    """One decision's herd estimate rebuilt with traffic learned per workload and with the constant (the what-if's
    learning toggle): the inputs to replay under ``mode``, and the figures they follow from."""

    mode: str
    """``learned`` or ``constant``: the herd bytes of :attr:`inputs`."""
    inputs: RecordedInputs
    pod_assumed: dict[str, AssumedBytes]
    """Per mode, what the pod is assumed to add once bound."""
    recorded_pod_assumed: AssumedBytes | None
    nodes: list[NodeHerdRow]
    constant_bytes: float
    decay_seconds: float
    window_seconds: int
    figures: dict[str, str]


def learning_what_if(
    *, cycle_id: int, inputs: RecordedInputs, description: Mapping[str, Any], mode: str
) -> WhatIfLearning | None:
    """The decision ``cycle_id``'s inputs with its herd bytes rebuilt under ``mode`` (``learned`` or ``constant``),
    from the binds and outcomes recorded before it, under its profile ``description``; None when it has no
    ``NetworkTraffic`` prioritize record with traffic figures."""
    prioritize = inputs.prioritize
    plugin = next((p for p in prioritize.plugins if p.name == NetworkTraffic.name), None) if prioritize else None
    if prioritize is None or plugin is None:
        return None
    by_node: dict[str, float | None] = {}
    if inputs.filter is not None and inputs.filter.traffic_bytes:
        by_node.update(zip(inputs.filter.nodes, inputs.filter.traffic_bytes, strict=False))
    if plugin.raw:
        by_node.update(zip(prioritize.nodes, plugin.raw, strict=False))
    raw_list = [by_node.get(n) for n in prioritize.nodes]
    if all(r is None for r in raw_list):
        return None
    comparer = learning_comparer(ids=[cycle_id], before=CONSTANT, candidate=description, narrow=True)
    started = SchedulingCycle.objects.filter(pk=cycle_id).values_list("started_at", flat=True).first()
    if comparer is None or started is None:
        return None
    at = started.timestamp()
    raws = np.array([np.nan if r is None else r for r in raw_list], dtype=np.float64)
    herds = comparer.cycle_herds(cycle_id=cycle_id, at=at, nodes=prioritize.nodes, raws=raws)
    herd, binds = herds[mode]
    recorded = plugin.herd_bytes or []
    rows = [
        NodeHerdRow(
            node=node,
            measured_bytes=raw_list[i],
            recorded_herd=recorded[i] if i < len(recorded) else None,
            constant_herd=float(herds[CONSTANT][0][i]),
            learned_herd=float(herds[LEARNED][0][i]),
            binds=binds[i],
        )
        for i, node in enumerate(prioritize.nodes)
    ]
    return WhatIfLearning(
        mode=mode,
        inputs=with_herd(inputs, herd.tolist(), binds),
        pod_assumed=comparer.pod_assumed(cycle_id=cycle_id, at=at),
        recorded_pod_assumed=plugin.pod_assumed,
        nodes=rows,
        constant_bytes=comparer.assumptions.constant,
        decay_seconds=comparer.decay_seconds,
        window_seconds=comparer.assumptions.window_seconds,
        figures={k: LEARNING_FIGURES[k] for k in ("assumed", "herd")},
    )
