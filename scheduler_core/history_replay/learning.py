"""Learned traffic against the constant over recorded history (issue 32, item 3): the history replay's comparison.

Each compared cycle is replayed twice under the candidate's scenario from its recorded inputs
(:func:`~scheduler_core.history_replay.fast_replay.replay_batch`), differing only in the herd bytes: rebuilt from the
binds recorded before it, each bind weighing what the herd estimate would have assumed for its pod under that mode
(:func:`herd_bytes`). Under ``learned`` a pod's assumed bytes are its workload's learned traffic as the table stood at
the time (:class:`LearnedHistory`): a pod's measured traffic counts only once the longest window of its outcome had
ended, never with hindsight. The pod's own assumed bytes are compared with what it measured (its outcome), and the
preferred node with the nodes the outcome measured.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

import msgspec
import numpy as np

from scheduler_core.extender.protocol.workloads import WorkloadKey
from scheduler_core.extender.record.structs import AssumedBytes
from scheduler_core.extender.scoring.plugins.traffic import NetworkTraffic
from scheduler_core.extender.scoring.workload_traffic import (
    HALF_LIFE_DAYS,
    LOOKBACK_DAYS,
    MIN_SAMPLES,
    PERCENTILE,
    Learned,
    LearnedTraffic,
    PodSample,
    assumed_bytes,
    decayed_percentile,
)
from scheduler_core.history_replay.fast_replay import replay_batch
from scheduler_core.history_replay.recorded_cycles import Floats, RecordedCycle
from scheduler_core.history_replay.report import (
    CONSTANT,
    LEARNED,
    Count,
    ErrorSummary,
    LearningComparison,
    LearningCycle,
    LearningSide,
    NodeHerd,
)
from scheduler_core.history_replay.what_if import RecordedInputs, Scenario
from scheduler_core.outcomes.arithmetic import RELATIVE_ERROR_BUCKETS, pod_estimate_over, relative_error

LEARNING_FIGURES: dict[str, str] = {
    "assumed": "a pod's assumed bytes under 'constant': assumedBytesPerPod; under 'learned': its workload's rate "
    "learned at that time × the query window (rounded to a byte), else the constant. The learned rate is the decayed "
    "p90 of the rates past the first window of the workload's pods bound in the 7 days before (at least 5 pods), a "
    "pod counting only once the longest window of its outcome had ended by then",
    "herd": "a node's herd bytes under a mode: Σ over the binds on it in the decay before the cycle (the cycle's own "
    "pod left out) of max(0, 1 − age / decay) × that bind's assumed bytes under the mode at its bind time, rounded "
    "to a byte; 0 on a node without a measurement",
    "changed": "k: compared cycles whose preferred node (highest final score under the candidate, first in order on "
    "a tie) differs between the modes; n: compared cycles",
    "error": "per pod with a measured outcome: (measured bytes in its longest window − e) / e, where e = assumed "
    "bytes × window / query window; mean, mean of the absolute values, and a histogram over the pods",
    "quietest": "k: cycles whose preferred node under the mode received no more than every other node the outcome "
    "measured (bound node and runner-ups) in its longest window; n: cycles whose preferred node was measured",
}

LEARNING_CAVEATS: tuple[str, ...] = (
    "Both modes are replayed from the same recorded inputs; only the herd bytes differ, rebuilt from the recorded "
    "binds (bound cycles) under each mode. The recorded herd bytes are not reused: a replica's log may have held "
    "other binds, so the herd rebuilt under the recorded mode can differ from the one recorded.",
    "A pod's workload is its outcome's (kube-state-metrics' owner): pods without an outcome, or whose owner is not "
    "known, are assumed the constant under both modes. A pod's assumed-bytes annotation (an override) is not in the "
    "outcomes: the comparison applies none.",
    "What a pod measured is what it did where it was bound; the quietest share reads only the nodes its outcome "
    "measured (the bound node and its runner-ups), so a preferred node outside them is not counted.",
)


@dataclass(frozen=True, slots=True)
class MeasuredPod:
    """A bound cycle's outcome, as the comparison reads it."""

    cycle_id: int
    workload: WorkloadKey | None
    sample: PodSample | None
    """Its rate past the first window, at its bind time (None: fewer than two windows with its own traffic)."""
    available_at: float
    """When the longest window of its outcome ended: from then on the learned table may hold it."""
    pod_bytes: float | None = None
    """What the pod received and sent in its longest window (None: not attributable)."""
    seconds: int = 0
    node_bytes: Mapping[str, float | None] = field(default_factory=dict)
    """What the bound node and its runner-ups received in the longest window."""


@dataclass(frozen=True, slots=True)
class Bind:
    cycle_id: int
    at: float
    node: str
    workload: WorkloadKey | None


class LearnedHistory:
    """The learned table as it stood at any moment, from the recorded outcomes
    (``scheduler_core.extender.scoring.workload_traffic``'s learning: the decayed percentile is the same whenever it is
    taken, so only which pods count changes)."""

    def __init__(
        self,
        pods: Iterable[MeasuredPod],
        *,
        percentile: float = PERCENTILE,
        half_life_days: float = HALF_LIFE_DAYS,
        min_samples: int = MIN_SAMPLES,
        lookback_days: int = LOOKBACK_DAYS,
    ) -> None:
        self.percentile = percentile
        self.half_life_days = half_life_days
        self.min_samples = min_samples
        self.lookback_days = lookback_days
        found: dict[WorkloadKey, list[tuple[float, PodSample]]] = {}
        for pod in pods:
            if pod.workload is not None and pod.sample is not None:
                found.setdefault(pod.workload, []).append((pod.available_at, pod.sample))
        self._available: dict[WorkloadKey, list[float]] = {}
        self._samples: dict[WorkloadKey, list[PodSample]] = {}
        for key, entries in found.items():
            entries.sort(key=lambda e: e[0])
            self._available[key] = [a for a, _ in entries]
            self._samples[key] = [s for _, s in entries]
        self._cache: dict[tuple[WorkloadKey, int, int], Learned | None] = {}

    def learned(self, workload: WorkloadKey | None, at: float) -> Learned | None:
        """``workload``'s learned traffic at ``at``: from its pods whose outcome had ended by then, bound in the
        lookback before it; None with fewer than ``min_samples``."""
        if workload is None or workload not in self._available:
            return None
        ended = bisect.bisect_right(self._available[workload], at)
        since = at - self.lookback_days * 86400.0
        recent = [s for s in self._samples[workload][:ended] if s.at >= since]
        key = (workload, ended, len(recent))
        if key not in self._cache:
            self._cache[key] = (
                Learned(
                    decayed_percentile(recent, at, percentile=self.percentile, half_life_days=self.half_life_days),
                    len(recent),
                )
                if len(recent) >= self.min_samples
                else None
            )
        return self._cache[key]

    def table(self, workload: WorkloadKey | None, at: float) -> LearnedTraffic:
        found = self.learned(workload, at)
        by_workload = {workload: found} if workload is not None and found is not None else {}
        return LearnedTraffic(by_workload, at, self.percentile, self.lookback_days, self.min_samples)


@dataclass(frozen=True, slots=True)
class Assumptions:
    """What the herd estimate assumes per pod under each mode (the candidate's constant and query window)."""

    history: LearnedHistory
    constant: float
    window_seconds: int

    def of(self, mode: str, workload: WorkloadKey | None, at: float) -> AssumedBytes:
        return assumed_bytes(
            constant=self.constant,
            workload=workload,
            override=None,
            learned=self.history.table(workload, at) if mode == LEARNED else None,
            window_seconds=self.window_seconds,
        )


class RecordedBinds:
    """The binds recorded around the compared cycles, oldest first."""

    def __init__(self, binds: Iterable[Bind]) -> None:
        self.binds = sorted(binds, key=lambda b: (b.at, b.cycle_id))
        self._times = [b.at for b in self.binds]

    def before(self, at: float, seconds: float) -> Sequence[Bind]:
        """The binds in ``(at − seconds, at)``."""
        return self.binds[bisect.bisect_right(self._times, at - seconds) : bisect.bisect_left(self._times, at)]


def herd_bytes(
    binds: Sequence[Bind],
    nodes: Sequence[str],
    *,
    at: float,
    decay_seconds: float,
    assumed: Mapping[int, float],
    own_cycle: int,
) -> tuple[Floats, list[int]]:
    """Per node of ``nodes``: Σ ``max(0, 1 − age / decay) × assumed[bind]`` of the binds on it (the herd estimate's
    decay, ``scheduler_core.extender.scoring.herd.HerdEstimator``), rounded to a byte; and how many binds weigh on
    it."""
    position = {node: i for i, node in enumerate(nodes)}
    summed = np.zeros(len(nodes))
    counts = [0] * len(nodes)
    for bind in binds:
        i = position.get(bind.node)
        if i is None or bind.cycle_id == own_cycle:
            continue
        weight = max(0.0, 1.0 - max(0.0, at - bind.at) / decay_seconds)
        if weight > 0:
            summed[i] += weight * assumed[bind.cycle_id]
            counts[i] += 1
    return np.rint(summed), counts


def _quietest(preferred: str, measured: Mapping[str, float | None]) -> bool | None:
    mine = measured.get(preferred)
    others = [b for n, b in measured.items() if n != preferred and b is not None]
    if mine is None or not others:
        return None
    return mine <= min(others)


def _bucket(value: float) -> int:
    return bisect.bisect_left(RELATIVE_ERROR_BUCKETS, value)


@dataclass
class _SideTotals:
    mode: str
    errors: list[float] = field(default_factory=list)
    quietest: Count = field(default_factory=Count)
    sources: dict[str, int] = field(default_factory=dict)

    def side(self, basis: Mapping[str, str]) -> LearningSide:
        counts = [0] * (len(RELATIVE_ERROR_BUCKETS) + 1)
        for value in self.errors:
            counts[_bucket(value)] += 1
        n = len(self.errors)
        error = ErrorSummary(
            pods=n,
            mean=sum(self.errors) / n if n else None,
            mean_abs=sum(abs(e) for e in self.errors) / n if n else None,
            bounds=list(RELATIVE_ERROR_BUCKETS),
            counts=counts,
        )
        self.quietest.basis = basis["quietest"]
        return LearningSide(self.mode, error, self.quietest, dict(sorted(self.sources.items())))


def _timestamp(text: str) -> float | None:
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


class LearningComparer:
    """Compares the two modes cycle by cycle (:meth:`add`, oldest first) and totals them (:meth:`report`)."""

    def __init__(
        self,
        *,
        before: str,
        assumptions: Assumptions,
        binds: RecordedBinds,
        pods: Mapping[int, MeasuredPod],
        decay_seconds: float,
        cycles_limit: int = 200,
    ) -> None:
        if before not in (CONSTANT, LEARNED):
            raise ValueError(f"before must be {CONSTANT!r} or {LEARNED!r}, not {before!r}")
        self.modes = (before, LEARNED if before == CONSTANT else CONSTANT)
        self.assumptions = assumptions
        self.binds = binds
        self.pods = pods
        self.decay_seconds = decay_seconds
        self.cycles_limit = cycles_limit
        self.not_compared: dict[str, int] = {}
        self.changed = Count()
        self.totals = [_SideTotals(self.modes[0]), _SideTotals(self.modes[1])]
        self.listed: list[tuple[bool, int, LearningCycle]] = []
        self._assumed: dict[tuple[str, int], float] = {}

    def _skip(self, reason: str) -> None:
        self.not_compared[reason] = self.not_compared.get(reason, 0) + 1

    def _bind_assumed(self, mode: str, binds: Sequence[Bind]) -> dict[int, float]:
        found: dict[int, float] = {}
        for bind in binds:
            key = (mode, bind.cycle_id)
            if key not in self._assumed:
                self._assumed[key] = self.assumptions.of(mode, bind.workload, bind.at).bytes
            found[bind.cycle_id] = self._assumed[key]
        return found

    def cycle_herds(
        self, *, cycle_id: int, at: float, nodes: Sequence[str], raws: Floats
    ) -> dict[str, tuple[Floats, list[int]]]:
        """Per mode, the herd bytes of ``nodes`` (a cycle's, started at ``at``) and how many binds weigh on each;
        none on a node without a measurement (``raws`` NaN), as the engine adds none there."""
        recent = self.binds.before(at, self.decay_seconds)
        found: dict[str, tuple[Floats, list[int]]] = {}
        for mode in self.modes:
            herd, counts = herd_bytes(
                recent,
                nodes,
                at=at,
                decay_seconds=self.decay_seconds,
                assumed=self._bind_assumed(mode, recent),
                own_cycle=cycle_id,
            )
            herd[np.isnan(raws)] = 0.0
            found[mode] = (herd, [0 if math.isnan(r) else c for r, c in zip(raws.tolist(), counts, strict=True)])
        return found

    def pod_assumed(self, *, cycle_id: int, at: float) -> dict[str, AssumedBytes]:
        """Per mode, what the herd estimate assumes the cycle's pod adds (its workload: its outcome's)."""
        pod = self.pods.get(cycle_id)
        workload = pod.workload if pod is not None else None
        return {mode: self.assumptions.of(mode, workload, at) for mode in self.modes}

    def add(self, cycle: RecordedCycle, scenario: Scenario) -> None:
        columns = cycle.columns
        if columns is None:
            self._skip("its records need the one-by-one replay (the comparison uses the vectorized one)")
            return
        positions = columns.shape.positions
        if positions is None or not columns.has_traffic_plugin:
            self._skip("no NetworkTraffic prioritize record (no herd estimate to compare)")
            return
        at = _timestamp(cycle.started_at)
        if at is None:
            self._skip("no start time recorded")
            return
        names = columns.candidates
        sent = [names[p] for p in positions.tolist()]
        raws: Floats
        if columns.traffic_raw is not None:
            raws = columns.traffic_raw
        elif columns.shape.filter_traffic is not None:
            raws = columns.shape.filter_traffic[positions]
        else:
            self._skip("no traffic figures recorded (NetworkTraffic scored every node neutral)")
            return
        herds = self.cycle_herds(cycle_id=cycle.cycle_id, at=at, nodes=sent, raws=raws)
        pod = self.pods.get(cycle.cycle_id)
        workload = pod.workload if pod is not None else None
        preferred: list[str] = []
        assumed: list[AssumedBytes] = []
        for mode in self.modes:
            outcome = replay_batch([replace(columns, herd=herds[mode][0])], scenario)
            best = int(outcome.preferred[0])
            preferred.append(names[best] if best >= 0 else "")
            assumed.append(self.assumptions.of(mode, workload, at))
        counts = herds[self.modes[0]][1]
        changed = preferred[0] != preferred[1]
        self.changed.n += 1
        self.changed.k += changed
        errors: list[float | None] = [None, None]
        quietest: list[bool | None] = [None, None]
        for i, totals in enumerate(self.totals):
            source = assumed[i].source
            totals.sources[source] = totals.sources.get(source, 0) + 1
            if pod is not None and pod.pod_bytes is not None:
                estimate = pod_estimate_over(
                    assumed[i].bytes, seconds=pod.seconds, query_window_seconds=scenario.window_seconds
                )
                errors[i] = relative_error(pod.pod_bytes, estimate)
                if errors[i] is not None:
                    totals.errors.append(errors[i])  # type: ignore[arg-type]
            if pod is not None:
                quietest[i] = _quietest(preferred[i], pod.node_bytes)
                if quietest[i] is not None:
                    totals.quietest.n += 1
                    totals.quietest.k += bool(quietest[i])
        shown = [n for n in dict.fromkeys(preferred) if n]
        index = {n: i for i, n in enumerate(sent)}
        nodes = [
            NodeHerd(
                node=n,
                measured_bytes=None if math.isnan(raws[index[n]]) else float(raws[index[n]]),
                herd_before=float(herds[self.modes[0]][0][index[n]]),
                herd_after=float(herds[self.modes[1]][0][index[n]]),
                binds=counts[index[n]],
            )
            for n in shown
            if n in index
        ]
        entry = LearningCycle(
            cycle_id=cycle.cycle_id,
            started_at=cycle.started_at,
            pod_namespace=cycle.pod_namespace,
            pod_name=cycle.pod_name,
            workload=workload.text() if workload is not None else "",
            before_node=preferred[0],
            after_node=preferred[1],
            before_assumed=assumed[0],
            after_assumed=assumed[1],
            nodes=nodes,
            measured_pod_bytes=pod.pod_bytes if pod is not None else None,
            measured_seconds=pod.seconds if pod is not None else 0,
            before_error=errors[0],
            after_error=errors[1],
            before_quietest=quietest[0],
            after_quietest=quietest[1],
        )
        self.listed.append((not changed, len(self.listed), entry))
        if len(self.listed) > 2 * self.cycles_limit:
            self.listed.sort(key=lambda e: (e[0], e[1]))
            del self.listed[self.cycles_limit :]

    def report(self) -> LearningComparison:
        self.listed.sort(key=lambda e: (e[0], e[1]))
        self.changed.basis = LEARNING_FIGURES["changed"]
        return LearningComparison(
            before=self.modes[0],
            after=self.modes[1],
            constant_bytes=self.assumptions.constant,
            decay_seconds=self.decay_seconds,
            window_seconds=self.assumptions.window_seconds,
            cycles_compared=self.changed.n,
            not_compared=dict(sorted(self.not_compared.items(), key=lambda kv: -kv[1])),
            changed=self.changed,
            before_side=self.totals[0].side(LEARNING_FIGURES),
            after_side=self.totals[1].side(LEARNING_FIGURES),
            cycles=[entry for _, _, entry in self.listed[: self.cycles_limit]],
            cycles_limit=self.cycles_limit,
            figures=dict(LEARNING_FIGURES),
            caveats=list(LEARNING_CAVEATS),
        )


def with_herd(inputs: RecordedInputs, herd: Sequence[float], binds: Sequence[int]) -> RecordedInputs:
    """``inputs`` with ``NetworkTraffic``'s herd bytes (and their bind counts) replaced, aligned with its prioritize
    nodes: the what-if's replay of one decision under another mode
    (:func:`scheduler_core.history_replay.what_if.replay`)."""
    prioritize = inputs.prioritize
    if prioritize is None:
        return inputs
    plugins = [
        msgspec.structs.replace(p, herd_bytes=list(herd), herd_binds=list(binds))
        if p.name == NetworkTraffic.name
        else p
        for p in prioritize.plugins
    ]
    return replace(inputs, prioritize=msgspec.structs.replace(prioritize, plugins=plugins))
