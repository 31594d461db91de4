"""The outcome job's PromQL: one ask per window, tagged, joined by ``or`` in batches of bounded length."""

from __future__ import annotations

import pytest

from scheduler_core.outcomes.queries import batches, node_expression, pod_expression
from scheduler_core.outcomes.sources import NodeAsk, PodAsk, PodTrafficQuery
from scheduler_core.traffic import TrafficQuery, TrafficSourceError


def test_a_node_ask_reads_the_profiles_device_and_label_over_its_window_at_its_end_with_node_names_escaped():
    ask = NodeAsk(
        "7:60", TrafficQuery(device_name="ens5", node_label="node"), ("ip-10-0-0-1.ec2.internal",), 1000.5, 60
    )
    assert node_expression(ask) == (
        'label_replace(sum by (node) (increase(node_network_receive_bytes_total{device="ens5",'
        'node=~"ip\\\\-10\\\\-0\\\\-0\\\\-1\\\\.ec2\\\\.internal"}[60s] @ 1000.500)), "schedlens_ask", "7:60", "", "")'
    )


def test_a_pod_ask_sums_the_configured_counters_without_a_container_filter():
    expression = pod_expression(PodTrafficQuery(), PodAsk("k", "shop", 'we"ird', 10.0, 300))
    assert "container" not in expression.replace("container_network", "")
    assert '__name__=~"container_network_receive_bytes_total|container_network_transmit_bytes_total"' in expression
    assert 'pod="we\\"ird"' in expression


def test_a_bad_label_or_metric_name_is_refused_before_any_request():
    with pytest.raises(TrafficSourceError, match="label"):
        pod_expression(PodTrafficQuery(pod_label="po d"), PodAsk("k", "ns", "p", 1.0, 60))
    with pytest.raises(TrafficSourceError, match="metric"):
        pod_expression(PodTrafficQuery(metrics=("a{b}",)), PodAsk("k", "ns", "p", 1.0, 60))


def test_batches_stay_under_their_length_and_keep_every_part():
    parts = [f"part{i:03}" for i in range(100)]
    found = list(batches(parts, limit=100))
    assert all(len(b) <= 100 for b in found)
    assert [p for b in found for p in b.split(" or ")] == parts
