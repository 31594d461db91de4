"""A stretch of history recorded the way production records it, for the history replay's tests.

Pods of the simulator's kinds (images, extended resources) go through the real verbs under the demo profiles, with
the herd estimate on and a new traffic snapshot every few pods, through the spool's encoding and the ingester: the
stored bodies are production's (shared parts on the large cluster, lists in the body on a small one).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

import msgspec

from dashboard.ingest.cycles import cycles_ingest_records
from dashboard.models import SchedulingCycle
from scheduler_core.cli.simulator import make_cluster, make_pod
from scheduler_core.extender.protocol.binding import SimulatedBinder
from scheduler_core.extender.protocol.cluster import StaticCluster
from scheduler_core.extender.protocol.wire import encode
from scheduler_core.extender.record.spool_codec import encode_event
from scheduler_core.extender.scoring.herd import InMemoryBindLog
from scheduler_core.extender.scoring.profiles import load_profiles
from scheduler_core.extender.verbs import Extender
from scheduler_core.traffic import TrafficQuery, TrafficSnapshot
from scheduler_core.traffic.store import TrafficStore
from tests.support.paths import REPO
from tests.support.profile_versions import store_served_versions

PROFILES = REPO / "deploy" / "profiles.demo.yaml"
WINDOW_SECONDS = 300


@dataclass
class History:
    """Plays kube-scheduler against the real verbs (the demo profiles) and ingests what they record."""

    nodes: int = 80
    seed: int = 5
    pods_per_snapshot: int = 4
    deriving: bool = False
    """Records spooled in ``SLR\\x04`` form, stored as spooled (body format 3); else transcoded (format 2)."""
    rng: random.Random = field(init=False)
    store: TrafficStore = field(init=False)
    binds: InMemoryBindLog = field(init=False)
    extender: Extender = field(init=False)
    recorded: int = 0

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.cluster = make_cluster(self.nodes, seed=self.seed)
        self.store = TrafficStore()
        self.binds = InMemoryBindLog(300.0)
        history = self

        class Inputs:  # the verbs' traffic and recent binds (the herd estimate on, as in production)
            def for_call(self, profile: object, now: float) -> tuple[object, object]:
                return history.store, history.binds.recent_binds(now)

            def record_bind(
                self, *, node: str, pod: str, at: float, bytes: float | None = None, name: str = ""
            ) -> None:
                history.binds.record_bind(node=node, pod=pod, at=at, bytes=bytes, name=name)

        self.extender = Extender(
            load_profiles(PROFILES.read_text()),
            cluster=StaticCluster.from_document(self.cluster.document()),
            traffic=self.store,
            binder=SimulatedBinder(),
            inputs=Inputs(),  # type: ignore[arg-type]
        )

    @property
    def node_names(self) -> list[str]:
        return list(self.cluster.node_names)

    def snapshot(self) -> None:
        # Bytes over the 5-minute window: 0.3 kB/s .. 140 MB/s, so the 100 and 125 MB/s thresholds fail a few;
        # one node without a series.
        names = self.node_names
        traffic = {name: float(round(self.rng.uniform(1e5, 4.2e10))) for name in names[:-1]}
        for query in {q for p in self.extender.profiles.values() for q in p.traffic_queries()} | {TrafficQuery()}:
            self.store.put(TrafficSnapshot(query, traffic, time.time(), "test"))

    def record(self, count: int, *, profile: str = "default", nodes: list[str] | None = None) -> list[SchedulingCycle]:
        store_served_versions(self.extender.profiles, PROFILES.read_text())  # as the spool's notes give the ingester
        cycles = []
        for _ in range(count):
            if self.recorded % self.pods_per_snapshot == 0:
                self.snapshot()
            self.recorded += 1
            pod = make_pod(self.rng)
            candidates = nodes or self.node_names
            events = []
            filtered = self.extender.filter(profile, encode({"Pod": pod, "Nodes": None, "NodeNames": candidates}))
            events.append(filtered.event)
            passed = msgspec.json.decode(filtered.body)["NodeNames"] or []
            best = passed[0] if passed else None
            if len(passed) > 1:
                scored = self.extender.prioritize(profile, encode({"Pod": pod, "Nodes": None, "NodeNames": passed}))
                events.append(scored.event)
                best = max(msgspec.json.decode(scored.body), key=lambda h: h["Score"])["Host"]
            if best is not None:
                meta = pod["metadata"]
                binding = {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"]}
                events.append(self.extender.bind(profile, encode({**binding, "Node": best})).event)
            cycles_ingest_records(records=[encode_event(e, deriving=self.deriving) for e in events])
            cycles.append(SchedulingCycle.objects.get(pod_uid=pod["metadata"]["uid"]))
        return cycles
