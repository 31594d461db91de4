"""Records share lists with the calls after them, and the spool compresses a shared list once.

The verbs hand later calls the very objects an earlier record holds (a candidate list, a filter outcome's lists and
answer, a snapshot's traffic column, unchanged plugin scores) and ``spool_codec.encode_event`` compresses each such
object once per process. Both are right only if no record changes after its verb returned: these tests drive the
verbs as kube-scheduler would, unknown nodes included (the verb replaces lists it must change), and check every
record as its call left it, and as the spool gives it back, once every later call has run.
"""

from __future__ import annotations

import random
from pathlib import Path

import msgspec

from scheduler_core.cli.simulator import make_cluster, make_pod
from scheduler_core.extender.filter_answer import UNKNOWN_NODE
from scheduler_core.extender.protocol.binding import SimulatedBinder
from scheduler_core.extender.protocol.cluster import StaticCluster
from scheduler_core.extender.record.spool_codec import decode_event, encode_event
from scheduler_core.extender.record.structs import VerbEvent
from scheduler_core.extender.scoring.profiles import load_profiles
from scheduler_core.extender.verbs import Extender
from scheduler_core.traffic.store import TrafficStore
from scheduler_core.traffic.synthetic import SyntheticTrafficSource

PROFILES = (Path(__file__).resolve().parents[4] / "deploy" / "profiles.demo.yaml").read_text()


class SyncedCache(StaticCluster):
    knows_all_nodes = True  # a name it lacks is unknown to the cluster, failed with a reason


def test_every_record_reads_back_as_its_call_left_it_after_the_calls_that_share_its_lists() -> None:
    cluster = make_cluster(60)
    view = SyncedCache.from_document(cluster.document())
    profiles = load_profiles(PROFILES)
    traffic = TrafficStore()
    for query in profiles["default"].traffic_queries():
        traffic.put(SyntheticTrafficSource(view.node_names).fetch(query))
    extender = Extender(profiles, cluster=view, traffic=traffic, binder=SimulatedBinder())
    rng = random.Random(7)
    with_ghost = [*cluster.node_names[:30], "ghost-node", *cluster.node_names[30:]]
    calls: list[tuple[VerbEvent, bytes, bytes]] = []  # the event, its JSON when returned, its spool bytes

    def record(event: VerbEvent) -> None:
        calls.append((event, msgspec.json.encode(event), encode_event(event)))

    for pod_number in range(120):
        pod = make_pod(rng)
        names = with_ghost if pod_number % 3 == 0 else cluster.node_names
        filtered = extender.filter("default", msgspec.json.encode({"Pod": pod, "Nodes": None, "NodeNames": names}))
        record(filtered.event)
        passed = msgspec.json.decode(filtered.body)["NodeNames"]
        candidates = [*passed, "ghost-node"] if pod_number % 4 == 0 else passed
        body = msgspec.json.encode({"Pod": pod, "Nodes": None, "NodeNames": candidates})
        scored = extender.prioritize("default", body)
        record(scored.event)
        best = max(msgspec.json.decode(scored.body), key=lambda host: host["Score"])["Host"]
        meta = pod["metadata"]
        binding = {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": best}
        record(extender.bind("default", msgspec.json.encode(binding)).event)

    ghosts = [event for event, _, _ in calls if event.filter is not None and "ghost-node" in event.filter.nodes]
    assert ghosts, "some filters had an unknown node"
    assert all(event.filter.failures["ghost-node"] == {"NodeCache": UNKNOWN_NODE} for event in ghosts)
    assert all("ghost-node" not in event.filter.passed for event in ghosts)
    for event, returned, spooled in calls:
        assert msgspec.json.encode(event) == returned, f"a {event.verb} record changed after its call returned"
        assert decode_event(spooled) == event, f"a {event.verb} record reads back otherwise than it was"
        assert decode_event(encode_event(event)) == event
