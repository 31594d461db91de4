"""A pod gets exactly one Explained Event, whichever of the placement watcher and the ingester completes its cycle last.

kube-scheduler binds the pod in the fake API; the real watcher and its pump record the bind, while the test decides
when the ingester stores the cycle's filter and prioritize calls. The pump is drained after every step, as its
periodic reconcile would.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime

import pytest
from django.utils import timezone
from prometheus_client import REGISTRY

from dashboard import pod_events
from dashboard.ingest.cycles import cycles_ingest_events
from dashboard.models import Outcome, SchedulingCycle
from dashboard.placements.models import PlacementObservation
from dashboard.placements.pump import PlacementPump
from scheduler_core.extender.record.structs import CycleRecords
from scheduler_core.extender.verbs import Extender
from scheduler_core.kube.api import KubernetesBinder
from scheduler_core.kube.events import KubernetesEventWriter
from scheduler_core.kube.placement_watch import PlacementWatcher
from scheduler_core.kube.watch import Backoff
from tests.support.fake_kube_api import FakeKubeAPI, api_client_for
from tests.support.kube_scheduler import TRAFFIC, KubeScheduler

pytestmark = pytest.mark.django_db(transaction=True)  # the pump's threads and the ingest commit for real

OURS = "schedlens-scheduler"
WAIT = 10.0
NO_PRIORITIZE = "no prioritize call was recorded"


class Scheduler(KubeScheduler):
    """The API tests' kube-scheduler, its cycles now, binding through the fake API when it has a bind verb."""

    def __init__(self, api: FakeKubeAPI) -> None:
        super().__init__(dict(TRAFFIC))
        self.api = api

    def _extender(self, at: datetime) -> Extender:
        extender = super()._extender(at)
        extender.binder = KubernetesBinder(api_client_for(self.api))
        return extender


@pytest.fixture
def api() -> Iterator[FakeKubeAPI]:
    with FakeKubeAPI() as server:
        yield server


@pytest.fixture
def emitter(api: FakeKubeAPI, settings) -> Iterator[pod_events.PodEventEmitter]:
    settings.SCHEDLENS_POD_EVENTS = True
    writer = KubernetesEventWriter(api_client_for(api), timeout_seconds=2.0)
    new = pod_events.PodEventEmitter(writer, burst_seconds=0)  # once per pod, every pod: no burst folds one
    previous = pod_events.install(new)
    yield new
    pod_events.install(previous)
    writer.close()


@pytest.fixture
def pump(api: FakeKubeAPI) -> Iterator[PlacementPump]:
    """``watch_placements``: the watcher feeding the pump; the test drains the pump between steps."""
    pump = PlacementPump(reconcile_interval=3600)
    watcher = PlacementWatcher.from_api_client(
        api_client_for(api), scheduler_names=[OURS], sink=pump.put, backoff=lambda: Backoff(initial=0.01, maximum=0.05)
    )
    watcher.start()
    assert watcher.wait_synced(WAIT)
    yield pump
    watcher.stop()


def kube_scheduler_binds(api: FakeKubeAPI, pump: PlacementPump, node: str = "node-2", name: str = "web-1") -> None:
    """kube-scheduler's default binder binds ``name``; the watcher sees it and the pump records it."""
    recorded = pump.recorded
    api.set_pod_node(name, node, "shop")
    assert pump.run_until(lambda: pump.recorded > recorded, timeout=WAIT)


def settle(pump: PlacementPump, emitter: pod_events.PodEventEmitter) -> None:
    pump.drain()  # what the pump's periodic reconcile does
    assert emitter.join(WAIT)


def explained(api: FakeKubeAPI, uid: str = "uid-1") -> list[str]:
    return [e["note"] for e in api.created_events if e["reason"] == "Explained" and e["regarding"]["uid"] == uid]


@pytest.fixture
def attempt(api: FakeKubeAPI) -> tuple[Scheduler, list]:
    """web-1 pending in the API, and kube-scheduler's calls of its scheduling cycle (filter, prioritize, bind)."""
    api.add_pod("web-1", "shop", uid="uid-1", scheduler_name=OURS)
    scheduler = Scheduler(api)
    return scheduler, scheduler.events(at=timezone.now(), name="web-1", uid="uid-1", bind=False)


def test_the_watcher_sees_the_bind_before_the_ingester_stored_the_prioritize_call(api, emitter, pump, attempt) -> None:
    _, (filtered, scored) = attempt
    cycles_ingest_events(events=[filtered])
    kube_scheduler_binds(api, pump)
    settle(pump, emitter)
    assert explained(api) == [], "the cycle's prioritize call is not in yet: no Event to write"

    cycles_ingest_events(events=[scored])  # the ingester completes the cycle: its Event
    assert emitter.join(WAIT)
    cycle = SchedulingCycle.objects.get(pod_uid="uid-1")
    assert (cycle.chosen_node, cycle.outcome) == ("node-2", Outcome.BOUND), "the late call keeps the node observed"
    settle(pump, emitter)

    [note] = explained(api)
    assert note.startswith("Placed on node-2")
    assert NO_PRIORITIZE not in note


def test_the_watcher_sees_the_bind_before_the_ingester_stored_any_call(api, emitter, pump, attempt) -> None:
    _, (filtered, scored) = attempt
    kube_scheduler_binds(api, pump)  # no cycle yet: the reconcile links it
    cycles_ingest_events(events=[filtered])
    settle(pump, emitter)
    cycles_ingest_events(events=[scored])
    settle(pump, emitter)

    [note] = explained(api)
    assert NO_PRIORITIZE not in note


def test_the_ingester_stored_the_cycle_before_the_watcher_sees_the_bind(api, emitter, pump, attempt) -> None:
    _, (filtered, scored) = attempt
    cycles_ingest_events(events=[filtered, scored])
    assert emitter.join(WAIT)
    assert explained(api) == []

    kube_scheduler_binds(api, pump)  # the watcher completes the cycle: its Event
    settle(pump, emitter)
    settle(pump, emitter)

    [note] = explained(api)
    assert note.startswith("Placed on node-2")
    assert NO_PRIORITIZE not in note


def test_a_pod_schedlens_bound_gets_one_event_when_the_watcher_sees_the_bind_before_the_ingester(
    api, emitter, pump, attempt
) -> None:
    scheduler, _ = attempt
    filtered, scored, bound = scheduler.events(at=timezone.now(), name="web-1", uid="uid-1")  # with the bind verb
    assert api.pod("web-1", "shop")["spec"]["nodeName"]
    cycles_ingest_events(events=[filtered, scored])
    assert pump.run_until(lambda: pump.recorded >= 1, timeout=WAIT)  # the watcher saw schedlens's binding
    settle(pump, emitter)
    cycles_ingest_events(events=[bound])  # the bind call arrives last
    settle(pump, emitter)

    assert len(explained(api)) == 1


# ----- a claim always queues its Event -----


class SlowFactory:
    """The process emitter's factory as on a real cluster: finding the API (the kubeconfig, its certificates) takes a
    while, in the emitter's thread, once the first Event arrives. Here it waits until the test releases it."""

    def __init__(self, writer: KubernetesEventWriter | None) -> None:
        self.writer = writer
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self) -> KubernetesEventWriter | None:
        self.entered.set()
        self.release.wait(WAIT)
        return self.writer


@pytest.fixture
def slow_emitter(api: FakeKubeAPI, settings) -> Iterator[tuple[pod_events.PodEventEmitter, SlowFactory]]:
    """What ``pod_events.emitter()`` is in ``watch_placements`` and in each web process: the writer made lazily."""
    settings.SCHEDLENS_POD_EVENTS = True
    writer = KubernetesEventWriter(api_client_for(api), timeout_seconds=2.0)
    factory = SlowFactory(writer)
    new = pod_events.PodEventEmitter(factory=factory, burst_seconds=0)
    previous = pod_events.install(new)
    yield new, factory
    factory.release.set()
    new.join(WAIT)
    pod_events.install(previous)
    writer.close()


def pending_pods(api: FakeKubeAPI, *names: str) -> dict[str, list]:
    """Pods pending in the API and kube-scheduler's calls of their cycles (filter, prioritize), by name."""
    scheduler = Scheduler(api)
    calls = {}
    for name in names:
        uid = f"uid-{name}"
        api.add_pod(name, "shop", uid=uid, scheduler_name=OURS)
        calls[name] = scheduler.events(at=timezone.now(), name=name, uid=uid, bind=False)
    return calls


def dropped(reason: str) -> float:
    return REGISTRY.get_sample_value("schedlens_pod_events_dropped_total", {"reason": reason}) or 0.0


def test_the_watcher_claims_an_event_while_the_emitter_is_still_finding_the_api(api, slow_emitter, pump) -> None:
    """Four pods bound at once on a real cluster, three Events: the second claim came while the emitter's thread was
    still making its writer for the first, and ``unavailable`` said "no API" then."""
    emitter, factory = slow_emitter
    calls = pending_pods(api, "web-1", "web-2")
    cycles_ingest_events(events=[*calls["web-1"], *calls["web-2"]])  # both cycles complete: the watcher explains

    kube_scheduler_binds(api, pump, name="web-1")  # the process's first Event: its thread starts making the writer
    assert factory.entered.wait(WAIT)
    kube_scheduler_binds(api, pump, name="web-2")  # claimed meanwhile
    factory.release.set()
    settle(pump, emitter)

    assert all(o.explained_at is not None for o in PlacementObservation.objects.filter(kind="bound"))
    assert len(explained(api, "uid-web-1")) == 1
    assert len(explained(api, "uid-web-2")) == 1, "claimed by the watcher, so queued and written"


def test_the_ingester_claims_an_event_while_the_emitter_is_still_finding_the_api(api, slow_emitter, pump) -> None:
    emitter, factory = slow_emitter
    calls = pending_pods(api, "web-1", "web-2")
    filtered, scored = calls["web-2"]
    cycles_ingest_events(events=[*calls["web-1"], filtered])
    kube_scheduler_binds(api, pump, name="web-2")  # its prioritize call is not in yet: nobody claims
    pump.drain()

    kube_scheduler_binds(api, pump, name="web-1")  # the process's first Event: its thread starts making the writer
    assert factory.entered.wait(WAIT)
    cycles_ingest_events(events=[scored])  # the ingester completes web-2's cycle and claims its Event meanwhile
    factory.release.set()
    settle(pump, emitter)

    assert len(explained(api, "uid-web-1")) == 1
    assert len(explained(api, "uid-web-2")) == 1, "claimed by the ingester, so queued and written"


def test_a_claimed_event_that_cannot_be_written_is_counted_as_dropped(api, settings, pump) -> None:
    """No API to write to (the factory found no configuration): each claimed Event is counted, none skipped silently."""
    settings.SCHEDLENS_POD_EVENTS = True
    factory = SlowFactory(None)
    factory.release.set()
    new = pod_events.PodEventEmitter(factory=factory, burst_seconds=0)
    previous = pod_events.install(new)
    try:
        calls = pending_pods(api, "web-1", "web-2", "web-3")
        filtered, scored = calls["web-3"]
        cycles_ingest_events(events=[*calls["web-1"], *calls["web-2"], filtered])
        before = dropped("unconfigured")
        kube_scheduler_binds(api, pump, name="web-1")  # the writer is looked for, and not found
        settle(pump, new)
        assert new.unavailable
        kube_scheduler_binds(api, pump, name="web-2")  # the watcher claims with no API known
        kube_scheduler_binds(api, pump, name="web-3")
        cycles_ingest_events(events=[scored])  # the ingester claims with no API known
        settle(pump, new)
    finally:
        pod_events.install(previous)

    assert all(o.explained_at is not None for o in PlacementObservation.objects.filter(kind="bound"))
    assert dropped("unconfigured") == before + 3
    assert api.created_events == []


def test_a_cycle_without_its_pod_or_node_is_counted_as_dropped(settings) -> None:
    settings.SCHEDLENS_POD_EVENTS = True
    new = pod_events.PodEventEmitter(factory=lambda: None)
    previous = pod_events.install(new)
    try:
        before = dropped("no_node")
        cycle = SchedulingCycle(pod_namespace="shop", pod_name="web-1", pod_uid="uid-1", chosen_node="")
        pod_events.explained_bind(cycle=cycle, records=CycleRecords())
    finally:
        pod_events.install(previous)
    assert dropped("no_node") == before + 1
