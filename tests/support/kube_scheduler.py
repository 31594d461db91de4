"""Cycles recorded the way production records them, at the times a test chooses, on a fixed five-node cluster.

Cycles come from the real extender (``scheduler_core.extender.verbs.Extender``) driven like kube-scheduler and are
folded by the real ingest service, so the API reads exactly what production writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import msgspec

from dashboard.ingest.cycles import cycles_ingest_events
from dashboard.models import SchedulingCycle
from scheduler_core.extender.protocol.binding import SimulatedBinder
from scheduler_core.extender.protocol.cluster import NodeInfo, NodeResourcesSpec, StaticCluster
from scheduler_core.extender.record.structs import VerbEvent
from scheduler_core.extender.scoring.profiles import load_profiles
from scheduler_core.extender.verbs import Extender
from scheduler_core.traffic import TrafficSnapshot
from scheduler_core.traffic.store import TrafficStore
from tests.support.profile_versions import store_served_versions

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
"""Recorded cycles start from here; tests place them by offsets, never by the wall clock."""
NODES = ["node-1", "node-2", "node-3", "node-4", "node-5"]
PROFILES = """
profiles:
- name: default
  plugins:
    filter: {enabled: [{name: TrafficThreshold}, {name: NodeResourceFitByCR}]}
    score: {enabled: [{name: NetworkTraffic, weight: 1}]}
- name: gpu-aware
  plugins:
    filter: {enabled: [{name: NodeResourceFitByCR}], disabled: [{name: "*"}]}
    score:
      enabled: [{name: NodeResourceFitByCR, weight: 4}, {name: NetworkTraffic, weight: 1}]
      disabled: [{name: "*"}]
"""
WINDOW_SECONDS = 300
TRAFFIC = {
    "node-1": 4.0e6,
    "node-2": 1.0e6,
    "node-3": 1.2e6,
    "node-4": 1.4e6,
    "node-5": 130e6 * WINDOW_SECONDS,  # above TrafficThreshold's 125 MB/s
}
GPU = "example.com/gpu"
CLUSTER = StaticCluster(
    [NodeInfo(name) for name in [*NODES, "node-6"]],
    {
        "node-1": NodeResourcesSpec({GPU: True}, {GPU: 90}),
        "node-2": NodeResourcesSpec({GPU: False}, {}),
        "node-3": NodeResourcesSpec({GPU: True}, {GPU: 40}),
        "node-4": NodeResourcesSpec({}, {}),
        "node-5": NodeResourcesSpec({GPU: True}, {GPU: 10}),
        # node-6 has no NodeResources object
    },
)


@dataclass
class KubeScheduler:
    """Calls the extender's verbs the way kube-scheduler does, at the times a test chooses."""

    traffic: dict[str, float]

    def __post_init__(self) -> None:
        self.profiles = load_profiles(PROFILES)
        self._serial = 0

    def _extender(self, at: datetime) -> Extender:
        # A fresh extender per cycle: no bind remembered in process (herd estimates) carries over.
        store = TrafficStore()
        for profile in self.profiles.values():
            for query in profile.traffic_queries():
                store.put(TrafficSnapshot(query, dict(self.traffic), at.timestamp(), "test"))
        return Extender(self.profiles, cluster=CLUSTER, traffic=store, binder=SimulatedBinder(), clock=at.timestamp)

    def events(
        self,
        *,
        at: datetime,
        name: str,
        namespace: str = "shop",
        uid: str | None = None,
        nodes: Sequence[str] = NODES,
        profile: str = "default",
        gpu: bool = False,
        bind: bool = True,
    ) -> list[VerbEvent]:
        """One attempt: filter, prioritize (when a node is left) and bind to our best node."""
        self._serial += 1
        uid = uid or f"uid-{name}-{self._serial}"
        container: dict[str, object] = {"name": "app", "image": "nginx:1.25.4"}
        if gpu:
            container["resources"] = {"requests": {GPU: "1"}}
        pod = {
            "metadata": {"name": name, "namespace": namespace, "uid": uid, "resourceVersion": "1"},
            "spec": {"containers": [container]},
        }
        args = msgspec.json.encode({"Pod": pod, "Nodes": None, "NodeNames": list(nodes)})
        extender = self._extender(at)
        filtered = extender.filter(profile, args)
        events = [filtered.event]
        passed = msgspec.json.decode(filtered.body)["NodeNames"] or []
        if passed:
            extender.clock = (at + timedelta(milliseconds=5)).timestamp
            scored = extender.prioritize(profile, msgspec.json.encode({"Pod": pod, "Nodes": None, "NodeNames": passed}))
            events.append(scored.event)
            if bind:
                hosts = msgspec.json.decode(scored.body)
                best = max(hosts, key=lambda h: h["Score"])["Host"]
                extender.clock = (at + timedelta(milliseconds=10)).timestamp
                binding = {"PodName": name, "PodNamespace": namespace, "PodUID": uid, "Node": best}
                events.append(extender.bind(profile, msgspec.json.encode(binding)).event)
        return events

    def refused(self, *, at: datetime, body: bytes = b"{") -> SchedulingCycle:
        """A call kube-scheduler's request could not be decoded for: an error cycle without a pod."""
        event = self._extender(at).filter("default", body).event
        store_served_versions(self.profiles, PROFILES)
        cycles_ingest_events(events=[event])
        return SchedulingCycle.objects.get(calls__event_id=event.event_id)

    def schedule(self, **kwargs: object) -> SchedulingCycle:
        """Record one attempt through the ingest service and return its cycle."""
        events = self.events(**kwargs)  # type: ignore[arg-type]
        store_served_versions(self.profiles, PROFILES)  # what the serving process's spool notes give the ingester
        cycles_ingest_events(events=events)
        return SchedulingCycle.objects.get(calls__event_id=events[0].event_id)
