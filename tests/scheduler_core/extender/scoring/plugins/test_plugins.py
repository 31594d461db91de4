"""The filter and score plugins, table-driven."""

from __future__ import annotations

import json

import pytest

from scheduler_core.extender.protocol.binding import SimulatedBinder
from scheduler_core.extender.protocol.cluster import (
    NodeInfo,
    NodeResourcesSpec,
    StaticCluster,
    normalize_image,
    pod_info,
)
from scheduler_core.extender.protocol.wire import decode_extender_args, encode
from scheduler_core.extender.scoring.plugins.base import CycleContext
from scheduler_core.extender.scoring.plugins.image_locality import ImageLocality, ImageLocalityArgs
from scheduler_core.extender.scoring.plugins.node_resources import NodeResourceFitByCR, NodeResourceFitByCRArgs
from scheduler_core.extender.scoring.plugins.traffic import TrafficThreshold, TrafficThresholdArgs
from scheduler_core.extender.scoring.profiles import load_profiles
from scheduler_core.extender.verbs import Extender
from tests.support.inputs import traffic_store


def make_pod(
    requests: dict[str, str] | None = None, init_requests: dict[str, str] | None = None, images=("nginx:1.25",)
):
    containers = [{"name": f"c{i}", "image": image} for i, image in enumerate(images)]
    if requests is not None:
        containers[0]["resources"] = {"requests": requests}
    spec: dict = {"containers": containers}
    if init_requests is not None:
        spec["initContainers"] = [{"name": "init", "image": "busybox:1.36", "resources": {"limits": init_requests}}]
    return {"metadata": {"name": "p", "namespace": "ns", "uid": "u"}, "spec": spec}


def context(pod: dict, cluster: StaticCluster | None = None, traffic=None) -> CycleContext:
    args = decode_extender_args(encode({"Pod": pod, "Nodes": None, "NodeNames": []}))
    return CycleContext(
        pod=pod_info(args.pod), cluster=cluster or StaticCluster(), traffic=traffic or traffic_store({})
    )


CR_SPECS = {
    "gpu-node": NodeResourcesSpec({"example.com/gpu": True}, {"example.com/gpu": 80}),
    "plain-node": NodeResourcesSpec({"example.com/gpu": False}, {}),
    "hot-node": NodeResourcesSpec(
        {"example.com/gpu": True, "example.com/nic": True}, {"example.com/gpu": 150, "example.com/nic": 90}
    ),
}
CR_CLUSTER = StaticCluster(node_resources=CR_SPECS)


@pytest.mark.parametrize(
    ("node", "pod", "reason"),
    [
        ("gpu-node", make_pod({"example.com/gpu": "1"}), ""),
        ("plain-node", make_pod({"example.com/gpu": "1"}), "node does not enable example.com/gpu"),
        ("no-cr-node", make_pod({"example.com/gpu": "1"}), "no NodeResources object for node"),
        ("no-cr-node", make_pod({"cpu": "1"}), "no NodeResources object for node"),
        ("plain-node", make_pod({"cpu": "1", "memory": "1Gi"}), ""),
        ("plain-node", make_pod(init_requests={"example.com/gpu": "1"}), "node does not enable example.com/gpu"),
        (
            "gpu-node",
            make_pod({"example.com/gpu": "1", "example.com/nic": "1"}),
            "node does not enable example.com/nic",
        ),
    ],
    ids=["enabled", "disabled", "no-cr", "no-cr-plain-pod", "only-cpu-memory", "init-container", "one-missing"],
)
def test_node_resource_fit_by_cr_filter(node: str, pod: dict, reason: str):
    plugin = NodeResourceFitByCR(NodeResourceFitByCRArgs())
    (verdict,) = plugin.filter(context(pod, CR_CLUSTER), [NodeInfo(node)])
    assert verdict.reason == reason
    assert verdict.unresolvable == bool(reason), "preempting pods cannot make a node enable a resource"


def test_node_resource_fit_by_cr_scores_the_mean_of_requested_resources_clamped_to_100():
    plugin = NodeResourceFitByCR(NodeResourceFitByCRArgs())
    pod = make_pod({"example.com/gpu": "1", "example.com/nic": "1"})
    result = plugin.score(context(pod, CR_CLUSTER), [NodeInfo("gpu-node"), NodeInfo("hot-node"), NodeInfo("x")])
    assert [s.score for s in result.scores] == [40.0, 100.0, 0.0]
    assert result.applicable


def test_node_resource_fit_by_cr_carries_no_weight_for_a_pod_without_extended_resources():
    plugin = NodeResourceFitByCR(NodeResourceFitByCRArgs())
    result = plugin.score(context(make_pod({"cpu": "1"}), CR_CLUSTER), [NodeInfo("gpu-node")])
    assert not result.applicable


@pytest.mark.parametrize(
    ("short", "full"),
    [
        ("nginx", "docker.io/library/nginx:latest"),
        ("nginx:1.25.4", "docker.io/library/nginx:1.25.4"),
        ("envoyproxy/envoy:v1.29.1", "docker.io/envoyproxy/envoy:v1.29.1"),
        ("registry.k8s.io/pause:3.9", "registry.k8s.io/pause:3.9"),
        ("localhost:5000/app", "localhost:5000/app:latest"),
        ("quay.io/x/y@sha256:abc", "quay.io/x/y@sha256:abc"),
    ],
)
def test_image_names_are_compared_in_the_runtime_s_fully_qualified_form(short: str, full: str):
    assert normalize_image(short) == full


def test_image_locality_counts_the_pod_s_images_present_on_each_node_init_containers_included():
    pod = make_pod(init_requests={}, images=("nginx:1.25.4", "redis:7"))  # + busybox:1.36 as init container
    nodes = [
        NodeInfo("all", images=frozenset(map(normalize_image, ["nginx:1.25.4", "redis:7", "busybox:1.36"]))),
        NodeInfo("one", images=frozenset([normalize_image("docker.io/library/nginx:1.25.4")])),
        NodeInfo("none"),
    ]
    result = ImageLocality(ImageLocalityArgs()).score(context(pod), nodes)
    assert [round(s.score, 2) for s in result.scores] == [100.0, 33.33, 0.0]


def test_traffic_threshold_fails_busy_nodes_with_the_threshold_in_the_reason_and_the_rate_in_the_record():
    args = TrafficThresholdArgs(max_bytes_per_second=1000.0, time_range_in_minutes=1)
    traffic = traffic_store({"busy": 120_000.0, "quiet": 60_000.0}, query=args.query())
    verdicts = TrafficThreshold(args).filter(
        context(make_pod(), traffic=traffic), [NodeInfo("busy"), NodeInfo("quiet"), NodeInfo("new")]
    )
    assert verdicts[0].reason == "receive rate above 1.0 kB/s"
    assert verdicts[0].detail == "2.0 kB/s over the last 1 min"
    assert verdicts[1].passed, "exactly at the threshold passes"
    assert verdicts[2].passed, "a node without a metric passes unless failOnMissing"


def test_traffic_threshold_with_fail_on_missing_fails_nodes_without_metrics():
    args = TrafficThresholdArgs(fail_on_missing=True)
    verdicts = TrafficThreshold(args).filter(context(make_pod(), traffic=traffic_store({"a": 1.0})), [NodeInfo("b")])
    assert verdicts[0].reason == "no traffic series for node"


def test_filter_reasons_carry_no_node_names_or_per_node_figures_so_kube_scheduler_counts_them_together():
    config = """
profiles:
- name: default
  plugins:
    filter: {enabled: [{name: TrafficThreshold}, {name: NodeResourceFitByCR}]}
  pluginConfig:
  - {name: TrafficThreshold, args: {maxBytesPerSecond: 10}}
"""
    extender = Extender(
        load_profiles(config),
        cluster=CR_CLUSTER,
        traffic=traffic_store({"gpu-node": 9e6, "plain-node": 7e6, "hot-node": 1.0}),
        binder=SimulatedBinder(),
    )
    body = encode(
        {
            "Pod": make_pod({"example.com/gpu": "1"}),
            "Nodes": None,
            "NodeNames": ["gpu-node", "plain-node", "hot-node", "no-cr-node"],
        }
    )
    result = extender.filter("default", body)
    decoded = json.loads(result.body)
    assert decoded["NodeNames"] == ["hot-node"]
    assert decoded["FailedNodes"] == {"gpu-node": "TrafficThreshold: receive rate above 10 B/s"}
    assert decoded["FailedAndUnresolvableNodes"] == {
        "no-cr-node": "NodeResourceFitByCR: no NodeResources object for node",
        "plain-node": "TrafficThreshold: receive rate above 10 B/s; "
        "NodeResourceFitByCR: node does not enable example.com/gpu",
    }
    for node, reason in {**decoded["FailedNodes"], **decoded["FailedAndUnresolvableNodes"]}.items():
        assert node not in reason
    record = result.event.filter
    assert record.failures["plain-node"] == {
        "TrafficThreshold": "receive rate above 10 B/s",
        "NodeResourceFitByCR": "node does not enable example.com/gpu",
    }
    assert record.details["gpu-node"]["TrafficThreshold"] == "30.0 kB/s over the last 5 min"
    assert record.traffic_bytes == [9e6, 7e6, 1.0, None]


@pytest.mark.parametrize("calls", [1, 2], ids=["first-call", "candidate-list-seen-before"])
def test_a_prioritize_records_which_nodes_have_no_noderesources_object(calls: int):
    # The plugin counts its unmeasured nodes once per candidate list and table: the record must say the same
    # on a call that reuses them as on the first.
    profiles = load_profiles(
        "profiles:\n- name: cr\n  plugins:\n    score:\n"
        "      enabled: [{name: NodeResourceFitByCR, weight: 1}]\n      disabled: [{name: '*'}]\n"
    )
    cluster = StaticCluster([NodeInfo(n) for n in ("gpu-node", "x", "hot-node", "y")], CR_SPECS)
    extender = Extender(profiles, cluster=cluster, traffic=traffic_store({}), binder=SimulatedBinder())
    body = encode(
        {"Pod": make_pod({"example.com/gpu": "1"}), "Nodes": None, "NodeNames": ["gpu-node", "x", "hot-node", "y"]}
    )
    for _ in range(calls):
        record = extender.prioritize("cr", body).event.prioritize
    assert record is not None
    (plugin,) = record.plugins
    assert plugin.raw == [80.0, None, 150.0, None]
    assert plugin.notes == {"x": "no NodeResources object for node", "y": "no NodeResources object for node"}
    assert plugin.scores == [80.0, 0.0, 100.0, 0.0]
