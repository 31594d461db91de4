"""What the verbs read, filled by hand: a traffic store and a verb's ``CycleInputs``."""

from __future__ import annotations

import time
from collections.abc import Mapping

from scheduler_core.extender.scoring.herd import InMemoryBindLog, RecentBinds
from scheduler_core.extender.scoring.plugins.base import TrafficView
from scheduler_core.extender.scoring.profiles import Profile
from scheduler_core.traffic import TrafficQuery, TrafficSnapshot
from scheduler_core.traffic.store import TrafficStore


def traffic_store(
    bytes_by_node: Mapping[str, float], *, age: float = 0.0, query: TrafficQuery | None = None
) -> TrafficStore:
    store = TrafficStore()
    store.put(TrafficSnapshot(query or TrafficQuery(), dict(bytes_by_node), time.time() - age, "test"))
    return store


class Inputs:
    """A verb's ``CycleInputs`` over a fixed traffic view and an in-memory bind log (the herd estimate on, as in
    production); counts how often each call reads."""

    def __init__(self, traffic: TrafficView, binds: InMemoryBindLog) -> None:
        self.traffic = traffic
        self.binds = binds
        self.reads = 0

    def for_call(self, profile: Profile, now: float) -> tuple[TrafficView, RecentBinds]:
        self.reads += 1
        return self.traffic, self.binds.recent_binds(now)

    def record_bind(self, *, node: str, pod: str, at: float, bytes: float | None = None, name: str = "") -> None:
        self.binds.record_bind(node=node, pod=pod, at=at, bytes=bytes, name=name)
