"""Replaying a recorded decision: the recorded profile reproduces it; other weights and thresholds change it."""

from __future__ import annotations

import msgspec
import pytest

from scheduler_core.extender.protocol.binding import SimulatedBinder
from scheduler_core.extender.protocol.cluster import NodeInfo, NodeResourcesSpec, StaticCluster
from scheduler_core.extender.protocol.wire import encode
from scheduler_core.extender.scoring.profiles import load_profiles
from scheduler_core.extender.verbs import Extender
from scheduler_core.history_replay.what_if import (
    NOT_PRIORITIZED,
    RecordedInputs,
    Scenario,
    compare,
    replay,
    scenario_from_profile,
)
from tests.support.inputs import traffic_store

MB = 1e6
WINDOW = 300
DEMO = """
profiles:
- name: default
  plugins:
    filter: {enabled: [{name: TrafficThreshold}, {name: NodeResourceFitByCR}]}
    score: {enabled: [{name: NetworkTraffic, weight: 3}, {name: NodeResourceFitByCR, weight: 1}]}
  pluginConfig:
  - {name: TrafficThreshold, args: {maxBytesPerSecond: 1000000}}
"""
# node-4 receives 2 MB/s over the 5-minute window, above the 1 MB/s threshold.
TRAFFIC = {"node-1": 60 * MB, "node-2": 120 * MB, "node-3": 30 * MB, "node-4": 600 * MB}
CLUSTER = StaticCluster(
    [NodeInfo(n) for n in TRAFFIC],
    {
        "node-1": NodeResourcesSpec({"example.com/gpu": True}, {"example.com/gpu": 90}),
        "node-2": NodeResourcesSpec({"example.com/gpu": True}, {"example.com/gpu": 40}),
        "node-3": NodeResourcesSpec({"example.com/gpu": False}, {}),
        "node-4": NodeResourcesSpec({"example.com/gpu": True}, {"example.com/gpu": 100}),
    },
)
POD = {
    "metadata": {"name": "train-1", "namespace": "ml", "uid": "uid-1"},
    "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"example.com/gpu": "1"}}}]},
}


def record_cycle(config: str = DEMO, traffic: dict[str, float] | None = None, prioritized: list[str] | None = None):
    """Filter then prioritize through the real verbs, as kube-scheduler calls them."""
    profiles = load_profiles(config)
    extender = Extender(profiles, cluster=CLUSTER, traffic=traffic_store(traffic or TRAFFIC), binder=SimulatedBinder())
    nodes = list(TRAFFIC)
    filtered = extender.filter("default", encode({"Pod": POD, "Nodes": None, "NodeNames": nodes}))
    passed = msgspec.json.decode(filtered.body)["NodeNames"]
    scored = extender.prioritize("default", encode({"Pod": POD, "Nodes": None, "NodeNames": prioritized or passed}))
    description = profiles["default"].describe()
    inputs = RecordedInputs.from_records(
        filtered.event.filter,
        scored.event.prioritize,
        description["filter"],
    )
    return inputs, description, scored.event.prioritize


def test_replaying_under_the_recorded_profile_reproduces_every_recorded_score():
    inputs, description, recorded = record_cycle()
    result = replay(inputs, scenario_from_profile(description))

    assert [o.node for o in result.nodes if o.passed] == recorded.nodes == ["node-1", "node-2"]
    by_node = {o.node: o for o in result.nodes}
    for node, final, answer in zip(recorded.nodes, recorded.final, recorded.extender, strict=True):
        assert by_node[node].final == pytest.approx(final, abs=1e-3)
        assert by_node[node].extender == answer
    assert result.preferred == "node-1"
    assert by_node["node-3"].reasons == {"NodeResourceFitByCR": "node does not enable example.com/gpu"}
    assert by_node["node-4"].reasons == {"TrafficThreshold": "receive rate above 1.0 MB/s"}
    assert result.notes == []


def test_a_higher_threshold_lets_a_busy_node_in_and_rescales_everyone_s_traffic_score():
    inputs, description, _ = record_cycle()
    before = replay(inputs, scenario_from_profile(description))
    looser = scenario_from_profile(description)
    after = replay(inputs, Scenario(**{**_fields(looser), "max_bytes_per_second": 3 * MB}))

    node_4 = after.outcome("node-4")
    assert node_4 is not None
    assert node_4.passed
    assert node_4.terms == {"NetworkTraffic": 0.0, "NodeResourceFitByCR": None}
    assert node_4.partial == ("NodeResourceFitByCR",), "node-4 was never scored by NodeResourceFitByCR"
    # The maximum is now node-4's 600 MB, so node-1's traffic term rises from 50 to 90.
    node_1 = after.outcome("node-1")
    assert node_1 is not None
    assert node_1.terms["NetworkTraffic"] == pytest.approx(90.0)
    assert any("reach prioritize only in this replay" in note for note in after.notes)

    changes = compare(before, after)
    assert changes[0].node in {"node-1", "node-2", "node-4"}
    by_node = {c.node: c for c in changes}
    assert by_node["node-4"].feasibility_changed
    assert by_node["node-3"].final_delta is None
    assert not by_node["node-3"].feasibility_changed


def test_weights_change_the_preferred_node():
    inputs, description, _ = record_cycle()
    traffic_only = replay(inputs, Scenario(filters=tuple(description["filter"]), weights={"NetworkTraffic": 1}))
    resources_only = replay(inputs, Scenario(filters=tuple(description["filter"]), weights={"NodeResourceFitByCR": 1}))

    assert traffic_only.preferred == "node-1"  # 60 MB against node-2's 120 MB
    assert resources_only.preferred == "node-1"  # 90 against 40
    outcome = resources_only.outcome("node-2")
    assert outcome is not None
    assert outcome.final == pytest.approx(40.0)
    assert outcome.extender == 4


def test_dropping_a_filter_plugin_readmits_the_nodes_it_failed():
    inputs, description, _ = record_cycle()
    recorded = scenario_from_profile(description)
    result = replay(inputs, Scenario(**{**_fields(recorded), "filters": ("TrafficThreshold",)}))
    node_3 = result.outcome("node-3")
    assert node_3 is not None
    assert node_3.passed
    assert node_3.terms["NetworkTraffic"] == pytest.approx(100 - 30 / 120 * 100)


def test_a_filter_the_cycle_never_ran_is_said_to_be_unknown():
    inputs, _, _ = record_cycle()
    result = replay(inputs, Scenario(filters=("TrafficThreshold", "ImageLocalityFilter"), weights={"ImageLocality": 2}))
    assert any("ImageLocalityFilter did not run" in note for note in result.notes)
    assert any("ImageLocality did not score" in note for note in result.notes)
    assert all(o.final == 0.0 for o in result.nodes if o.passed)


def test_nodes_kube_scheduler_kept_from_prioritize_stay_out():
    inputs, description, _ = record_cycle(prioritized=["node-1"])
    result = replay(inputs, scenario_from_profile(description))
    node_2 = result.outcome("node-2")
    assert node_2 is not None
    assert not node_2.passed
    assert node_2.reasons == {"kube-scheduler": NOT_PRIORITIZED}


def test_fail_on_missing_fails_nodes_without_a_series():
    traffic = {k: v for k, v in TRAFFIC.items() if k != "node-2"}
    inputs, description, _ = record_cycle(traffic=traffic)
    strict = Scenario(**{**_fields(scenario_from_profile(description)), "fail_on_missing": True})
    result = replay(inputs, strict)
    node_2 = result.outcome("node-2")
    assert node_2 is not None
    assert node_2.reasons == {"TrafficThreshold": "no traffic series for node"}
    lenient = replay(inputs, scenario_from_profile(description))
    lenient_2 = lenient.outcome("node-2")
    assert lenient_2 is not None
    assert lenient_2.terms["NetworkTraffic"] == 50.0, "a node without a series scores neutral"


def test_a_profile_description_becomes_a_scenario():
    description = load_profiles(DEMO)["default"].describe()
    scenario = scenario_from_profile(description)
    assert scenario.filters == ("TrafficThreshold", "NodeResourceFitByCR")
    assert dict(scenario.weights) == {"NetworkTraffic": 3, "NodeResourceFitByCR": 1}
    assert scenario.max_bytes_per_second == 1 * MB
    assert scenario.window_seconds == WINDOW
    assert scenario.label == "default"


def _fields(scenario: Scenario) -> dict[str, object]:
    return {name: getattr(scenario, name) for name in Scenario.__slots__}
