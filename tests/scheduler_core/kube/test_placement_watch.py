"""The placement watcher turns pod and event watches into observations, through the real client."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from scheduler_core.kube.placement_watch import Observation, PlacementWatcher, parse_time
from scheduler_core.kube.watch import Backoff
from tests.support.fake_kube_api import FakeKubeAPI, api_client_for, failed_scheduling_event

OURS = "schedlens-scheduler"
WAIT = 10.0


class Seen:
    """The sink: observations in arrival order, with a way to wait for the next ones."""

    def __init__(self) -> None:
        self.items: list[Observation] = []
        self._changed = threading.Condition()

    def __call__(self, observation: Observation) -> None:
        with self._changed:
            self.items.append(observation)
            self._changed.notify_all()

    def wait_for(self, count: int) -> list[Observation]:
        with self._changed:
            assert self._changed.wait_for(lambda: len(self.items) >= count, WAIT), self.items
            return list(self.items)

    def kinds(self) -> list[tuple[str, str]]:
        return [(o.kind, o.name) for o in self.items]


@pytest.fixture
def api() -> Iterator[FakeKubeAPI]:
    with FakeKubeAPI() as server:
        yield server


@pytest.fixture
def seen() -> Seen:
    return Seen()


@pytest.fixture
def watcher(api: FakeKubeAPI, seen: Seen) -> Iterator[PlacementWatcher]:
    w = PlacementWatcher.from_api_client(
        api_client_for(api),
        scheduler_names=[OURS],
        sink=seen,
        backoff=lambda: Backoff(initial=0.01, maximum=0.05),
    )
    yield w
    w.stop()


def test_pods_of_other_schedulers_are_not_watched_at_all(api: FakeKubeAPI, watcher: PlacementWatcher) -> None:
    watcher.start()
    assert watcher.wait_synced(WAIT)

    [pods] = api.list_requests("pods")
    [events] = api.list_requests("events")
    assert pods.query["fieldSelector"] == [f"spec.schedulerName={OURS}"]
    assert events.query["fieldSelector"] == ["reason=FailedScheduling"]


def test_added_then_bound_then_deleted_pods_and_a_410_relist_become_observations(
    api: FakeKubeAPI, watcher: PlacementWatcher, seen: Seen
) -> None:
    api.add_pod("already-there", uid="uid-0", scheduler_name=OURS, node_name="node-1")
    api.add_pod("theirs", uid="uid-x", scheduler_name="default-scheduler", node_name="node-1")
    watcher.start()
    assert watcher.wait_synced(WAIT)
    assert seen.wait_for(1)[0].key == "bound:uid-0:node-1", "a pod bound before we started is found by the list"

    api.add_pod("web-1", uid="uid-1", scheduler_name=OURS)  # ADDED, pending: nothing to say yet
    api.set_pod_node("web-1", "node-2")  # MODIFIED: kube-scheduler bound it
    bound = seen.wait_for(2)[1]
    assert (bound.kind, bound.pod_uid, bound.node, bound.namespace) == ("bound", "uid-1", "node-2", "default")
    assert bound.scheduler_name == OURS
    assert bound.occurred_at == pytest.approx(
        parse_time(api.pod("web-1")["status"]["conditions"][-1]["lastTransitionTime"])
    )

    api.add_pod("doomed", uid="uid-2", scheduler_name=OURS)
    api.delete_pod("doomed")  # DELETED before it was ever bound
    deleted = seen.wait_for(3)[2]
    assert (deleted.kind, deleted.pod_uid, deleted.key) == ("deleted", "uid-2", "deleted:uid-2")

    api.add_pod("web-2", uid="uid-3", scheduler_name=OURS)
    api.wait_for_watch("pods")
    with api.lock:  # the binding is compacted away before the open watch could stream it
        api.set_pod_node("web-2", "node-3")
        api.expire("pods")
    relisted = seen.wait_for(4)[3]
    assert (relisted.kind, relisted.pod_uid, relisted.node) == ("bound", "uid-3", "node-3")
    assert len(api.list_requests("pods")) == 2

    api.delete_pod("web-1")  # a bound pod ending its life is not news
    api.add_pod("web-3", uid="uid-4", scheduler_name=OURS)
    api.set_pod_node("web-3", "node-1")
    assert seen.wait_for(5)[4].key == "bound:uid-4:node-1"
    assert seen.kinds() == [
        ("bound", "already-there"),
        ("bound", "web-1"),
        ("deleted", "doomed"),
        ("bound", "web-2"),
        ("bound", "web-3"),
    ]


def test_failed_scheduling_events_of_our_scheduler_are_observed_once_per_repeat(
    api: FakeKubeAPI, watcher: PlacementWatcher, seen: Seen
) -> None:
    pod = api.add_pod("gpu-job", uid="uid-9", scheduler_name=OURS)
    other = api.add_pod("plain", uid="uid-8", scheduler_name="default-scheduler")
    listed = api.put_event(failed_scheduling_event(pod, "0/3 nodes are available: 3 Insufficient cpu.", name="e1"))
    api.put_event(failed_scheduling_event(other, "0/3 nodes are available.", scheduler_name="default-scheduler"))
    watcher.start()

    first = seen.wait_for(1)[0]
    assert (first.kind, first.pod_uid, first.reason) == ("failed_scheduling", "uid-9", "FailedScheduling")
    assert first.message == "0/3 nodes are available: 3 Insufficient cpu."
    assert first.occurred_at == pytest.approx(parse_time(listed["eventTime"]))

    repeat = failed_scheduling_event(pod, "0/3 nodes are available: 1 TrafficThreshold.", name="e1", count=2)
    repeat["metadata"]["uid"] = listed["metadata"]["uid"]
    api.put_event(repeat)  # MODIFIED: the series counts a second failed attempt
    second = seen.wait_for(2)[1]
    assert second.key == f"event:{listed['metadata']['uid']}:2"
    assert second.message.endswith("TrafficThreshold.")
    assert second.occurred_at == pytest.approx(parse_time(repeat["series"]["lastObservedTime"]))
    assert [o.pod_uid for o in seen.items] == ["uid-9", "uid-9"], "the default scheduler's events are not ours"


def test_an_event_without_a_reporter_counts_only_for_a_pod_we_follow(
    api: FakeKubeAPI, watcher: PlacementWatcher, seen: Seen
) -> None:
    ours = api.add_pod("ours", uid="uid-1", scheduler_name=OURS, node_name="node-1")
    stranger = {"metadata": {"name": "x", "namespace": "default", "uid": "uid-unknown"}}
    watcher.start()
    assert watcher.wait_synced(WAIT)
    seen.wait_for(1)

    for pod in (stranger, ours):
        event = failed_scheduling_event(pod, "legacy recorder", scheduler_name="")
        event["reportingComponent"] = ""
        api.put_event(event)

    assert seen.wait_for(2)[1].pod_uid == "uid-1"
    assert [o.pod_uid for o in seen.items if o.kind == "failed_scheduling"] == ["uid-1"]


def test_rfc3339_times_with_and_without_fractions_are_read() -> None:
    assert parse_time("2024-05-01T10:00:00Z") == 1714557600.0
    assert parse_time("2024-05-01T10:00:00.250000Z") == 1714557600.25
    assert parse_time(None) is None
    assert parse_time("yesterday") is None
