"""Records of the real verbs on a simulated cluster under the demo profiles, at a fixed time, as the spool hands them
to the ingester."""

from __future__ import annotations

import random
from typing import Any

import msgspec

from dashboard.traffic.view import LocalInputs
from scheduler_core.cli.simulator import make_cluster, make_pod
from scheduler_core.extender.protocol.binding import SimulatedBinder
from scheduler_core.extender.protocol.cluster import StaticCluster
from scheduler_core.extender.record.spool_codec import decode_event, encode_event
from scheduler_core.extender.record.structs import VerbEvent
from scheduler_core.extender.scoring.herd import InMemoryBindLog
from scheduler_core.extender.scoring.profiles import load_profiles
from scheduler_core.extender.verbs import Extender
from scheduler_core.traffic.store import TrafficStore
from scheduler_core.traffic.synthetic import SyntheticTrafficSource
from tests.support.paths import REPO

NOW = 1_800_000_000.0


def demo_extender(nodes: int, *, without_metrics: int = 0, herd: bool = False) -> tuple[Extender, Any]:
    cluster = make_cluster(nodes, seed=7)
    view = StaticCluster.from_document(cluster.document())
    profiles = load_profiles((REPO / "deploy" / "profiles.demo.yaml").read_text())
    store = TrafficStore()
    source = SyntheticTrafficSource(lambda: cluster.node_names[without_metrics:], clock=lambda: NOW)
    for query in {q for p in profiles.values() for q in p.traffic_queries()}:
        store.put(source.fetch(query))
    # ``herd``: binds raise their node's traffic for the pods after them, as in a cluster (NetworkTraffic's herd bytes).
    inputs = LocalInputs(lambda: store, InMemoryBindLog(300.0, default_decay_seconds=15.0)) if herd else None
    extender = Extender(
        profiles, cluster=view, traffic=store, binder=SimulatedBinder(), inputs=inputs, clock=lambda: NOW
    )
    return extender, cluster


def cycle_events(extender: Extender, cluster: Any, rng: random.Random, *, profile: str, mode: str) -> list[VerbEvent]:
    pod = make_pod(rng)
    if mode == "names":
        body = {"Pod": pod, "Nodes": None, "NodeNames": cluster.node_names}
    else:
        body = {"Pod": pod, "Nodes": {"metadata": {}, "items": cluster.nodes}, "NodeNames": None}
    filtered = extender.filter(profile, msgspec.json.encode(body))
    events = [filtered.event]
    answer = msgspec.json.decode(filtered.body)
    passed = answer["NodeNames"] if mode == "names" else [n["metadata"]["name"] for n in answer["Nodes"]["items"]]
    if len(passed) > 1:
        events.append(
            extender.prioritize(profile, msgspec.json.encode({"Pod": pod, "Nodes": None, "NodeNames": passed})).event
        )
    return [decode_event(encode_event(e)) for e in events]
