"""NetworkTraffic (score) and TrafficThreshold (filter): placement by recently received bytes."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

from scheduler_core.cluster import NodeInfo
from scheduler_core.plugins.base import (
    NEUTRAL_SCORE,
    PASS,
    CycleContext,
    NodeScore,
    PluginArgs,
    ScoreResult,
    Verdict,
)
from scheduler_core.traffic import TrafficQuery, TrafficSnapshot
from scheduler_core.units import human_rate

_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


class TrafficArgs(PluginArgs):
    """The original NetworkTrafficArgs (address, deviceName, timeRangeInMinutes) plus what operators asked for."""

    address: str = ""
    """Prometheus URL; empty uses ``PROMETHEUS_URL`` or, without it, the embedded synthetic source."""
    device_name: str = "eth0"
    time_range_in_minutes: int = 5
    node_label: str = "kubernetes_node"
    query_mode: Literal["increase", "sum_over_time"] = "increase"
    max_staleness_seconds: float = 120.0
    """Older snapshots count as missing: scheduling on minutes-old traffic is worse than not using it."""

    def __post_init__(self) -> None:
        if not 1 <= self.time_range_in_minutes <= 1440:
            raise ValueError("timeRangeInMinutes must be between 1 and 1440")
        if not self.device_name:
            raise ValueError("deviceName must not be empty")
        if not _LABEL_NAME.match(self.node_label):
            raise ValueError("nodeLabel must be a Prometheus label name")
        if self.max_staleness_seconds <= 0:
            raise ValueError("maxStalenessSeconds must be positive")

    def query(self) -> TrafficQuery:
        return TrafficQuery(
            address=self.address,
            device_name=self.device_name,
            time_range_minutes=self.time_range_in_minutes,
            node_label=self.node_label,
            query_mode=self.query_mode,
        )


class TrafficThresholdArgs(TrafficArgs):
    max_bytes_per_second: float = 125_000_000.0
    """A saturated gigabit link: a node receiving more than this is busy enough to avoid outright."""
    fail_on_missing: bool = False
    """Missing metrics pass by default so a Prometheus outage does not make the cluster unschedulable."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.max_bytes_per_second <= 0:
            raise ValueError("maxBytesPerSecond must be positive")


@dataclass(frozen=True, slots=True)
class TrafficReading:
    """A usable snapshot, or why there is none."""

    snapshot: TrafficSnapshot | None
    missing_reason: str
    age_seconds: float | None


def read_traffic(ctx: CycleContext, args: TrafficArgs) -> TrafficReading:
    snapshot = ctx.traffic.latest(args.query())
    if snapshot is None:
        return TrafficReading(None, "no traffic data yet", None)
    age = snapshot.age_seconds(ctx.now)
    if age > args.max_staleness_seconds:
        return TrafficReading(None, "metrics stale", age)
    return TrafficReading(snapshot, "", age)


class NetworkTraffic:
    """Less traffic, higher score: 100 − raw·100/max over the candidates (all zero → 100 each)."""

    name: ClassVar[str] = "NetworkTraffic"
    args_type: ClassVar[type[PluginArgs]] = TrafficArgs

    def __init__(self, args: TrafficArgs) -> None:
        self.args = args

    def score(self, ctx: CycleContext, nodes: Sequence[NodeInfo]) -> ScoreResult:
        reading = read_traffic(ctx, self.args)
        if reading.snapshot is None:
            neutral = NodeScore(NEUTRAL_SCORE, None, reading.missing_reason)
            return ScoreResult(
                [neutral] * len(nodes), note=reading.missing_reason, metric_age_seconds=reading.age_seconds
            )
        values = reading.snapshot.bytes_by_node
        raws = [values.get(node.name) for node in nodes]
        highest = max((raw for raw in raws if raw is not None), default=0.0)
        # Per-node text is left to the explanation (it has ``raw``): formatting 1000 strings per call is
        # the single largest cost of a large prioritize.
        missing = NodeScore(NEUTRAL_SCORE, None, "no traffic series for node")
        if highest <= 0:
            scores = [missing if raw is None else NodeScore(100.0, raw) for raw in raws]
        else:
            factor = 100.0 / highest
            scores = [missing if raw is None else NodeScore(100.0 - raw * factor, raw) for raw in raws]
        return ScoreResult(scores, metric_age_seconds=reading.age_seconds)


class TrafficThreshold:
    """Fails nodes whose receive rate over the window exceeds ``maxBytesPerSecond``."""

    name: ClassVar[str] = "TrafficThreshold"
    args_type: ClassVar[type[PluginArgs]] = TrafficThresholdArgs

    def __init__(self, args: TrafficThresholdArgs) -> None:
        self.args = args
        # The figure in the reason is the threshold, the same for every node, so kube-scheduler's
        # "0/N nodes are available" message counts all such nodes under one reason.
        self._reason = f"receive rate above {human_rate(args.max_bytes_per_second)}"

    def filter(self, ctx: CycleContext, nodes: Sequence[NodeInfo]) -> Sequence[Verdict]:
        reading = read_traffic(ctx, self.args)
        fail_missing = self.args.fail_on_missing
        if reading.snapshot is None:
            if fail_missing:
                return [Verdict(f"traffic metrics unavailable: {reading.missing_reason}")] * len(nodes)
            return [PASS] * len(nodes)
        values = reading.snapshot.bytes_by_node
        window = self.args.time_range_in_minutes * 60
        limit = self.args.max_bytes_per_second
        verdicts: list[Verdict] = []
        for node in nodes:
            raw = values.get(node.name)
            if raw is None:
                verdicts.append(Verdict("no traffic series for node") if fail_missing else PASS)
                continue
            rate = raw / window
            if rate > limit:
                verdicts.append(Verdict(self._reason, detail=f"{human_rate(rate)} over the last {window // 60} min"))
            else:
                verdicts.append(PASS)
        return verdicts
