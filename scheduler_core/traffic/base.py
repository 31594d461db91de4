"""The traffic-source interface shared by the synthetic source and Prometheus."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

QueryMode = Literal["increase", "sum_over_time"]
DEFAULT_DEVICE_NAME = "eth0"
DEFAULT_WINDOW_MINUTES = 5
DEFAULT_NODE_LABEL = "kubernetes_node"
DEFAULT_QUERY_MODE: QueryMode = "increase"
"""A query's defaults, which a profile's traffic args and the stored query share."""


class TrafficSourceError(Exception):
    """A source could not produce a snapshot (unreachable, misconfigured, garbage answer)."""


@dataclass(frozen=True, slots=True)
class TrafficQuery:
    """What a profile needs to know about traffic; equal queries share one snapshot."""

    address: str = ""
    """Prometheus base URL; empty means the process-wide default source."""
    device_name: str = DEFAULT_DEVICE_NAME
    """The network interface whose received bytes count (``device`` label of node-exporter)."""
    time_range_minutes: int = DEFAULT_WINDOW_MINUTES
    """The window over which bytes are summed; five minutes smooths scrape jitter but still follows bursts."""
    node_label: str = DEFAULT_NODE_LABEL
    """The series label that carries the Kubernetes node name."""
    query_mode: QueryMode = DEFAULT_QUERY_MODE
    """``increase``: bytes received in the window; ``sum_over_time``: the original tutorial's query."""

    @property
    def window_seconds(self) -> int:
        return self.time_range_minutes * 60


@dataclass(frozen=True, slots=True)
class TrafficSnapshot:
    """Received bytes per node over the query window, as of ``fetched_at`` (Unix seconds)."""

    query: TrafficQuery
    bytes_by_node: Mapping[str, float]
    fetched_at: float
    source: str
    """A short description of where the numbers came from (``synthetic``, a PromQL expression, …)."""
    error: str = ""
    """Set when the last refresh failed; the values are then those of the last good refresh, if any."""
    unmatched_series: tuple[str, ...] = field(default=())
    """Label values of series that matched no known node (a mislabelled exporter is common)."""
    bytes_by_pod: Mapping[str, float] = field(default_factory=dict)
    """``namespace/name`` → the pod's own bytes over the same window, read by the same refresh just after the nodes'
    (``scheduler_core.traffic.pods``): what the herd estimate reconciles recent binds with. Only pods of recent binds
    that have a series; empty when no profile reconciles."""

    def age_seconds(self, now: float | None = None) -> float:
        return max(0.0, (time.time() if now is None else now) - self.fetched_at)


class TrafficSource(Protocol):
    """Produces a fresh snapshot for a query. May be slow: never call it on a verb's request path."""

    def fetch(self, query: TrafficQuery) -> TrafficSnapshot: ...
