"""Node and pod series the outcome tests write into a real Prometheus, around an anchor (Unix seconds).

Counters grow at constant rates from 20 minutes before the anchor to 10 minutes after it, sampled every 15 s, so
``increase()`` over any window inside that span is exactly ``rate × window`` (see ``tests.support.prometheus_data``).
The pod's network counters sit on its sandbox, one with ``container="POD"`` and one with ``container=""``, as the
two kinds of runtime write them. kube-state-metrics' gauges say who owns the pods and which shares the host's network.
"""

from __future__ import annotations

from collections.abc import Sequence

from tests.support.prometheus_data import STEP_SECONDS, counter_samples
from tests.support.prometheus_server import Series

NODE_RATES = {"node-1": 80_000.0, "node-2": 10_000.0, "node-3": 5_000.0, "node-4": 50_000.0}
"""Bytes/s on eth0 after the binds: node-2 (the quietest when the extender decided) ends busier than node-3."""
POD_RECEIVE_RATE = 2_000.0
POD_TRANSMIT_RATE = 1_000.0
ATTRIBUTED_POD = "web-1"
HOST_NETWORK_POD = "host-agent"
NO_SERIES_POD = "web-2"


def _gauge(anchor: int, metric: str, labels: dict[str, str]) -> Series:
    samples = [(float(ts), 1.0) for ts in range(anchor - 20 * 60, anchor + 10 * 60 + 1, STEP_SECONDS)]
    return Series(metric, labels, samples, kind="gauge")


def outcome_series(anchor: int) -> tuple[Series, ...]:
    nodes = tuple(
        Series(
            "node_network_receive_bytes_total",
            {"device": "eth0", "instance": f"10.2.0.{i}:9100", "kubernetes_node": node},
            counter_samples(anchor, rate),
        )
        for i, (node, rate) in enumerate(NODE_RATES.items(), start=1)
    )
    pod = {"namespace": "shop", "pod": ATTRIBUTED_POD, "interface": "eth0"}
    pods = (
        Series(
            "container_network_receive_bytes_total",
            {**pod, "container": "POD"},
            counter_samples(anchor, POD_RECEIVE_RATE),
        ),
        Series(
            "container_network_transmit_bytes_total",
            {**pod, "container": ""},
            counter_samples(anchor, POD_TRANSMIT_RATE),
        ),
    )
    state = (
        _gauge(
            anchor,
            "kube_pod_owner",
            {"namespace": "shop", "pod": ATTRIBUTED_POD, "owner_kind": "ReplicaSet", "owner_name": "web-7d9f"},
        ),
        _gauge(
            anchor,
            "kube_replicaset_owner",
            {"namespace": "shop", "replicaset": "web-7d9f", "owner_kind": "Deployment", "owner_name": "web"},
        ),
        _gauge(anchor, "kube_pod_info", {"namespace": "shop", "pod": ATTRIBUTED_POD, "host_network": "false"}),
        _gauge(
            anchor,
            "kube_pod_owner",
            {"namespace": "shop", "pod": HOST_NETWORK_POD, "owner_kind": "DaemonSet", "owner_name": "agent"},
        ),
        _gauge(anchor, "kube_pod_info", {"namespace": "shop", "pod": HOST_NETWORK_POD, "host_network": "true"}),
    )
    return nodes + pods + state


def deployment_series(anchor: int, pods: Sequence[str], *, receive: float, transmit: float) -> tuple[Series, ...]:
    """The nodes' series at :data:`NODE_RATES` and, for each of ``pods`` of the Deployment ``shop/api`` (ReplicaSet
    ``api-6b5c9``), its own network counters at ``receive`` and ``transmit`` bytes/s and kube-state-metrics' owner
    and pod-info gauges."""
    found: list[Series] = [
        Series(
            "node_network_receive_bytes_total",
            {"device": "eth0", "instance": f"10.2.0.{i}:9100", "kubernetes_node": node},
            counter_samples(anchor, rate),
        )
        for i, (node, rate) in enumerate(NODE_RATES.items(), start=1)
    ]
    for name in pods:
        labels = {"namespace": "shop", "pod": name, "interface": "eth0"}
        found += [
            Series(
                "container_network_receive_bytes_total",
                {**labels, "container": "POD"},
                counter_samples(anchor, receive),
            ),
            Series(
                "container_network_transmit_bytes_total", {**labels, "container": ""}, counter_samples(anchor, transmit)
            ),
            _gauge(
                anchor,
                "kube_pod_owner",
                {"namespace": "shop", "pod": name, "owner_kind": "ReplicaSet", "owner_name": "api-6b5c9"},
            ),
            _gauge(anchor, "kube_pod_info", {"namespace": "shop", "pod": name, "host_network": "false"}),
        ]
    found.append(
        _gauge(
            anchor,
            "kube_replicaset_owner",
            {"namespace": "shop", "replicaset": "api-6b5c9", "owner_kind": "Deployment", "owner_name": "api"},
        )
    )
    return tuple(found)
