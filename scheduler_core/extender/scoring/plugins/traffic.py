"""NetworkTraffic (score) and TrafficThreshold (filter): placement by recently received bytes."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from itertools import repeat
from operator import attrgetter
from typing import ClassVar, Literal, cast

import numpy as np
from numpy.typing import NDArray

from scheduler_core.extender.protocol.cluster import NodeInfo
from scheduler_core.extender.record.structs import NETWORK_TRAFFIC, TRAFFIC_THRESHOLD, AssumedBytes, ReconciledBind
from scheduler_core.extender.scoring.herd import HerdEstimator, RecentBinds, positions_by_number
from scheduler_core.extender.scoring.plugins.base import (
    NEUTRAL_SCORE,
    PASS,
    CycleContext,
    PluginArgs,
    ScoreColumns,
    ScoreResult,
    Verdict,
    candidate_positions,
    shared_column,
)
from scheduler_core.extender.scoring.units import human_rate
from scheduler_core.extender.scoring.workload_traffic import assumed_bytes
from scheduler_core.traffic import (
    DEFAULT_DEVICE_NAME,
    DEFAULT_NODE_LABEL,
    DEFAULT_QUERY_MODE,
    DEFAULT_WINDOW_MINUTES,
    QueryMode,
    TrafficQuery,
    TrafficSnapshot,
)

Floats = NDArray[np.float64]

_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_name = attrgetter("name")
DEFAULT_MAX_STALENESS_SECONDS = 120.0
DEFAULT_MAX_BYTES_PER_SECOND = 125_000_000.0
STALE_REASON = "metrics stale"
"""The missing reason :func:`read_traffic` records for a snapshot older than ``maxStalenessSeconds``."""
NO_DATA_REASON = "no traffic data yet"


class TrafficArgs(PluginArgs):
    """The original NetworkTrafficArgs (address, deviceName, timeRangeInMinutes) plus what operators asked for."""

    address: str = ""
    """Prometheus URL; empty uses ``PROMETHEUS_URL`` (without it, the demo's synthetic source or no measurement)."""
    device_name: str = DEFAULT_DEVICE_NAME
    time_range_in_minutes: int = DEFAULT_WINDOW_MINUTES
    node_label: str = DEFAULT_NODE_LABEL
    query_mode: QueryMode = DEFAULT_QUERY_MODE
    max_staleness_seconds: float = DEFAULT_MAX_STALENESS_SECONDS
    """Older snapshots count as missing: scheduling on minutes-old traffic is worse than not using it."""
    missing_policy: Literal["neutral", "fail"] = "neutral"
    """A node without usable metrics (no series, no snapshot, or one older than ``maxStalenessSeconds``):
    ``neutral`` scores it 50 and lets it pass the threshold, so a Prometheus outage never makes the cluster
    unschedulable; ``fail`` scores it 0 and fails it in ``TrafficThreshold`` (an unmeasured node may be saturated)."""

    def __post_init__(self) -> None:
        if not 1 <= self.time_range_in_minutes <= 1440:
            raise ValueError("timeRangeInMinutes must be between 1 and 1440")
        if not self.device_name:
            raise ValueError("deviceName must not be empty")
        if not _LABEL_NAME.match(self.node_label):
            raise ValueError("nodeLabel must be a Prometheus label name")
        if self.max_staleness_seconds <= 0:
            raise ValueError("maxStalenessSeconds must be positive")

    @property
    def fail_missing(self) -> bool:
        return self.missing_policy == "fail"

    def query(self) -> TrafficQuery:
        return TrafficQuery(
            address=self.address,
            device_name=self.device_name,
            time_range_minutes=self.time_range_in_minutes,
            node_label=self.node_label,
            query_mode=self.query_mode,
        )


class NetworkTrafficArgs(TrafficArgs):
    assumed_bytes_per_pod: float = 300_000_000.0
    """Bytes (over the query window, like the raw figures) a freshly bound pod is assumed to add to its node
    until a refresh measures it: 1 MB/s for the default 5 minutes. A saturated gigabit link (125 MB/s) shared by
    the kubelet's default 110 pods is ~1.1 MB/s per pod. 0 turns the herd mitigation off."""
    herd_decay_seconds: float = 0.0
    """How long a bind weighs on its node, decaying linearly; 0 means one traffic refresh interval."""
    learn_workload_traffic: bool = False
    """Assume, for a pod whose workload has enough measured pods, what they did rather than ``assumedBytesPerPod``
    (``scheduler_core.extender.scoring.workload_traffic``)."""
    reconcile_herd: bool = False
    """Once a bound pod's own traffic shows in the node's measurement, count only what the measurement does not hold
    yet, ``max(0, assumed − observed)``, instead of the linear decay (``scheduler_core.extender.scoring.herd``); within
    ``herdDecaySeconds`` still."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.assumed_bytes_per_pod < 0:
            raise ValueError("assumedBytesPerPod must not be negative")
        if self.herd_decay_seconds < 0:
            raise ValueError("herdDecaySeconds must not be negative")


class TrafficThresholdArgs(TrafficArgs):
    max_bytes_per_second: float = DEFAULT_MAX_BYTES_PER_SECOND
    """A saturated gigabit link: a node receiving more than this is busy enough to avoid outright."""
    fail_on_missing: bool = False
    """Missing metrics pass by default so a Prometheus outage does not make the cluster unschedulable.
    ``true`` is the same as ``missingPolicy: fail``."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.max_bytes_per_second <= 0:
            raise ValueError("maxBytesPerSecond must be positive")

    @property
    def fail_missing(self) -> bool:
        return self.fail_on_missing or self.missing_policy == "fail"


@dataclass(frozen=True, slots=True)
class TrafficReading:
    """A usable snapshot, or why there is none."""

    snapshot: TrafficSnapshot | None
    missing_reason: str
    age_seconds: float | None
    error: str = ""
    """Why the data may be older than expected (the last refresh failed, Redis was unreachable, …)."""

    @property
    def note(self) -> str:
        """The explanation kept in the record: why data is missing, and what went wrong getting it."""
        return "; ".join(part for part in (self.missing_reason, self.error) if part)


def read_traffic(ctx: CycleContext, args: TrafficArgs) -> TrafficReading:
    snapshot = ctx.traffic.latest(args.query())
    if snapshot is None:
        return TrafficReading(None, NO_DATA_REASON, None)
    if snapshot.fetched_at <= 0:  # a source that never answered: only its error is known
        return TrafficReading(None, NO_DATA_REASON, None, snapshot.error)
    age = snapshot.age_seconds(ctx.now)
    if age > args.max_staleness_seconds:
        return TrafficReading(None, STALE_REASON, age, snapshot.error)
    return TrafficReading(snapshot, "", age, snapshot.error)


def node_bytes(ctx: CycleContext, snapshot: TrafficSnapshot, nodes: Sequence[NodeInfo]) -> list[float | None]:
    """Each node's bytes in ``snapshot`` (None: no series), looked up once and shared, read-only.

    The threshold filter and the filter's record, or the score and the prioritize record, read the same column,
    and calls with the same candidate list (``scheduler_core.extender.candidates``) share it until the next snapshot: at
    5000 nodes each lookup pass is a quarter of a millisecond or more.
    """

    def column() -> list[float | None]:
        return list(map(snapshot.bytes_by_node.get, map(_name, nodes)))

    return shared_column(ctx.shared, ("node_bytes", snapshot.query), (snapshot, nodes), column)


def _bind_positions(ctx: CycleContext, nodes: Sequence[NodeInfo], binds: RecentBinds) -> NDArray[np.intp]:
    """Each recent bind's position among the candidates (-1: not one); by node number when the log numbers them,
    the table kept per candidate list and extended as the log numbers new names."""
    positions = candidate_positions(ctx, nodes)
    if binds.node_ids is None:
        return np.fromiter(map(positions.get, binds.nodes, repeat(-1)), np.intp, len(binds.nodes))
    key = ("bind positions", id(binds.id_names))
    found = ctx.shared.get(key)
    known = found[1] if found is not None and found[0][0] is binds.id_names and found[0][1] is nodes else None
    table = positions_by_number(binds.id_names, positions, known)
    if table is not known:
        ctx.shared.put(key, ((binds.id_names, nodes), table))
    return table[binds.node_ids]


def _floats(values: list[float | None]) -> Floats:
    return np.asarray(values, dtype=np.float64)


class NetworkTraffic:
    """Less traffic, higher score: 100 − raw·100/max over the candidates (all zero → 100 each)."""

    name: ClassVar[str] = NETWORK_TRAFFIC
    args_type: ClassVar[type[PluginArgs]] = NetworkTrafficArgs

    def __init__(self, args: NetworkTrafficArgs) -> None:
        self.args = args

    def score(self, ctx: CycleContext, nodes: Sequence[NodeInfo]) -> ScoreResult:
        reading = read_traffic(ctx, self.args)
        missing_score = 0.0 if self.args.fail_missing else NEUTRAL_SCORE
        count = len(nodes)
        if reading.snapshot is None:
            columns = ScoreColumns([missing_score] * count, None, [reading.missing_reason] * count)
            return ScoreResult(
                columns, note=reading.note, metric_age_seconds=reading.age_seconds, missing_score=missing_score
            )
        raws = node_bytes(ctx, reading.snapshot, nodes)
        unmeasured = shared_column(
            ctx.shared, ("unmeasured", reading.snapshot.query), (raws,), lambda: raws.count(None)
        )
        herd = HerdEstimator(
            self.args.assumed_bytes_per_pod, self.args.herd_decay_seconds or ctx.binds.default_decay_seconds
        )
        binds = ctx.binds
        # Herd bytes per candidate: each bind's candidate position found by name in C, the decayed bytes summed
        # per position in numpy, and added to the node's measured bytes (x + 0.0 is x for a node without binds).
        herd_column: list[float] = []
        herd_binds: list[int] = []
        herd_newest: list[int | None] = []
        extra: Floats | None = None
        if herd.enabled and binds.nodes:
            at = _bind_positions(ctx, nodes, binds)
            candidate = at >= 0
            if candidate.any():
                times = np.asarray(binds.times, dtype=np.float64)[candidate]
                own = binds.bytes[candidate] if binds.bytes is not None else None
                observed = self._observed(reading.snapshot, binds, candidate, times)
                extra = herd.extra_bytes_at(at[candidate], times, ctx.now, len(nodes), own, observed)
                counts, herd_newest = herd.binds_at(at[candidate], times, ctx.now, len(nodes))
                if observed is not None:
                    ctx.herd_reconciled[self.name] = _reconciled(
                        herd, at[candidate], times, ctx.now, own, observed, binds, candidate, raws
                    )
                if unmeasured:  # a node without a series gets no herd bytes: it is scored as missing
                    missing = [i for i, raw in enumerate(raws) if raw is None]
                    extra[missing] = 0.0
                    counts[missing] = 0
                    for i in missing:
                        herd_newest[i] = None
                herd_column = extra.tolist()
                herd_binds = counts.tolist()
        # Per-node text is left to the explanation (it has ``raw`` and ``herd_bytes``): formatting 1000
        # strings per call is the single largest cost of a large prioritize.
        details: list[str] | None = None
        values: list[float] | Floats
        if unmeasured:
            effective: list[float | None] = raws
            if extra is not None:
                pairs = zip(raws, herd_column, strict=True)
                effective = [None if raw is None else raw + bytes_ for raw, bytes_ in pairs]
            known = [value for value in effective if value is not None]
            highest = max(known, default=0.0)
            scored = iter(traffic_scores(known, highest).tolist())
            values = [missing_score if value is None else next(scored) for value in effective]
            details = ["no traffic series for node" if value is None else "" for value in effective]
        else:
            # Every node has a series: in numpy, the same IEEE operations per node as the loop above (x + herd,
            # then 100 − x·factor), on the snapshot's column as an array, made once per candidate list.
            measured: Floats = shared_column(
                ctx.shared, ("node_bytes array", reading.snapshot.query), (raws,), partial(_floats, raws)
            )
            present = measured if extra is None else measured + extra
            values = traffic_scores(present, float(present.max()) if count else 0.0)
        note = reading.note
        if herd.enabled and ctx.binds.note:
            note = "; ".join(part for part in (note, ctx.binds.note) if part)
        columns = ScoreColumns(values, raws, details, herd_column, unmeasured, herd_binds, herd_newest)
        return ScoreResult(
            columns,
            note=note,
            metric_age_seconds=reading.age_seconds,
            missing_score=missing_score,
            pod_assumed=self.pod_assumed(ctx) if herd.enabled else None,
        )

    def _observed(
        self, snapshot: TrafficSnapshot, binds: RecentBinds, candidate: NDArray[np.bool_], times: Floats
    ) -> Floats | None:
        """Each candidate bind's pod's own bytes in ``snapshot`` (NaN: not observed, so it decays: no series, or a
        snapshot from before the bind); None when this profile does not reconcile or nothing was observed."""
        by_pod = snapshot.bytes_by_pod
        if not self.args.reconcile_herd or not by_pod or not binds.pods:
            return None
        pods = [pod for pod, kept in zip(binds.pods, candidate.tolist(), strict=True) if kept]
        found = np.fromiter(map(by_pod.get, pods, repeat(math.nan)), np.float64, len(pods))
        found[times >= snapshot.fetched_at] = math.nan  # measured before the pod was bound: not its traffic yet
        return None if np.isnan(found).all() else found

    def pod_assumed(self, ctx: CycleContext) -> AssumedBytes:
        """What the pod is assumed to add to its node once bound: its override, its workload's learned traffic (when
        this profile learns), or the constant. A dictionary lookup: the table is learned in the background."""
        pod = ctx.pod
        return assumed_bytes(
            constant=self.args.assumed_bytes_per_pod,
            workload=pod.workload,
            override=pod.assumed_bytes_override,
            learned=ctx.learned if self.args.learn_workload_traffic else None,
            window_seconds=self.args.query().window_seconds,
        )


def _reconciled(
    herd: HerdEstimator,
    positions: NDArray[np.intp],
    times: Floats,
    now: float,
    own: Floats | None,
    observed: Floats,
    binds: RecentBinds,
    candidate: NDArray[np.bool_],
    raws: list[float | None],
) -> list[ReconciledBind]:
    """The record's figures of the binds counted by their pods' traffic: still weighing (younger than the decay),
    observed, on a measured node (an unmeasured one gets no herd bytes), in the binds' order."""
    assumed = herd.assumed(own, len(times))
    counted = herd.counted(assumed, observed, times, now)
    weighing = (np.maximum(0.0, now - times) < herd.decay_seconds) & ~np.isnan(observed)
    pods = [pod for pod, kept in zip(binds.pods, candidate.tolist(), strict=True) if kept]
    return [
        ReconciledBind(node, pods[i], float(assumed[i]), float(observed[i]), float(counted[i]))
        for i in np.flatnonzero(weighing).tolist()
        if raws[node := int(positions[i])] is not None
    ]


def traffic_scores(estimates: Sequence[float] | Floats, highest: float) -> Floats:
    """NetworkTraffic's score of each estimate: ``100 − estimate·(100 / highest)``, 100 each when ``highest`` is 0.

    The one formula of the engine, the replay and the explanations. When ``highest`` is a subnormal fraction of a
    byte (``increase()`` is fractional), ``100 / highest`` overflows to infinity and would score 0 × ∞ = NaN: the
    ratio is taken first then, so such estimates score in proportion like any others.
    """
    values = np.asarray(estimates, dtype=np.float64)
    if not highest > 0:
        return np.full(len(values), 100.0)
    factor = 100.0 / highest
    if math.isfinite(factor):
        return 100.0 - values * factor
    return 100.0 - values / highest * 100.0


class TrafficThreshold:
    """Fails nodes whose receive rate over the window exceeds ``maxBytesPerSecond``."""

    name: ClassVar[str] = TRAFFIC_THRESHOLD
    args_type: ClassVar[type[PluginArgs]] = TrafficThresholdArgs
    judges_nodes_alone: ClassVar[bool] = True

    def __init__(self, args: TrafficThresholdArgs) -> None:
        self.args = args
        # The figure in the reason is the threshold, the same for every node, so kube-scheduler's
        # "0/N nodes are available" message counts all such nodes under one reason.
        self._reason = f"receive rate above {human_rate(args.max_bytes_per_second)}"

    def filter(self, ctx: CycleContext, nodes: Sequence[NodeInfo]) -> Sequence[Verdict]:
        reading = read_traffic(ctx, self.args)
        fail_missing = self.args.fail_missing
        if reading.snapshot is None:  # the same list while the reason lasts: the outcome is worked out once
            verdict = Verdict(f"traffic metrics unavailable: {reading.missing_reason}") if fail_missing else PASS
            key = (self.name, "missing", verdict)
            return shared_column(ctx.shared, key, (nodes,), lambda: [verdict] * len(nodes))
        snapshot = reading.snapshot
        # A function of the snapshot and the candidates: kept with the candidate list until the next snapshot.
        judge = partial(self._verdicts, node_bytes(ctx, snapshot, nodes))
        return shared_column(ctx.shared, (self.name, id(self)), (snapshot, nodes, self), judge)

    def _verdicts(self, raws: list[float | None]) -> list[Verdict]:
        fail_missing = self.args.fail_missing
        window = self.args.time_range_in_minutes * 60
        limit = self.args.max_bytes_per_second
        verdicts: list[Verdict] = [PASS] * len(raws)
        if None in raws:
            over: list[int] = []
            for index, raw in enumerate(raws):
                if raw is None:
                    if fail_missing:
                        verdicts[index] = Verdict("no traffic series for node")
                elif raw / window > limit:
                    over.append(index)
        else:  # every node has a series: compared in one vectorized pass (the same division, the same floats)
            over = np.flatnonzero(np.asarray(raws, dtype=np.float64) / window > limit).tolist()
        for index in over:
            rate = cast(float, raws[index]) / window
            verdicts[index] = Verdict(self._reason, detail=f"{human_rate(rate)} over the last {window // 60} min")
        return verdicts
