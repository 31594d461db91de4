"""The same pod over the same cluster ranks nodes identically with NodeNames and with full Nodes."""

from __future__ import annotations

import json
import random

import msgspec

from scheduler_core.cli.simulator import make_cluster, make_pod
from scheduler_core.extender.protocol.binding import SimulatedBinder
from scheduler_core.extender.protocol.cluster import StaticCluster
from scheduler_core.extender.scoring.profiles import load_profiles
from scheduler_core.extender.verbs import Extender
from scheduler_core.traffic.store import TrafficStore
from scheduler_core.traffic.synthetic import SyntheticTrafficSource
from tests.support.paths import REPO


def test_both_node_modes_give_the_same_filter_verdicts_and_scores():
    cluster = make_cluster(60, seed=3)
    profiles = load_profiles((REPO / "deploy" / "profiles.demo.yaml").read_text())
    view = StaticCluster.from_document(cluster.document())
    store = TrafficStore()
    source = SyntheticTrafficSource(view.node_names, clock=lambda: 1_800_000_000.0)
    for query in profiles["default"].traffic_queries():
        store.put(source.fetch(query))
    extender = Extender(profiles, cluster=view, traffic=store, binder=SimulatedBinder(), clock=lambda: 1_800_000_000.0)
    rng = random.Random(5)
    names = cluster.node_names
    compared = 0
    for _ in range(20):
        pod = make_pod(rng)
        by_name = msgspec.json.encode({"Pod": pod, "Nodes": None, "NodeNames": names})
        by_node = msgspec.json.encode(
            {"Pod": pod, "Nodes": {"metadata": {}, "items": cluster.nodes}, "NodeNames": None}
        )
        names_filter = json.loads(extender.filter("default", by_name).body)
        nodes_filter = json.loads(extender.filter("default", by_node).body)
        assert names_filter["NodeNames"] == [n["metadata"]["name"] for n in nodes_filter["Nodes"]["items"]]
        assert names_filter["FailedNodes"] == nodes_filter["FailedNodes"]
        assert names_filter["FailedAndUnresolvableNodes"] == nodes_filter["FailedAndUnresolvableNodes"]
        feasible = names_filter["NodeNames"]
        if len(feasible) < 2:
            continue
        items = [n for n in cluster.nodes if n["metadata"]["name"] in set(feasible)]
        names_scores = extender.prioritize(
            "default",
            msgspec.json.encode({"Pod": pod, "Nodes": None, "NodeNames": [n["metadata"]["name"] for n in items]}),
        )
        nodes_scores = extender.prioritize(
            "default", msgspec.json.encode({"Pod": pod, "Nodes": {"metadata": {}, "items": items}, "NodeNames": None})
        )
        assert names_scores.body == nodes_scores.body
        assert names_scores.event.prioritize.final == nodes_scores.event.prioritize.final
        compared += 1
    assert compared >= 10, "the cluster must leave most pods several feasible nodes for the comparison to mean much"
