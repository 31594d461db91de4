"""A NodeNames entry that a synced node cache does not hold is failed with a reason, never dropped silently."""

from __future__ import annotations

import json

import msgspec

from scheduler_core.extender.filter_answer import UNKNOWN_NODE
from scheduler_core.extender.protocol.binding import SimulatedBinder
from scheduler_core.extender.protocol.cluster import NodeInfo, StaticCluster
from scheduler_core.extender.scoring.profiles import load_profiles
from scheduler_core.extender.verbs import Extender
from tests.support.inputs import traffic_store

NOW = 1_800_000_000.0
POD = {
    "metadata": {"name": "web-1", "namespace": "shop", "uid": "uid-1"},
    "spec": {"containers": [{"name": "web", "image": "nginx:1.25.4"}]},
}


class SyncedCache(StaticCluster):
    """What the Kubernetes node cache looks like to the verbs once it has listed every node."""

    knows_all_nodes = True


def extender(cluster: StaticCluster) -> Extender:
    traffic = traffic_store({"node-1": 1e6, "node-2": 2e6, "ghost": 0.0})
    return Extender(load_profiles(None), cluster=cluster, traffic=traffic, binder=SimulatedBinder(), clock=lambda: NOW)


def args(names: list[str]) -> bytes:
    return msgspec.json.encode({"Pod": POD, "Nodes": None, "NodeNames": names})


KNOWN = [NodeInfo("node-1"), NodeInfo("node-2")]


def test_filter_fails_a_name_the_synced_cache_does_not_know_with_the_reason():
    result = extender(SyncedCache(KNOWN)).filter("default", args(["node-1", "ghost", "node-2"]))

    answer = json.loads(result.body)
    assert answer["NodeNames"] == ["node-1", "node-2"]
    assert answer["FailedNodes"] == {"ghost": UNKNOWN_NODE}
    assert answer["FailedAndUnresolvableNodes"] is None
    assert result.event.filter.nodes == ["node-1", "ghost", "node-2"]
    assert result.event.filter.passed == ["node-1", "node-2"]
    assert result.event.filter.failures["ghost"] == {"NodeCache": UNKNOWN_NODE}


def test_every_dropped_name_is_accounted_for_in_the_failed_maps():
    names = ["node-1", "ghost", "node-2", "also-gone"]

    answer = json.loads(extender(SyncedCache(KNOWN)).filter("default", args(names)).body)

    accounted = (
        set(answer["NodeNames"]) | set(answer["FailedNodes"] or {}) | set(answer["FailedAndUnresolvableNodes"] or {})
    )
    assert accounted == set(names)


def test_a_view_that_does_not_claim_to_know_every_node_lets_unknown_names_through_to_the_plugins():
    answer = json.loads(extender(StaticCluster(KNOWN)).filter("default", args(["node-1", "ghost"])).body)

    assert answer["NodeNames"] == ["node-1", "ghost"]
    assert answer["FailedNodes"] is None


def test_prioritize_scores_an_unknown_name_zero_and_says_why():
    result = extender(SyncedCache(KNOWN)).prioritize("default", args(["node-1", "ghost", "node-2"]))

    scores = {entry["Host"]: entry["Score"] for entry in json.loads(result.body)}
    assert scores["ghost"] == 0
    assert set(scores) == {"node-1", "ghost", "node-2"}, "every host kube-scheduler sent gets a score"
    record = result.event.prioritize
    assert record.final[record.nodes.index("ghost")] == 0.0
    [cache] = [p for p in record.plugins if p.name == "NodeCache"]
    assert cache.notes == {"ghost": UNKNOWN_NODE}
    assert not cache.applicable


def test_prioritize_adds_no_note_when_every_name_is_known():
    result = extender(SyncedCache(KNOWN)).prioritize("default", args(["node-1", "node-2"]))

    assert [p.name for p in result.event.prioritize.plugins if p.name == "NodeCache"] == []


def test_preempt_drops_an_unknown_candidate_with_the_reason():
    body = msgspec.json.encode(
        {
            "Pod": POD,
            "NodeNameToMetaVictims": {
                "node-1": {"Pods": [], "NumPDBViolations": 0},
                "ghost": {"Pods": [], "NumPDBViolations": 0},
            },
        }
    )

    result = extender(SyncedCache(KNOWN)).preempt("default", body)

    assert set(json.loads(result.body)["NodeNameToMetaVictims"]) == {"node-1"}
    assert result.event.preempt.dropped == {"ghost": UNKNOWN_NODE}
