"""Placement observations land on the matching cycle; the command records them from the API's pods and events."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from dashboard.models import Outcome, SchedulingCycle
from dashboard.placements.models import ObservationKind, PlacementObservation, WaitingPod
from dashboard.placements.pump import PlacementPump
from dashboard.placements.services import placements_reconcile, placements_record, placements_record_all
from scheduler_core.kube.placement_watch import PlacementWatcher
from tests.support.fake_kube_api import FakeKubeAPI, api_client_for, failed_scheduling_event, write_kubeconfig

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 5, 1, 10, 0, 0, tzinfo=UTC)
OURS = "schedlens-scheduler"


def cycle(uid: str, started: datetime, *, outcome: str = Outcome.PENDING, chosen: str = "") -> SchedulingCycle:
    return SchedulingCycle.objects.create(
        pod_namespace="shop",
        pod_name="web-1",
        pod_uid=uid,
        profile="default",
        started_at=started,
        finished_at=started + timedelta(milliseconds=3),
        outcome=outcome,
        chosen_node=chosen,
    )


def bound(uid: str, node: str, at: datetime) -> PlacementObservation:
    return placements_record(
        key=f"bound:{uid}:{node}",
        kind=ObservationKind.BOUND,
        pod_uid=uid,
        pod_namespace="shop",
        pod_name="web-1",
        node=node,
        occurred_at=at.timestamp(),
    )


def refresh(c: SchedulingCycle) -> SchedulingCycle:
    c.refresh_from_db()
    return c


def test_a_binding_by_kube_scheduler_gives_the_cycle_its_chosen_node_and_outcome() -> None:
    older = cycle("uid-1", NOW - timedelta(seconds=40), outcome=Outcome.UNSCHEDULABLE)
    newest = cycle("uid-1", NOW - timedelta(seconds=2))
    cycle("uid-1", NOW + timedelta(seconds=30))  # a later attempt cannot be the one that bound it

    observation = bound("uid-1", "node-7", NOW)

    assert observation.cycle == newest
    assert refresh(newest).chosen_node == "node-7"
    assert newest.outcome == Outcome.BOUND
    assert refresh(older).chosen_node == ""


def test_one_second_api_timestamps_still_find_the_cycle_that_started_a_fraction_later() -> None:
    c = cycle("uid-1", NOW + timedelta(milliseconds=700))

    assert bound("uid-1", "node-7", NOW).cycle == c  # lastTransitionTime is truncated to the second


def test_a_cycle_schedlens_bound_itself_keeps_its_record() -> None:
    c = cycle("uid-1", NOW - timedelta(seconds=1), outcome=Outcome.BOUND, chosen="node-3")

    observation = bound("uid-1", "node-3", NOW)

    assert observation.cycle == c
    assert refresh(c).chosen_node == "node-3"


def test_recording_the_same_fact_twice_keeps_one_observation() -> None:
    cycle("uid-1", NOW - timedelta(seconds=1))

    bound("uid-1", "node-7", NOW)
    bound("uid-1", "node-7", NOW + timedelta(seconds=5))

    assert PlacementObservation.objects.count() == 1


def test_an_observation_that_arrives_before_its_cycle_is_linked_by_the_reconcile() -> None:
    observation = bound("uid-1", "node-7", NOW)
    assert observation.cycle is None

    c = cycle("uid-1", NOW - timedelta(seconds=1))  # the replica's spool reached the database late
    assert placements_reconcile(now=NOW) == 2

    observation.refresh_from_db()
    assert observation.cycle == c
    assert refresh(c).chosen_node == "node-7"
    assert c.outcome == Outcome.BOUND


def test_the_reconcile_restores_the_outcome_after_the_ingester_re_derived_the_cycle() -> None:
    c = cycle("uid-1", NOW - timedelta(seconds=1))
    bound("uid-1", "node-7", NOW)
    SchedulingCycle.objects.filter(pk=c.pk).update(chosen_node="", outcome=Outcome.PENDING)  # a late call folded in

    placements_reconcile(now=NOW)

    assert refresh(c).chosen_node == "node-7"
    assert c.outcome == Outcome.BOUND


def test_the_reconcile_reads_the_observations_their_cycles_already_say_no_further() -> None:
    # kube-scheduler binds hundreds of pods a minute: every reconcile re-applying each of the window's settled
    # observations made the watcher's work per pod grow with the rate.
    for i in range(20):
        cycle(f"uid-{i}", NOW - timedelta(seconds=1))
        bound(f"uid-{i}", "node-7", NOW)
    bound("uid-late", "node-8", NOW)  # its cycle has not reached the database yet

    with CaptureQueriesContext(connection) as queries:
        assert placements_reconcile(now=NOW) == 0

    assert len(queries) <= 3, [q["sql"] for q in queries]


def test_a_backlog_of_binds_is_recorded_together_each_on_its_cycle() -> None:
    from scheduler_core.kube.placement_watch import Observation

    cycles = [cycle(f"uid-{i}", NOW - timedelta(seconds=1)) for i in range(20)]
    observations = [
        Observation("bound", f"bound:uid-{i}:n{i}", f"uid-{i}", "shop", f"web-{i}", NOW.timestamp(), node=f"n{i}")
        for i in range(20)
    ]
    WaitingPod.objects.create(pod_uid="uid-3", pod_namespace="shop", pod_name="web-3", waiting_since=NOW, seen_at=NOW)

    with CaptureQueriesContext(connection) as queries:
        recorded = placements_record_all([*observations, observations[5]])  # a relist sees one again

    assert [r.key for r in recorded] == [o.key for o in [*observations, observations[5]]]
    assert [refresh(c).chosen_node for c in cycles] == [f"n{i}" for i in range(20)]
    assert PlacementObservation.objects.count() == 20
    assert not WaitingPod.objects.exists()
    sql = [q["sql"] for q in queries]
    assert len([q for q in sql if q.startswith('INSERT INTO "placements_placementobservation"')]) == 1, "one insert"
    assert len([q for q in sql if q.startswith('DELETE FROM "placements_waitingpod"')]) == 1, "one delete"


def test_a_binding_is_not_pinned_on_an_attempt_that_failed() -> None:
    failed = cycle("uid-1", NOW - timedelta(seconds=3), outcome=Outcome.UNSCHEDULABLE)

    observation = bound("uid-1", "node-7", NOW)

    assert observation.cycle is None, "the attempt that bound it is not in the database yet"
    assert refresh(failed).outcome == Outcome.UNSCHEDULABLE


def test_a_cycle_too_old_is_another_attempt() -> None:
    cycle("uid-1", NOW - timedelta(minutes=30))

    assert bound("uid-1", "node-7", NOW).cycle is None


def test_a_failed_scheduling_event_lands_on_the_attempt_it_reports_and_marks_it_unschedulable() -> None:
    first = cycle("uid-1", NOW - timedelta(seconds=60))
    second = cycle("uid-1", NOW - timedelta(seconds=5))
    message = "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't match Pod's node affinity/selector."

    observation = placements_record(
        key="event:e-1:1",
        kind=ObservationKind.FAILED_SCHEDULING,
        pod_uid="uid-1",
        pod_namespace="shop",
        pod_name="web-1",
        reason="FailedScheduling",
        message=message,
        occurred_at=(NOW - timedelta(seconds=30)).timestamp(),
    )

    assert observation.cycle == first
    assert observation.message == message
    assert refresh(first).outcome == Outcome.UNSCHEDULABLE
    assert refresh(second).outcome == Outcome.PENDING
    assert list(first.placement_observations.all()) == [observation]


# ----- through the API (fake server, real client) -----


@pytest.fixture
def api() -> Iterator[FakeKubeAPI]:
    with FakeKubeAPI() as server:
        yield server


def test_the_command_records_bindings_and_failures_found_in_the_api(api: FakeKubeAPI, tmp_path: Path) -> None:
    now = datetime.now(tz=UTC)
    bound_pod = api.add_pod("web-1", namespace="shop", uid="uid-b", scheduler_name=OURS)
    stuck = api.add_pod("gpu-1", namespace="shop", uid="uid-s", scheduler_name=OURS)
    api.add_pod("other", namespace="shop", uid="uid-o", node_name="node-2")  # default-scheduler: not ours
    c_bound = cycle("uid-b", now - timedelta(seconds=3))
    c_stuck = cycle("uid-s", now - timedelta(seconds=3))
    api.set_pod_node("web-1", "node-4", namespace="shop")
    api.put_event(failed_scheduling_event(stuck, "0/4 nodes are available: 4 TrafficThreshold: too busy."))
    kubeconfig = write_kubeconfig(api, tmp_path / "kubeconfig")

    call_command("watch_placements", "--once", "--kubeconfig", str(kubeconfig))

    assert refresh(c_bound).chosen_node == "node-4"
    assert c_bound.outcome == Outcome.BOUND
    assert refresh(c_stuck).outcome == Outcome.UNSCHEDULABLE
    kinds = set(PlacementObservation.objects.values_list("pod_uid", "kind"))
    assert kinds == {("uid-b", "bound"), ("uid-s", "failed_scheduling")}
    assert bound_pod["metadata"]["uid"] == "uid-b"


def test_the_running_watcher_records_a_binding_as_it_happens(api: FakeKubeAPI) -> None:
    api.add_pod("web-1", namespace="shop", uid="uid-1", scheduler_name=OURS)
    c = cycle("uid-1", datetime.now(tz=UTC) - timedelta(seconds=1))
    pump = PlacementPump(reconcile_interval=0.2)
    watcher = PlacementWatcher.from_api_client(api_client_for(api), scheduler_names=[OURS], sink=pump.put).start()
    try:
        assert watcher.wait_synced(10)
        api.set_pod_node("web-1", "node-9", namespace="shop")

        assert pump.run_until(lambda: refresh(c).chosen_node == "node-9", timeout=10)
    finally:
        watcher.stop()
    assert c.outcome == Outcome.BOUND


@pytest.mark.django_db(transaction=True)  # the pump closes a broken connection, which a test transaction forbids
def test_the_pump_keeps_observations_while_the_database_is_down(monkeypatch: pytest.MonkeyPatch) -> None:
    from django.db import OperationalError

    from dashboard.placements import pump as pump_module
    from scheduler_core.kube.placement_watch import Observation

    calls: list[list[str]] = []
    real = pump_module.placements_record_all

    def flaky(observations: list[Observation]) -> list[PlacementObservation]:
        calls.append([o.key for o in observations])
        if len(calls) == 1:
            raise OperationalError("connection refused")
        return real(observations)

    monkeypatch.setattr(pump_module, "placements_record_all", flaky)
    pump = PlacementPump(reconcile_interval=60, retry_interval=0)
    pump.put(Observation("bound", "bound:uid-1:node-1", "uid-1", "shop", "web-1", time.time(), node="node-1"))

    pump.step(timeout=0)
    assert pump.pending == 1
    assert pump.failures == 1
    pump.step(timeout=0)

    assert calls == [["bound:uid-1:node-1"], ["bound:uid-1:node-1"]]
    assert pump.pending == 0
    assert PlacementObservation.objects.filter(key="bound:uid-1:node-1").exists()


@pytest.mark.django_db(transaction=True)  # the pump closes a broken connection, which a test transaction forbids
def test_an_observation_the_database_keeps_refusing_holds_up_no_other(monkeypatch: pytest.MonkeyPatch) -> None:
    from django.db import DataError

    from dashboard.placements import pump as pump_module
    from scheduler_core.kube.placement_watch import Observation

    real = pump_module.placements_record_all

    def refusing(observations: list[Observation]) -> list[PlacementObservation]:
        if any(o.key == "bound:uid-bad:node-1" for o in observations):
            raise DataError("value too long")
        return real(observations)

    monkeypatch.setattr(pump_module, "placements_record_all", refusing)
    pump = PlacementPump(reconcile_interval=60, retry_interval=0)
    for uid in ("uid-bad", "uid-1", "uid-2"):  # queued together: recorded, and refused, together
        pump.put(Observation("bound", f"bound:{uid}:node-1", uid, "shop", "web", time.time(), node="node-1"))

    for _ in range(4):
        pump.step(timeout=0)

    assert set(PlacementObservation.objects.values_list("pod_uid", flat=True)) == {"uid-1", "uid-2"}
    assert pump.pending == 1, "the refused one is still kept"
