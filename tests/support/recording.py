"""Cycles recorded through the real path: the verbs, the spool's encoding, the ingester.

The cluster is small and fixed so the pages' figures can be asserted: node-1..3 carry the tutorial's 1.0 / 1.2 /
1.4 MB, node-4 is saturated (above the 125 MB/s threshold), node-5 has no NodeResources object, node-6 has no
traffic series.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from dashboard.ingest.cycles import cycles_ingest_events
from dashboard.models import SchedulingCycle
from scheduler_core.extender.protocol.binding import SimulatedBinder
from scheduler_core.extender.protocol.cluster import NodeInfo, NodeResourcesSpec, StaticCluster
from scheduler_core.extender.protocol.wire import encode
from scheduler_core.extender.record.spool_codec import decode_event, encode_event
from scheduler_core.extender.record.structs import VerbEvent
from scheduler_core.extender.scoring.profiles import load_profiles
from scheduler_core.extender.verbs import Extender
from tests.support.inputs import traffic_store
from tests.support.paths import REPO
from tests.support.profile_versions import store_served_versions

PROFILES = REPO / "deploy" / "profiles.demo.yaml"
MB = 1e6
TRAFFIC = {"node-1": 1.0 * MB, "node-2": 1.2 * MB, "node-3": 1.4 * MB, "node-4": 50_000 * MB, "node-5": 0.5 * MB}
NODES = ["node-1", "node-2", "node-3", "node-4", "node-5", "node-6"]
IMAGE = "nginx:1.25.4"
NGINX_PRESENT = frozenset({"docker.io/library/nginx:1.25.4"})
CLUSTER = StaticCluster(
    [NodeInfo(name, images=NGINX_PRESENT if name == "node-3" else frozenset()) for name in NODES],
    {
        name: NodeResourcesSpec({"example.com/gpu": name in {"node-1", "node-2"}}, {"example.com/gpu": 80})
        for name in NODES
        if name != "node-5"
    },
)


def make_pod(name: str = "web-7d9f", namespace: str = "shop", *, gpu: bool = False) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "c", "image": IMAGE}
    if gpu:
        container["resources"] = {"requests": {"example.com/gpu": "1"}}
    return {
        "metadata": {"name": name, "namespace": namespace, "uid": str(uuid.uuid4()), "resourceVersion": "1"},
        "spec": {"containers": [container]},
    }


@dataclass
class Recorder:
    """Plays kube-scheduler against the real verbs and ingests what they record, as the spool ingester would."""

    extender: Extender = field(
        default_factory=lambda: Extender(
            load_profiles(PROFILES.read_text()),
            cluster=CLUSTER,
            traffic=traffic_store(TRAFFIC),
            binder=SimulatedBinder(),
        )
    )

    def schedule(
        self,
        pod: dict[str, Any] | None = None,
        *,
        profile: str = "default",
        nodes: Iterable[str] = NODES,
        bind_to: str | None = None,
        bind: bool = True,
    ) -> SchedulingCycle:
        pod = pod or make_pod()
        events: list[VerbEvent] = []
        args = encode({"Pod": pod, "Nodes": None, "NodeNames": list(nodes)})
        filtered = self.extender.filter(profile, args)
        events.append(filtered.event)
        passed = msgspec.json.decode(filtered.body)["NodeNames"]
        target = passed[0] if passed else None
        if len(passed) > 1:
            scored = self.extender.prioritize(profile, encode({"Pod": pod, "Nodes": None, "NodeNames": passed}))
            events.append(scored.event)
            answer = msgspec.json.decode(scored.body)
            target = max(answer, key=lambda h: h["Score"])["Host"]  # first on a tie
        if bind and target is not None:
            meta = pod["metadata"]
            binding = {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"]}
            events.append(self.extender.bind(profile, encode({**binding, "Node": bind_to or target})).event)
        # Through the spool's encoding, exactly as the ingester reads it back (and the versions its notes give).
        store_served_versions(self.extender.profiles, PROFILES.read_text())
        cycles_ingest_events(events=[decode_event(encode_event(e)) for e in events])
        return SchedulingCycle.objects.get(pod_uid=pod["metadata"]["uid"])

    def refuse(self, body: bytes = b"{") -> None:
        store_served_versions(self.extender.profiles, PROFILES.read_text())
        cycles_ingest_events(events=[self.extender.filter("default", body).event])


def use_demo_profiles(settings: Any, spool_dir: Path) -> None:
    settings.SCHEDLENS_CONFIG = str(PROFILES)
    settings.SCHEDLENS_SPOOL_DIR = spool_dir
    settings.SCHEDLENS_INGEST_IN_PROCESS = False
