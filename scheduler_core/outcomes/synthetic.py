"""The demo's traffic after binds, so ``make run`` shows outcomes without a Prometheus.

A node receives the synthetic source's traffic (``scheduler_core.traffic.synthetic``) plus what the pods bound to it
receive from their bind on. A pod's traffic depends on its workload (the simulator names pods ``<app>-<hash>-<id>``):
some workloads sit near the herd estimate's default constant (1 MB/s), others far from it either way, and one
(``report``, a host-network agent here) has no series of its own, as such pods have none in cAdvisor.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from scheduler_core.outcomes.sources import NodeAsk, PodAsk, PodFacts, Readings
from scheduler_core.traffic.base import DEFAULT_DEVICE_NAME
from scheduler_core.traffic.synthetic import synthetic_rate

STEP_SECONDS = 15
WORKLOAD_RATES = {
    "web": (900_000.0, 300_000.0),
    "api": (2_500_000.0, 1_500_000.0),
    "worker": (40_000.0, 10_000.0),
    "cache": (6_000_000.0, 6_000_000.0),
    "ingest": (20_000_000.0, 500_000.0),
}
"""Received and sent bytes per second of a pod of each demo workload."""
HOST_NETWORK_WORKLOADS = frozenset({"report"})


class Bind(NamedTuple):
    node: str
    namespace: str
    pod: str
    at: float


def workload_of(pod: str) -> str:
    return pod.split("-", 1)[0]


def pod_rates(pod: str) -> tuple[float, float] | None:
    """(received, sent) bytes per second of a demo pod; None for a pod with no series of its own."""
    workload = workload_of(pod)
    if workload in HOST_NETWORK_WORKLOADS:
        return None
    return WORKLOAD_RATES.get(workload, (500_000.0, 100_000.0))


def _overlap(start: float, end: float, since: float) -> float:
    return max(0.0, end - max(start, since))


class SyntheticOutcomeSource:
    def __init__(self, binds: Callable[[Sequence[str], float, float], list[Bind]]) -> None:
        self._binds = binds
        """The recorded binds on some nodes before a window's end: (nodes, window start, window end)."""

    def _node_bytes(self, node: str, device: str, start: float, end: float, binds: Sequence[Bind]) -> float:
        total = 0.0
        t = start
        while t < end:
            step = min(STEP_SECONDS, end - t)
            total += synthetic_rate(node, device, t) * step
            t += step
        for bind in binds:
            rates = pod_rates(bind.pod)
            if bind.node == node and rates is not None:
                total += rates[0] * _overlap(start, end, bind.at)
        return round(total)

    def read(self, nodes: Sequence[NodeAsk], pods: Sequence[PodAsk]) -> Readings:
        node_bytes: dict[str, dict[str, float]] = {}
        for ask in nodes:
            start = ask.end - ask.seconds
            binds = self._binds(ask.nodes, start, ask.end)
            device = ask.query.device_name or DEFAULT_DEVICE_NAME
            node_bytes[ask.key] = {n: self._node_bytes(n, device, start, ask.end, binds) for n in ask.nodes}
        pod_bytes: dict[str, float] = {}
        for pod_ask in pods:
            rates = pod_rates(pod_ask.pod)
            if rates is not None:
                pod_bytes[pod_ask.key] = round((rates[0] + rates[1]) * pod_ask.seconds)
        return Readings(node_bytes=node_bytes, pod_bytes=pod_bytes)

    def pod_facts(self, pods: Sequence[tuple[str, str]], at: float) -> dict[tuple[str, str], PodFacts]:
        return {
            (ns, pod): PodFacts(
                workload_kind="Deployment",
                workload_name=workload_of(pod),
                host_network=workload_of(pod) in HOST_NETWORK_WORKLOADS,
                known=True,
            )
            for ns, pod in pods
        }
