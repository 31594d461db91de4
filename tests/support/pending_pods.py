"""Three pods no node takes, as the tests' Kubernetes-shaped server and the real verbs leave them: one refused by our
filter on every node (``gpu-job``: a cluster of the 4 nodes it was offered), one by kube-scheduler's own filters
(``big-cpu``: our filter never asked), one by both (``web-busy``).

kube-scheduler's FailedScheduling message is written as v1.28 writes it, quoting our answer per node
(``"<Plugin>: <reason>"``, joined by "; ") among its own reasons.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from dashboard.placements.models import ObservationKind, PlacementObservation, WaitingPod
from dashboard.placements.pump import PlacementPump
from scheduler_core.kube.placement_watch import PlacementWatcher
from tests.support.fake_kube_api import FakeKubeAPI, api_client_for, failed_scheduling_event
from tests.support.recording import Recorder, make_pod
from tests.support.stored_calls import stored_record

OURS = "schedlens-scheduler"
NAMESPACE = "shop"
PREEMPTION = " preemption: 0/6 nodes are available: 6 Preemption is not helpful for scheduling."
KUBE_ONLY = "0/6 nodes are available: 4 Insufficient cpu, 2 node(s) had untolerated taint {dedicated: infra}."


def quoting(failures: dict[str, dict[str, str]], own: Counter[str], total: int) -> str:
    """kube-scheduler's message for an attempt whose candidates our filter refused as ``failures`` records."""
    reasons = Counter({**own})
    for checks in failures.values():
        reasons["; ".join(f"{plugin}: {reason}" for plugin, reason in checks.items())] += 1
    items = ", ".join(f"{count} {reason}" for reason, count in sorted(reasons.items()))
    return f"0/{total} nodes are available: {items}.{PREEMPTION}"


@dataclass
class WaitingPods:
    ours: dict[str, Any]
    kube: dict[str, Any]
    both: dict[str, Any]


def leave_waiting_pods(api: FakeKubeAPI, recorder: Recorder | None = None) -> WaitingPods:
    """Creates the three pods (unbound, our scheduler name), records their attempts and puts their Events."""
    recorder = recorder or Recorder()
    pods = {}
    for name in ("gpu-job", "big-cpu", "web-busy"):
        template = make_pod(name, NAMESPACE, gpu=name == "gpu-job")
        stored = api.add_pod(name, NAMESPACE, uid=template["metadata"]["uid"], scheduler_name=OURS)
        pods[name] = (template, stored)

    template, stored = pods["gpu-job"]  # kube-scheduler's filters let every node through; ours refuses each of them
    cycle = recorder.schedule(template, profile="gpu-aware", nodes=["node-3", "node-4", "node-5", "node-6"])
    failures = next(stored_record(c) for c in cycle.calls.all() if c.verb == "filter")["failures"]
    api.put_event(failed_scheduling_event(stored, quoting(failures, Counter(), 4)))

    _, stored = pods["big-cpu"]  # refused by kube-scheduler's own filters: our filter is never asked
    api.put_event(failed_scheduling_event(stored, KUBE_ONLY + PREEMPTION))

    template, stored = pods["web-busy"]  # 5 nodes refused by kube-scheduler, the one left by our filter
    cycle = recorder.schedule(template, profile="default", nodes=["node-4"])
    failures = next(stored_record(c) for c in cycle.calls.all() if c.verb == "filter")["failures"]
    api.put_event(failed_scheduling_event(stored, quoting(failures, Counter({"Insufficient memory": 5}), 6)))
    return WaitingPods(ours=pods["gpu-job"][1], kube=pods["big-cpu"][1], both=pods["web-busy"][1])


EXPECTED = {
    "gpu-job": (
        "3 nodes: node does not enable example.com/gpu (schedlens NodeResourceFitByCR); "
        "1 node: no NodeResources object for node (schedlens NodeResourceFitByCR); "
        "1 node: no traffic series for node (schedlens TrafficThreshold); "
        "1 node: receive rate above 100.0 MB/s (schedlens TrafficThreshold)"
    ),
    "big-cpu": "4 nodes: Insufficient cpu (kube-scheduler); 2 nodes: node(s) had untolerated taint {dedicated: infra} "
    "(kube-scheduler)",
    "web-busy": "5 nodes: Insufficient memory (kube-scheduler); "
    "1 node: receive rate above 125.0 MB/s (schedlens TrafficThreshold)",
}
"""Each pod's one line: both sides, largest first, with counts."""


def watch_into_the_list(api: FakeKubeAPI, *, pods: int = 3, timeout: float = 10.0) -> None:
    """Run the placement watcher and its pump (as ``manage.py watch_placements`` does) until the live list holds
    ``pods`` waiting pods and every FailedScheduling Event is recorded, then stop it."""
    pump = PlacementPump(reconcile_interval=0.2)
    watcher = PlacementWatcher.from_api_client(api_client_for(api), scheduler_names=[OURS], sink=pump.put)
    pump.keep_waiting(watcher)
    watcher.start()
    try:
        assert watcher.wait_synced(timeout)
        failures = PlacementObservation.objects.filter(kind=ObservationKind.FAILED_SCHEDULING)
        assert pump.run_until(lambda: WaitingPod.objects.count() == pods and failures.count() >= pods, timeout=timeout)
        pump.drain()
    finally:
        watcher.stop()
