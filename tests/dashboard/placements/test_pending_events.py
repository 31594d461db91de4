"""The Unschedulable Event on a waiting pod: both sides' reasons and the closest node, again only when they change,
rate-limited, through the Explained Event's queue."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dashboard import pod_events
from scheduler_core.kube.events import KubernetesEventWriter
from tests.support.fake_kube_api import FakeKubeAPI, api_client_for, failed_scheduling_event
from tests.support.pending_pods import EXPECTED, NAMESPACE, leave_waiting_pods, watch_into_the_list

pytestmark = pytest.mark.django_db

PUBLIC_URL = "https://schedlens.example"


@pytest.fixture
def api(settings) -> Iterator[FakeKubeAPI]:
    settings.SCHEDLENS_POD_EVENTS = True
    settings.SCHEDLENS_PUBLIC_URL = PUBLIC_URL
    settings.SCHEDLENS_PENDING_EVENT_SECONDS = 0
    with FakeKubeAPI() as server:
        writer = KubernetesEventWriter(api_client_for(server), timeout_seconds=1.0)
        previous = pod_events.install(pod_events.PodEventEmitter(writer))
        try:
            yield server
        finally:
            assert pod_events.emitter().join(5)
            pod_events.install(previous)
            writer.close()


def unschedulable(api: FakeKubeAPI) -> dict[str, list[dict]]:
    assert pod_events.emitter().join(5)
    found: dict[str, list[dict]] = {}
    for event in api.created_events:
        if event["reason"] == "Unschedulable":
            found.setdefault(event["regarding"]["name"], []).append(event)
    return found


def test_each_waiting_pod_is_told_why_once_then_again_only_when_it_changes(api: FakeKubeAPI, settings) -> None:
    pods = leave_waiting_pods(api)
    watch_into_the_list(api)

    events = unschedulable(api)
    assert sorted(events) == sorted(EXPECTED)
    busy = events["web-busy"][0]
    assert busy["type"] == "Warning"
    assert busy["reportingController"] == "schedlens"
    assert busy["note"] == (
        f"Pending after 1 attempt: {EXPECTED['web-busy']}. Closest: node-4, failing TrafficThreshold only "
        "(receive rate above 125.0 MB/s; 166.7 MB/s over the last 5 min, limit 125.0 MB/s)."
        f" — {PUBLIC_URL}/pending/{NAMESPACE}/web-busy/"
    )

    watch_into_the_list(api)  # the same reasons: nothing new
    assert {name: len(found) for name, found in unschedulable(api).items()} == dict.fromkeys(EXPECTED, 1)

    settings.SCHEDLENS_PENDING_EVENT_SECONDS = 3600  # changed, but told a moment ago: waits for the quiet time
    api.put_event(failed_scheduling_event(pods.kube, "0/6 nodes are available: 6 Insufficient cpu.", count=2))
    watch_into_the_list(api)
    assert len(unschedulable(api)["big-cpu"]) == 1

    settings.SCHEDLENS_PENDING_EVENT_SECONDS = 0
    watch_into_the_list(api)
    told = unschedulable(api)["big-cpu"]
    assert len(told) == 2
    assert told[-1]["note"].startswith("Pending after 2 attempts: 6 nodes: Insufficient cpu (kube-scheduler).")
