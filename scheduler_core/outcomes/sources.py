"""What the outcome job asks about traffic after a bind, and the interface of whoever answers (Prometheus, or the
demo's synthetic traffic).

Every ask names a window that has passed: the bytes counted in ``(end − seconds, end]``. Asks carry a ``key`` so
one request can answer many of them (``scheduler_core.outcomes.queries``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from scheduler_core.traffic.base import TrafficQuery

POD_RECEIVE_METRIC = "container_network_receive_bytes_total"
POD_TRANSMIT_METRIC = "container_network_transmit_bytes_total"


@dataclass(frozen=True, slots=True)
class PodTrafficQuery:
    """How a pod's own traffic is read: cAdvisor's network counters summed over the pod's series.

    The series sit on the pod sandbox (``container="POD"`` or ``container=""`` by runtime), so there is no
    ``container`` filter: one would lose them. Item 3 of issue 32 (traffic learned per workload) reads pods with
    the same query.
    """

    metrics: tuple[str, ...] = (POD_RECEIVE_METRIC, POD_TRANSMIT_METRIC)
    namespace_label: str = "namespace"
    pod_label: str = "pod"
    address: str = ""
    """Prometheus base URL; empty: the process-wide default."""


@dataclass(frozen=True, slots=True)
class NodeAsk:
    key: str
    query: TrafficQuery
    """The cycle's profile's node query (its device and node label); the window is the ask's."""
    nodes: tuple[str, ...]
    end: float
    seconds: int


@dataclass(frozen=True, slots=True)
class PodAsk:
    key: str
    namespace: str
    pod: str
    end: float
    seconds: int


@dataclass(frozen=True, slots=True)
class PodFacts:
    """What the cluster's metrics say of a pod (kube-state-metrics): its workload and whether it shares the host's
    network (then its traffic is the node's, not its own)."""

    workload_kind: str = ""
    workload_name: str = ""
    host_network: bool = False
    known: bool = False
    """Any fact was found (False: no kube-state-metrics series for the pod)."""


@dataclass(frozen=True, slots=True)
class Readings:
    node_bytes: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    """Ask key → node → bytes; a node without series is absent."""
    pod_bytes: Mapping[str, float] = field(default_factory=dict)
    """Ask key → bytes; a pod without series is absent."""


class OutcomeSource(Protocol):
    """Reads traffic after binds. May be slow: only the background outcome job calls it."""

    def read(self, nodes: Sequence[NodeAsk], pods: Sequence[PodAsk]) -> Readings: ...

    def pod_facts(self, pods: Sequence[tuple[str, str]], at: float) -> dict[tuple[str, str], PodFacts]: ...
