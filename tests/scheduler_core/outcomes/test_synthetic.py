"""The demo's traffic after binds: a node's grows by what the pods bound to it receive, from their bind on."""

from __future__ import annotations

from scheduler_core.outcomes.sources import NodeAsk, PodAsk
from scheduler_core.outcomes.synthetic import WORKLOAD_RATES, Bind, SyntheticOutcomeSource
from scheduler_core.traffic import TrafficQuery


def test_a_nodes_traffic_grows_by_its_bound_pods_and_a_host_network_pod_has_no_series():
    binds = [Bind("node-1", "shop", "cache-1a2b-xyz", 1000.0)]
    without = SyntheticOutcomeSource(lambda nodes, start, end: [])
    with_pod = SyntheticOutcomeSource(lambda nodes, start, end: binds)
    ask = NodeAsk("k", TrafficQuery(), ("node-1",), 1060.0, 60)

    grown = with_pod.read([ask], []).node_bytes["k"]["node-1"] - without.read([ask], []).node_bytes["k"]["node-1"]

    assert grown == WORKLOAD_RATES["cache"][0] * 60
    pods = with_pod.read(
        [], [PodAsk("p", "shop", "cache-1a2b-xyz", 1060.0, 60), PodAsk("h", "ops", "report-1-a", 1.0, 60)]
    )
    assert pods.pod_bytes == {"p": sum(WORKLOAD_RATES["cache"]) * 60}
