"""The live pending list: pods the placement watcher sees unbound, each with both halves of why, until it binds."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dashboard.placements.models import ObservationKind, PlacementObservation, WaitingPod
from dashboard.placements.pump import PlacementPump
from dashboard.placements.selectors import pending_list, pending_pod
from scheduler_core.kube.placement_watch import PlacementWatcher
from tests.support.fake_kube_api import FakeKubeAPI, api_client_for
from tests.support.pending_pods import EXPECTED, NAMESPACE, OURS, leave_waiting_pods

pytestmark = pytest.mark.django_db


@pytest.fixture
def api() -> Iterator[FakeKubeAPI]:
    with FakeKubeAPI() as server:
        yield server


def test_each_waiting_pod_is_listed_with_both_sides_counted_and_the_list_empties_as_pods_bind(api: FakeKubeAPI) -> None:
    api.add_pod("placed", NAMESPACE, uid="uid-placed", scheduler_name=OURS, node_name="node-1")
    api.add_pod("theirs", NAMESPACE, uid="uid-theirs")  # the default scheduler's: not ours to explain
    leave_waiting_pods(api)
    pump = PlacementPump(reconcile_interval=0.2)
    watcher = PlacementWatcher.from_api_client(api_client_for(api), scheduler_names=[OURS], sink=pump.put)
    pump.keep_waiting(watcher)
    watcher.start()
    try:
        assert watcher.wait_synced(10)
        assert pump.run_until(lambda: WaitingPod.objects.count() == 3 and _failures_seen() == 3, timeout=10)

        listed = {pod.name: pod for pod in pending_list(namespace=NAMESPACE)}
        assert {name: pod.summary for name, pod in listed.items()} == EXPECTED
        assert {name: pod.attempts for name, pod in listed.items()} == {"gpu-job": 1, "big-cpu": 1, "web-busy": 1}
        assert listed["web-busy"].profile == "default"
        assert listed["big-cpu"].profile == OURS

        busy = pending_pod(namespace=NAMESPACE, name="web-busy")
        assert busy is not None
        [attempt] = busy.view.attempts
        [miss] = attempt.closest
        assert (miss.node, miss.figure, miss.limit) == ("node-4", "166.7 MB/s over the last 5 min", "125.0 MB/s")
        assert attempt.nodes_total == 6
        assert attempt.passed == 0
        assert attempt.preemption.endswith("Preemption is not helpful for scheduling")

        api.set_pod_node("web-busy", "node-2", namespace=NAMESPACE)
        assert pump.run_until(lambda: WaitingPod.objects.count() == 2, timeout=10)
        api.delete_pod("big-cpu", namespace=NAMESPACE)
        api.set_pod_node("gpu-job", "node-1", namespace=NAMESPACE)
        assert pump.run_until(lambda: WaitingPod.objects.count() == 0, timeout=10)
        assert pending_list() == []
        assert pending_pod(namespace=NAMESPACE, name="web-busy") is None
    finally:
        watcher.stop()


def _failures_seen() -> int:
    return PlacementObservation.objects.filter(kind=ObservationKind.FAILED_SCHEDULING).count()


def test_a_backlog_binding_pod_by_pod_syncs_the_pending_list_once_per_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each bind empties the pump's queue and changes the waiting set: syncing the whole set after each one made the
    # watcher's work per pod grow with the backlog.
    from dashboard.placements import pump as pump_module
    from scheduler_core.kube.placement_watch import Observation

    class Backlog:
        waiting_version = 0
        pods_synced = True

        def waiting(self) -> list[object]:
            return []

    backlog = Backlog()
    syncs: list[int] = []
    monkeypatch.setattr(pump_module, "placements_record_all", lambda observations: [])
    monkeypatch.setattr(pump_module, "placements_waiting_sync", lambda pods, complete: syncs.append(len(pods)))
    pump = PlacementPump(reconcile_interval=600, waiting_sync_interval=600)
    pump.keep_waiting(backlog)  # type: ignore[arg-type]  # (a WaitingSource in all but its pods)
    for i in range(20):
        backlog.waiting_version += 1
        pump.put(Observation("bound", f"bound:uid-{i}:node-1", f"uid-{i}", "shop", f"web-{i}", 0.0, node="node-1"))
        pump.step(timeout=0)

    assert len(syncs) == 1
    pump.drain()  # and once more when asked to catch up: the list is what the watch says at the end
    assert len(syncs) == 2
