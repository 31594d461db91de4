"""PostgreSQL keeps the record in day partitions: created ahead, and retention drops a day whole, behind a checkpoint
from which the audit chain still verifies, taking off the per-node counts exactly what the day had added
(``dashboard.services.partitions``).

The calls' partition key is when the ingester stored them, by the database's clock: these tests set that clock
(``chain._database_now``, read once per ingest under the chain lock) to the day a call would have been stored on,
as the server's clock cannot be set back."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.utils import timezone

from dashboard.audit import chain
from dashboard.audit.chain import audit_chain_verify
from dashboard.filters import cycles_considering
from dashboard.ingest.cycles import cycles_ingest_events
from dashboard.models import (
    AuditCheckpoint,
    NodeDayReasonTally,
    NodeDayTally,
    NodeReasonTally,
    NodeTally,
    SchedulingCycle,
    VerbCall,
)
from dashboard.services import partitions, retention
from dashboard.services.node_tallies import node_tallies_rebuild
from dashboard.services.partitions import DAYS_AHEAD, day_partitions, partitions_ensure
from dashboard.services.retention import AuditChainBrokenError, cycles_prune
from scheduler_core.extender.record.structs import VerbEvent
from tests.support.kube_scheduler import NODES

pytestmark = pytest.mark.django_db

TODAY = timezone.now().astimezone(UTC).date()
OLD_DAY = TODAY - timedelta(days=40)
NEXT_OLD_DAY = OLD_DAY + timedelta(days=1)
CUT = timezone.now() - timedelta(days=30)


def _noon(day) -> datetime:  # type: ignore[no-untyped-def]
    return datetime(day.year, day.month, day.day, 12, tzinfo=UTC)


def _events(uid: str, at: datetime) -> list[VerbEvent]:
    common = {"profile": "default", "duration_ms": 1.0, "http_status": 200, "pod_namespace": "ns", "pod_name": uid}
    return [
        VerbEvent(event_id=f"{uid}-f", verb="filter", started_at=at.timestamp(), pod_uid=uid, **common),
        VerbEvent(event_id=f"{uid}-b", verb="bind", started_at=at.timestamp() + 0.01, pod_uid=uid, **common),
    ]


@pytest.fixture
def stored_at(monkeypatch):  # type: ignore[no-untyped-def]
    """``stored_at(t)``: the calls ingested from now on are stored at ``t`` by the database's clock."""

    def set_clock(at: datetime) -> None:
        monkeypatch.setattr(chain, "_database_now", lambda: at)

    return set_clock


def _node_rows() -> dict[str, tuple[int, int, int, int]]:
    return {t.node: (t.considered, t.filtered_out, t.placements, t.preferred) for t in NodeTally.objects.all()}


def _reason_rows() -> dict[tuple[str, str, str], int]:
    return {(r.node, r.plugin, r.reason): r.count for r in NodeReasonTally.objects.all()}


def _tables() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT tablename FROM pg_tables WHERE tablename LIKE 'dashboard\\_%%\\_p%%'")
        return {row[0] for row in cursor.fetchall()}


def _partition_of(model: type[SchedulingCycle] | type[VerbCall], pk: int) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT tableoid::regclass::text FROM {model._meta.db_table} WHERE id = %s", [pk])  # noqa: S608
        return str(cursor.fetchone()[0])


def _record_two_old_days_and_today(stored_at, kube_scheduler=None) -> None:  # type: ignore[no-untyped-def]
    """Cycles "a" and "b" on two days past the retention, "c" today; with ``kube_scheduler``, through the real verbs
    (filters listing and failing nodes, binds), else bare calls."""
    partitions_ensure(today=OLD_DAY, days_ahead=1)
    partitions_ensure(today=TODAY)
    for uid, at in [("a", _noon(OLD_DAY)), ("b", _noon(NEXT_OLD_DAY)), ("c", timezone.now() - timedelta(hours=1))]:
        stored_at(at + timedelta(seconds=1))
        if kube_scheduler is None:
            cycles_ingest_events(events=_events(uid, at))
        else:
            kube_scheduler.schedule(at=at, name=uid, nodes=[*NODES, "node-6"])


def test_migrate_made_today_and_the_days_ahead_and_ensure_makes_the_missing_ones_once():
    # The test database was migrated: today's partitions and the next ones exist already (apps.py, post_migrate).
    for model in (SchedulingCycle, VerbCall):
        assert {TODAY + timedelta(days=n) for n in range(DAYS_AHEAD + 1)} <= {p.day for p in day_partitions(model)}
    assert partitions.posting_ranges()
    later = TODAY + timedelta(days=10)

    created = partitions_ensure(today=later, days_ahead=2)

    expected = {
        f"{table}_p{later + timedelta(days=offset):%Y%m%d}"
        for table in ("dashboard_schedulingcycle", "dashboard_verbcall")
        for offset in range(3)
    }
    assert set(created) == expected
    assert partitions_ensure(today=later, days_ahead=2) == []
    cycles_ingest_events(events=_events("now", timezone.now()))
    cycle = SchedulingCycle.objects.get(pod_uid="now")
    assert _partition_of(SchedulingCycle, cycle.pk) == f"dashboard_schedulingcycle_p{cycle.started_at:%Y%m%d}"
    call = VerbCall.objects.filter(cycle=cycle).first()
    assert call is not None
    assert _partition_of(VerbCall, call.pk) == f"dashboard_verbcall_p{call.recorded_at.astimezone(UTC):%Y%m%d}"


def test_a_day_whose_rows_are_in_default_gets_no_partition_and_keeps_them():
    cycles_ingest_events(events=_events("early", _noon(TODAY + timedelta(days=5))))  # stamped ahead: DEFAULT

    created = partitions_ensure(today=TODAY + timedelta(days=5), days_ahead=0)

    assert not any("schedulingcycle" in name for name in created)
    cycle = SchedulingCycle.objects.get(pod_uid="early")
    assert _partition_of(SchedulingCycle, cycle.pk) == "dashboard_schedulingcycle_default"


def test_retention_drops_whole_days_and_the_chain_verifies_from_the_checkpoint(stored_at):
    _record_two_old_days_and_today(stored_at)
    last_dropped = VerbCall.objects.filter(cycle__pod_uid="b").order_by("-id").first()
    assert last_dropped is not None

    result = cycles_prune(older_than=CUT)

    assert set(result.partitions_dropped) == {
        f"{table}_p{day:%Y%m%d}"
        for table in ("dashboard_schedulingcycle", "dashboard_verbcall")
        for day in (OLD_DAY, NEXT_OLD_DAY)
    }
    assert not {name for name in _tables() if OLD_DAY.strftime("%Y%m%d") in name}
    assert list(SchedulingCycle.objects.values_list("pod_uid", flat=True)) == ["c"]
    assert (result.cycles_deleted, result.calls_deleted) == (2, 4)
    # One checkpoint a day dropped, the newest at the last call dropped.
    assert AuditCheckpoint.objects.count() == 2
    checkpoint = AuditCheckpoint.objects.order_by("-last_call_id").first()
    assert checkpoint is not None
    assert (checkpoint.last_call_id, checkpoint.chain_hash) == (last_dropped.pk, last_dropped.chain_hash)
    report = audit_chain_verify()
    assert report.ok, report.reason
    assert (report.start_after_id, report.checked) == (last_dropped.pk, 2)


def test_a_day_that_does_not_verify_is_not_dropped(stored_at):
    _record_two_old_days_and_today(stored_at)
    VerbCall.objects.filter(event_id="b-f").update(duration_ms=99.0)  # evidence altered after the fact

    with pytest.raises(AuditChainBrokenError):
        cycles_prune(older_than=CUT)

    assert SchedulingCycle.objects.count() == 3
    assert {f"dashboard_verbcall_p{day:%Y%m%d}" for day in (OLD_DAY, NEXT_OLD_DAY)} <= _tables()
    assert not AuditCheckpoint.objects.exists()


def test_older_calls_left_in_default_are_pruned_row_by_row_before_a_day_is_dropped(stored_at):
    # A cycle stored before the partitions existed (migration 0008 attaches the old table as DEFAULT): its calls
    # come first in the chain, so no later day can go before them.
    stored_at(_noon(OLD_DAY - timedelta(days=3)))
    cycles_ingest_events(events=_events("legacy", _noon(OLD_DAY - timedelta(days=3))))
    _record_two_old_days_and_today(stored_at)

    first = cycles_prune(older_than=CUT)

    assert first.partitions_dropped == ()
    assert first.partitions_held_back.startswith(f"dashboard_verbcall_p{OLD_DAY:%Y%m%d}")
    assert sorted(SchedulingCycle.objects.values_list("pod_uid", flat=True)) == ["a", "b", "c"]
    assert audit_chain_verify().ok

    second = cycles_prune(older_than=CUT)

    assert len(second.partitions_dropped) == 4
    assert list(SchedulingCycle.objects.values_list("pod_uid", flat=True)) == ["c"]
    report = audit_chain_verify()
    assert report.ok, report.reason
    assert all(p.end > CUT for p in day_partitions(VerbCall) + day_partitions(SchedulingCycle))


def _day_rows() -> dict[tuple[object, str], tuple[int, int]]:
    return {(t.day, t.node): (t.considered, t.filtered_out) for t in NodeDayTally.objects.all()}


def test_the_per_node_counts_lose_exactly_what_the_dropped_days_had_added(stored_at, kube_scheduler):
    partitions_ensure(today=OLD_DAY, days_ahead=1)
    for name, at, stored in [
        ("a", _noon(OLD_DAY), _noon(OLD_DAY)),
        ("b", _noon(NEXT_OLD_DAY), _noon(NEXT_OLD_DAY)),
        # A late spool: a cycle of long ago stored today, pruned row by row (its day of calls is not past the cut).
        ("late", _noon(OLD_DAY - timedelta(days=1)), timezone.now() - timedelta(minutes=2)),
        ("c", timezone.now() - timedelta(hours=1), timezone.now() - timedelta(minutes=1)),
    ]:
        stored_at(stored)
        kube_scheduler.schedule(at=at, name=name, nodes=[*NODES, "node-6"])
    assert NodeDayTally.objects.filter(day=OLD_DAY).exists()
    assert NodeDayReasonTally.objects.filter(day=OLD_DAY).exists()

    result = cycles_prune(older_than=CUT)

    assert len(result.partitions_dropped) == 4
    assert list(SchedulingCycle.objects.values_list("pod_name", flat=True)) == ["c"]
    kept = (_node_rows(), _reason_rows(), _day_rows())
    assert kept[0], "today's cycle still counts"
    node_tallies_rebuild()  # an independent recount from the retained record
    assert (_node_rows(), _reason_rows(), _day_rows()) == kept
    assert not NodeDayTally.objects.filter(day__lt=TODAY).exists()


def test_postings_go_by_range_once_no_retained_cycle_has_a_slot_in_it(stored_at, kube_scheduler, monkeypatch):
    monkeypatch.setattr(partitions, "POSTING_BLOCKS", 1)  # ranges of one block (256 slots), to fill one here
    sequence = "pg_get_serial_sequence('dashboard_schedulingcycle', 'id')"
    with connection.cursor() as cursor:
        for made in partitions.posting_ranges():  # migrate's ranges, empty (undone with the test's transaction)
            cursor.execute(f"DROP TABLE {made.table}")
        cursor.execute(f"SELECT setval({sequence}, 100 * 256)")  # the next cycles take slots of block 100
    partitions_ensure(today=OLD_DAY, days_ahead=0)
    stored_at(_noon(OLD_DAY))
    old = kube_scheduler.schedule(at=_noon(OLD_DAY), name="old", nodes=NODES)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT setval({sequence}, 101 * 256)")  # block 101 for the next
    partitions_ensure(today=TODAY, days_ahead=0)
    stored_at(timezone.now())
    new = kube_scheduler.schedule(at=timezone.now(), name="new", nodes=NODES)
    assert (old.candidate_slot // 256, new.candidate_slot // 256) == (100, 101)
    assert {r.start for r in partitions.posting_ranges()} >= {100, 101}

    result = cycles_prune(older_than=CUT)

    assert "dashboard_nodeposting_b100" in result.partitions_dropped
    assert {r.start for r in partitions.posting_ranges()} >= {101}
    considering = cycles_considering(SchedulingCycle.objects.all(), "node-1")
    assert list(considering.values_list("pod_name", flat=True)) == ["new"]


def test_the_days_to_drop_are_verified_before_the_chain_lock_is_taken(stored_at, monkeypatch):
    # Ingest waits on the chain lock: it should wait for the drop, not for reading a day of calls.
    _record_two_old_days_and_today(stored_at)
    steps: list[str] = []
    walk, lock = partitions.chain_walk, retention.lock_chain
    monkeypatch.setattr(partitions, "chain_walk", lambda *a, **kw: (steps.append("walk"), walk(*a, **kw))[1])
    monkeypatch.setattr(retention, "lock_chain", lambda: (steps.append("lock"), lock())[1])

    result = cycles_prune(older_than=CUT)

    assert len(result.partitions_dropped) == 4
    assert steps == ["walk", "walk", "lock"]
    assert audit_chain_verify().ok


def test_a_day_whose_last_link_changed_after_its_verification_is_not_dropped(stored_at, monkeypatch):
    _record_two_old_days_and_today(stored_at)
    verify = partitions.days_verify

    def verify_then_alter(**kwargs):  # type: ignore[no-untyped-def]
        verified = verify(**kwargs)
        VerbCall.objects.filter(event_id="b-b").update(chain_hash="0" * 64)  # rewritten before the lock
        return verified

    monkeypatch.setattr(retention, "days_verify", verify_then_alter)

    with pytest.raises(AuditChainBrokenError):
        cycles_prune(older_than=CUT)

    assert SchedulingCycle.objects.count() == 3
    assert not AuditCheckpoint.objects.exists()


def test_placement_observations_older_than_the_cut_off_go_with_their_cycles(stored_at):
    from dashboard.placements.models import ObservationKind, PlacementObservation
    from dashboard.placements.services import placements_record

    _record_two_old_days_and_today(stored_at)
    for uid in ("a", "b", "c"):
        cycle = SchedulingCycle.objects.get(pod_uid=uid)
        placements_record(
            key=f"bound:{uid}",
            kind=ObservationKind.BOUND,
            pod_uid=uid,
            pod_namespace="ns",
            pod_name=uid,
            node="node-1",
            occurred_at=(cycle.started_at + timedelta(seconds=1)).timestamp(),
        )

    result = cycles_prune(older_than=CUT)

    assert result.observations_deleted == 2
    kept = PlacementObservation.objects.get()
    assert (kept.pod_uid, kept.cycle_id) == ("c", SchedulingCycle.objects.get(pod_uid="c").pk)
