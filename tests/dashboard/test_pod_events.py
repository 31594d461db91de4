"""The Explained Event on a pod: written once the ingester folds a bind into its cycle, never in the way of it.

Against the Kubernetes-shaped HTTP server of the tests (``tests.support.fake_kube_api``) through the real client.
"""

from __future__ import annotations

import os
import re
import socket
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest
from prometheus_client import REGISTRY

from dashboard import pod_events
from dashboard.models import Outcome
from dashboard.selectors.cycles import cycle_explanation, cycle_list_with_calls
from scheduler_core.extender.protocol.binding import BindOutcome
from scheduler_core.extender.verbs import Extender
from scheduler_core.kube.events import KubernetesEventWriter
from scheduler_core.kube.pod_event import PodEvent
from tests.support.fake_kube_api import FakeKubeAPI, api_client_for
from tests.support.kube_scheduler import T0, TRAFFIC, KubeScheduler

EVENTS = "/apis/events.k8s.io/v1/namespaces/shop/events"
PUBLIC_URL = "https://schedlens.example"


def dropped(reason: str) -> float:
    return REGISTRY.get_sample_value("schedlens_pod_events_dropped_total", {"reason": reason}) or 0.0


@pytest.fixture
def api() -> Iterator[FakeKubeAPI]:
    with FakeKubeAPI() as server:
        yield server


@pytest.fixture
def emitter(api: FakeKubeAPI, settings) -> Iterator[pod_events.PodEventEmitter]:
    settings.SCHEDLENS_POD_EVENTS = True
    settings.SCHEDLENS_PUBLIC_URL = PUBLIC_URL
    writer = KubernetesEventWriter(api_client_for(api), timeout_seconds=0.5)
    new = pod_events.PodEventEmitter(writer, burst_seconds=0)  # every pod its Event: bursts are tested below
    previous = pod_events.install(new)
    yield new
    assert new.join(5)
    pod_events.install(previous)
    writer.close()


class _ClusterBinder:
    """Binds as KubernetesBinder does when the API server says 201 (the bind itself is not what is tested here)."""

    def bind(self, *, namespace: str, name: str, uid: str, node: str) -> BindOutcome:
        return BindOutcome(error="", detail="bound", status=201)


class _ClusterScheduler(KubeScheduler):
    """The API tests' kube-scheduler, its binds real (not simulated)."""

    def _extender(self, at: datetime) -> Extender:
        extender = super()._extender(at)
        extender.binder = _ClusterBinder()
        return extender


@pytest.fixture
def kube() -> KubeScheduler:
    return _ClusterScheduler(dict(TRAFFIC))


@pytest.mark.django_db
def test_a_recorded_bind_writes_the_explained_event_on_the_pod(api, emitter, kube) -> None:
    cycle = kube.schedule(at=T0, name="web-1", uid="uid-web-1")
    assert cycle.outcome == Outcome.BOUND
    assert emitter.join(5)

    assert len(api.created_events) == 1
    event = api.created_events[0]
    summary = cycle_explanation(cycle=cycle_list_with_calls().get(pk=cycle.pk)).summary
    assert summary
    assert event["apiVersion"] == "events.k8s.io/v1"
    assert event["kind"] == "Event"
    assert event["metadata"]["namespace"] == "shop"
    assert event["metadata"]["name"].startswith("web-1.")
    assert event["reason"] == "Explained"
    assert event["type"] == "Normal"
    assert event["action"] == "Scheduling"
    assert event["reportingController"] == "schedlens"
    assert event["reportingInstance"] == f"{socket.gethostname()}:{os.getpid()}"
    assert event["regarding"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "namespace": "shop",
        "name": "web-1",
        "uid": "uid-web-1",
    }
    # RFC 3339 with microseconds (MicroTime): the client writes the offset as +00:00
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|\+00:00)", event["eventTime"])
    assert event["note"] == f"{summary} — {PUBLIC_URL}/cycles/{cycle.pk}/"
    assert len(event["note"].encode()) <= 1024


@pytest.mark.django_db
def test_without_a_public_url_the_note_is_the_summary(api, emitter, kube, settings) -> None:
    settings.SCHEDLENS_PUBLIC_URL = ""
    cycle = kube.schedule(at=T0, name="web-2")
    assert emitter.join(5)
    summary = cycle_explanation(cycle=cycle_list_with_calls().get(pk=cycle.pk)).summary
    assert [e["note"] for e in api.created_events] == [summary]


@pytest.mark.django_db
def test_no_bind_no_event(api, emitter, kube) -> None:
    kube.schedule(at=T0, name="web-3", bind=False)
    assert emitter.join(5)
    assert api.created_events == []


@pytest.mark.django_db
@pytest.mark.parametrize("failure", ["403", "500"])
def test_a_refusing_api_drops_the_event_and_counts_it(api, emitter, kube, failure) -> None:
    api.events_failure = failure
    before = dropped(failure)
    cycle = kube.schedule(at=T0, name="web-4")
    assert cycle.outcome == Outcome.BOUND
    assert cycle.chosen_node
    assert emitter.join(5)
    assert api.created_events == []
    assert len(api.requests_to("POST", EVENTS)) == 1
    assert dropped(failure) == before + 1


@pytest.mark.django_db
def test_a_slow_api_drops_the_event_after_the_timeout_and_never_delays_the_ingest(api, emitter, kube) -> None:
    api.events_failure = "slow"
    api.events_slow_seconds = 3.0
    before = dropped("timeout")
    started = time.monotonic()
    cycle = kube.schedule(at=T0, name="web-5")
    assert time.monotonic() - started < 1.0  # the ingest does not wait for the API server
    assert cycle.outcome == Outcome.BOUND
    assert emitter.join(2.5)  # the client's 0.5 s timeout, not the server's 3 s
    assert dropped("timeout") == before + 1
    assert api.created_events == []
    # a second failure of the same kind is counted too
    api.events_failure = None
    kube.schedule(at=T0, name="web-6")
    assert emitter.join(5)
    assert len(api.created_events) == 1


@pytest.mark.django_db
def test_a_simulated_bind_gets_no_event(api, emitter) -> None:
    KubeScheduler(dict(TRAFFIC)).schedule(at=T0, name="web-8")  # SimulatedBinder: the demo's binds
    assert emitter.join(5)
    assert api.created_events == []


@pytest.mark.django_db
def test_turned_off_no_event(api, emitter, kube, settings) -> None:
    settings.SCHEDLENS_POD_EVENTS = False
    kube.schedule(at=T0, name="web-7")
    assert emitter.join(5)
    time.sleep(0.1)
    assert api.created_events == []
    assert api.requests_to("POST", EVENTS) == []


def test_simulated_binds_default_to_off(monkeypatch) -> None:
    import importlib

    import config.settings as module

    monkeypatch.setenv("SCHEDLENS_BIND_MODE", "simulated")
    monkeypatch.delenv("SCHEDLENS_POD_EVENTS", raising=False)
    try:
        assert importlib.reload(module).SCHEDLENS_POD_EVENTS is False
        monkeypatch.setenv("SCHEDLENS_BIND_MODE", "kubernetes")
        assert importlib.reload(module).SCHEDLENS_POD_EVENTS is True
        monkeypatch.setenv("SCHEDLENS_POD_EVENTS", "false")
        assert importlib.reload(module).SCHEDLENS_POD_EVENTS is False
    finally:
        monkeypatch.undo()
        importlib.reload(module)


class _BlockedWriter:
    def __init__(self) -> None:
        self.release = threading.Event()
        self.notes: list[str] = []

    def create(self, event: PodEvent) -> str:
        self.release.wait(5)
        self.notes.append(event.note)
        return ""


def test_a_full_queue_drops_without_blocking() -> None:
    writer = _BlockedWriter()
    emitter = pod_events.PodEventEmitter(writer, queue_size=1)
    before = dropped("queue_full")
    job = pod_events.PodEventJob(namespace="shop", name="web", uid="u", summary=lambda: "bound")
    started = time.monotonic()
    results = [emitter.submit(job) for _ in range(5)]
    assert time.monotonic() - started < 0.5
    # one taken by the thread (blocked), one queued, the rest dropped (the thread may not have taken one yet)
    assert results.count(False) >= 3
    assert dropped("queue_full") == before + results.count(False)
    writer.release.set()
    assert emitter.join(5)


def test_a_long_note_is_cut_to_1_kb_keeping_the_link(api) -> None:
    writer = KubernetesEventWriter(api_client_for(api), timeout_seconds=1.0)
    emitter = pod_events.PodEventEmitter(writer)
    link = f"{PUBLIC_URL}/cycles/42/"
    emitter.submit(pod_events.PodEventJob("shop", "web", "u", summary=lambda: "é" * 2000, link=link))
    assert emitter.join(5)
    note = api.created_events[0]["note"]
    assert len(note.encode()) <= 1024
    assert note.endswith(f"... — {link}")
    writer.close()


def _bound_by_kube_scheduler(cycle, node: str) -> None:
    from dashboard.placements.models import ObservationKind
    from dashboard.placements.services import placements_record

    placements_record(
        key=f"bound:{cycle.pod_uid}:{node}",
        kind=ObservationKind.BOUND,
        pod_uid=cycle.pod_uid,
        pod_namespace=cycle.pod_namespace,
        pod_name=cycle.pod_name,
        node=node,
        occurred_at=(cycle.started_at + timedelta(milliseconds=50)).timestamp(),
    )


@pytest.mark.django_db
def test_a_pod_kube_scheduler_bound_itself_gets_the_event_from_the_placement_watcher(api, emitter, kube) -> None:
    cycle = kube.schedule(at=T0, name="web-9", uid="uid-web-9", bind=False)  # filter and prioritize only
    assert emitter.join(5)
    assert api.created_events == []

    _bound_by_kube_scheduler(cycle, "node-2")
    assert emitter.join(5)

    cycle.refresh_from_db()
    assert cycle.chosen_node == "node-2"
    summary = cycle_explanation(cycle=cycle_list_with_calls().get(pk=cycle.pk)).summary
    [event] = api.created_events
    assert event["regarding"]["uid"] == "uid-web-9"
    assert event["reason"] == "Explained"
    assert event["note"] == f"{summary} — {PUBLIC_URL}/cycles/{cycle.pk}/"
    # seen again (a relist): the cycle is concluded already, no second Event
    _bound_by_kube_scheduler(cycle, "node-2")
    assert emitter.join(5)
    assert len(api.created_events) == 1


@pytest.mark.django_db
def test_a_pod_schedlens_bound_gets_one_event_even_when_the_watcher_sees_it_too(api, emitter, kube) -> None:
    cycle = kube.schedule(at=T0, name="web-10")
    _bound_by_kube_scheduler(cycle, cycle.chosen_node)
    assert emitter.join(5)
    assert len(api.created_events) == 1


def test_the_event_carries_the_clients_headers_and_its_token_asked_for_on_every_event(api) -> None:
    api_client = api_client_for(api)
    api_client.user_agent = "schedlens-test/1"
    tokens = iter(["first", "second"])

    def refresh(configuration) -> None:  # type: ignore[no-untyped-def]
        configuration.api_key["BearerToken"] = next(tokens)

    api_client.configuration.api_key["BearerToken"] = "expired"
    api_client.configuration.api_key_prefix["BearerToken"] = "Bearer"
    api_client.configuration.refresh_api_key_hook = refresh
    writer = KubernetesEventWriter(api_client, timeout_seconds=1.0)
    sent = {"namespace": "shop", "uid": "u", "note": "n", "reason": "Explained", "action": "Scheduling"}

    assert writer.create(PodEvent(name="web-1", controller="schedlens", instance="i", **sent)) == ""
    assert writer.create(PodEvent(name="web-2", controller="schedlens", instance="i", **sent)) == ""

    posted = api.requests_to("POST", EVENTS)
    assert [r.headers.get("authorization") for r in posted] == ["Bearer first", "Bearer second"]
    headers = {k.lower(): v for k, v in posted[0].headers.items()}
    assert (headers["user-agent"], headers["accept"]) == ("schedlens-test/1", "application/json")
    assert [e["regarding"]["name"] for e in api.created_events] == ["web-1", "web-2"]
    writer.close()


def folded() -> float:
    return REGISTRY.get_sample_value("schedlens_pod_events_folded_total") or 0.0


@pytest.mark.django_db
def test_of_a_burst_of_one_controller_s_pods_the_first_gets_the_event_saying_so(api, kube, settings) -> None:
    settings.SCHEDLENS_POD_EVENTS = True
    settings.SCHEDLENS_PUBLIC_URL = PUBLIC_URL
    writer = KubernetesEventWriter(api_client_for(api), timeout_seconds=0.5)
    emitter = pod_events.PodEventEmitter(writer, burst_seconds=60)
    previous = pod_events.install(emitter)
    before = folded()
    try:
        first = kube.schedule(at=T0, name="web-7d9f8c-x2b4q", uid="u1")
        kube.schedule(at=T0 + timedelta(seconds=20), name="web-7d9f8c-m5n6p", uid="u2")  # same burst: none
        other = kube.schedule(at=T0 + timedelta(seconds=30), name="api", uid="u3")  # no controller's name: its own
        later = kube.schedule(at=T0 + timedelta(seconds=75), name="web-7d9f8c-q2w4r", uid="u4")  # a new window
        assert emitter.join(5)
    finally:
        pod_events.install(previous)
        writer.close()

    events = {e["regarding"]["name"]: e["note"] for e in api.created_events}
    assert set(events) == {"web-7d9f8c-x2b4q", "api", "web-7d9f8c-q2w4r"}
    assert folded() == before + 1
    burst = (
        "Pods named web-7d9f8c-* placed within 60 s of this one have no Explained Event of their own: "
        "kubectl schedlens why POD -n shop."
    )
    for cycle in (first, later):
        summary = cycle_explanation(cycle=cycle_list_with_calls().get(pk=cycle.pk)).summary
        assert events[cycle.pod_name] == f"{summary} {burst} — {PUBLIC_URL}/cycles/{cycle.pk}/"
    summary = cycle_explanation(cycle=cycle_list_with_calls().get(pk=other.pk)).summary
    assert events["api"] == f"{summary} — {PUBLIC_URL}/cycles/{other.pk}/"


def test_a_long_note_keeps_the_burst_sentence_and_the_link_whole(api) -> None:
    writer = KubernetesEventWriter(api_client_for(api), timeout_seconds=1.0)
    emitter = pod_events.PodEventEmitter(writer)
    link, burst = f"{PUBLIC_URL}/cycles/42/", "Pods named web-* placed within 60 s of this one have none."
    emitter.submit(pod_events.PodEventJob("shop", "web-1", "u", lambda: "é" * 2000, link=link, burst_note=burst))
    assert emitter.join(5)
    note = api.created_events[0]["note"]
    assert len(note.encode()) <= 1024
    assert note.endswith(f"... {burst} — {link}")
    writer.close()
