"""Tamper evidence: the hash chain over recorded calls, its verification, and pruning that keeps it verifiable."""

from __future__ import annotations

import hashlib
import io
import threading
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db import connection, connections

from dashboard.audit.chain import (
    CONTENT_FIELDS,
    GENESIS,
    _canonical,
    audit_chain_verify,
    call_content,
    chain_link,
)
from dashboard.ingest.cycles import cycles_ingest_events
from dashboard.models import AuditCheckpoint, NodeTally, SchedulingCycle, VerbCall
from dashboard.services.retention import AuditChainBrokenError, cycles_prune
from dashboard.storage.packed_json import PackedDict, stored_form
from tests.support.kube_scheduler import T0

MINUTE = timedelta(minutes=1)
DAY = timedelta(days=1)
# Reads through the audit API or its explanations: its profiles and throttle counters at zero, as tests/dashboard/api/.
pytestmark = pytest.mark.usefixtures("api_settings")


def execute(sql: str, params: list | None = None) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params or [])


@pytest.fixture
def history(kube_scheduler) -> list[SchedulingCycle]:
    return [kube_scheduler.schedule(at=T0 + i * MINUTE, name=f"web-{i}") for i in range(4)]


def nth_call(n: int) -> VerbCall:
    return VerbCall.objects.order_by("id")[n]


@pytest.mark.django_db
def test_every_call_is_linked_to_the_one_before_it(history):
    previous = GENESIS
    calls = list(VerbCall.objects.order_by("id").values())
    assert len(calls) == 12
    for call in calls:
        assert call["chain_hash"] == chain_link(previous, call_content(call))
        previous = call["chain_hash"]
    report = audit_chain_verify()
    assert (report.ok, report.checked, report.head_id, report.head_hash) == (True, 12, calls[-1]["id"], previous)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("column", "sql_value"),
    [
        ("record", """'{"nodes": ["node-2"], "passed": ["node-2"]}'"""),
        ("response", """'{"NodeNames": ["node-1"]}'"""),
        ("duration_ms", "0.001"),
        ("http_status", "500"),
        ("error", "'forged'"),
        ("started_at", "started_at + interval '1 microsecond'"),
        ("chain_hash", "repeat('a', 64)"),
    ],
)
def test_altering_one_stored_call_is_detected_at_exactly_that_call(history, column, sql_value):
    if connection.vendor != "postgresql" and "interval" in sql_value:
        pytest.skip("PostgreSQL syntax")
    victim = nth_call(4)
    value = sql_value if column != "record" or connection.vendor != "postgresql" else sql_value + "::jsonb"
    if column == "response" and connection.vendor == "postgresql":
        value += "::jsonb"
    execute(f"UPDATE dashboard_verbcall SET {column} = {value} WHERE id = %s", [victim.id])  # noqa: S608

    report = audit_chain_verify()
    assert not report.ok
    assert report.first_broken_id == victim.id
    assert f"call {victim.id}" in report.reason


@pytest.mark.django_db
def test_moving_a_call_to_another_cycle_is_detected(history):
    victim = nth_call(4)
    execute("UPDATE dashboard_verbcall SET cycle_id = %s WHERE id = %s", [history[0].id, victim.id])
    assert audit_chain_verify().first_broken_id == victim.id


@pytest.mark.django_db
def test_deleting_a_call_is_detected_at_the_call_after_it(history):
    deleted, after = nth_call(5), nth_call(6)
    execute("DELETE FROM dashboard_verbcall WHERE id = %s", [deleted.id])
    assert audit_chain_verify().first_broken_id == after.id


@pytest.mark.django_db
def test_the_verify_endpoint_reports_the_first_broken_link(api, history):
    assert api.get("/api/v1/audit/verify").json()["ok"] is True
    victim = nth_call(7)
    execute("UPDATE dashboard_verbcall SET server = 'elsewhere:1' WHERE id = %s", [victim.id])
    body = api.get("/api/v1/audit/verify").json()
    assert (body["ok"], body["first_broken_id"], body["checked"]) == (False, victim.id, 8)


@pytest.mark.django_db
def test_the_verify_endpoint_can_start_after_a_given_call(api, history):
    execute("UPDATE dashboard_verbcall SET server = 'elsewhere:1' WHERE id = %s", [nth_call(1).id])
    body = api.get("/api/v1/audit/verify", {"after_id": nth_call(2).id}).json()
    assert (body["ok"], body["checked"], body["start_after_id"]) == (True, 9, nth_call(2).id)
    assert api.get("/api/v1/audit/verify", {"after_id": 10**12}).status_code == 404
    assert api.get("/api/v1/audit/verify", {"after_id": "x"}).json()["field"] == "after_id"


@pytest.mark.django_db
def test_verify_audit_chain_exits_non_zero_naming_the_broken_call(history):
    out = io.StringIO()
    call_command("verify_audit_chain", stdout=out)
    assert out.getvalue().startswith("ok: 12 calls verified from the start")
    victim = nth_call(3)
    execute("UPDATE dashboard_verbcall SET verb = 'bind' WHERE id = %s", [victim.id])
    with pytest.raises(CommandError, match=f"BROKEN at call {victim.id}"):
        call_command("verify_audit_chain", stdout=io.StringIO())


# --- retention --------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_pruning_deletes_old_cycles_and_leaves_a_checkpoint_the_chain_resumes_from(history, kube_scheduler):
    last_old_call = VerbCall.objects.filter(cycle=history[1]).order_by("id").last()
    result = cycles_prune(older_than=T0 + 2 * MINUTE)

    assert (result.cycles_deleted, result.calls_deleted, result.held_back) == (2, 6, 0)
    assert set(SchedulingCycle.objects.all()) == set(history[2:])
    checkpoint = AuditCheckpoint.objects.get()
    assert (checkpoint.last_call_id, checkpoint.chain_hash) == (last_old_call.id, last_old_call.chain_hash)
    report = audit_chain_verify()
    assert (report.ok, report.checked, report.start_after_id) == (True, 6, last_old_call.id)

    kube_scheduler.schedule(at=T0 + 10 * MINUTE, name="web-new")  # the chain goes on from where it was
    assert audit_chain_verify().ok
    victim = nth_call(2)
    execute("UPDATE dashboard_verbcall SET error = 'x' WHERE id = %s", [victim.id])
    assert audit_chain_verify().first_broken_id == victim.id


@pytest.mark.django_db
def test_pruning_everything_still_chains_the_next_call_to_the_checkpoint(history, kube_scheduler):
    cycles_prune(older_than=T0 + DAY)
    assert not VerbCall.objects.exists()
    kube_scheduler.schedule(at=T0 + 2 * DAY, name="web-new")
    report = audit_chain_verify()
    assert (report.ok, report.checked) == (True, 3)


@pytest.mark.django_db
def test_pruning_twice_verifies_from_the_newest_checkpoint(history):
    cycles_prune(older_than=T0 + MINUTE)
    cycles_prune(older_than=T0 + 3 * MINUTE)
    assert AuditCheckpoint.objects.count() == 2
    assert audit_chain_verify().checked == 3


@pytest.mark.django_db
def test_pruning_refuses_to_delete_a_broken_stretch_of_the_chain(history):
    victim = nth_call(1)
    execute("UPDATE dashboard_verbcall SET duration_ms = 0 WHERE id = %s", [victim.id])
    with pytest.raises(AuditChainBrokenError) as broken:
        cycles_prune(older_than=T0 + 2 * MINUTE)
    assert broken.value.report.first_broken_id == victim.id
    assert SchedulingCycle.objects.count() == 4, "nothing deleted: the evidence stays"
    assert not AuditCheckpoint.objects.exists()


@pytest.mark.django_db
def test_an_old_cycle_with_a_call_chained_after_newer_ones_is_held_back(kube_scheduler):
    old = kube_scheduler.events(at=T0, name="slow-bind")
    filter_and_prioritize, late_bind = old[:2], old[2:]
    cycles_ingest_events(events=filter_and_prioritize)
    newer = kube_scheduler.schedule(at=T0 + 2 * DAY, name="web-new")
    cycles_ingest_events(events=late_bind)  # its spool lagged: chained after the newer cycle's calls

    result = cycles_prune(older_than=T0 + DAY)
    assert (result.cycles_deleted, result.calls_deleted, result.held_back) == (0, 0, 1)
    assert SchedulingCycle.objects.count() == 2
    assert audit_chain_verify().ok
    assert newer.calls.count() == 3


@pytest.mark.django_db
def test_pruning_takes_the_pruned_calls_out_of_the_node_counts(history, kube_scheduler):
    placements_before = NodeTally.objects.get(node="node-2").placements
    cycles_prune(older_than=T0 + 2 * MINUTE)
    tally = NodeTally.objects.get(node="node-2")
    assert tally.placements == placements_before - 2
    assert tally.considered == 2
    cycles_prune(older_than=T0 + DAY)
    assert not NodeTally.objects.exists(), "a node no retained call mentions is gone"


@pytest.mark.django_db
def test_prune_cycles_applies_the_retention_setting_and_can_dry_run(history, settings):
    settings.SCHEDLENS_RETENTION_DAYS = 0
    out = io.StringIO()
    call_command("prune_cycles", "--dry-run", stdout=out)
    assert out.getvalue().startswith("would delete 4 cycles, 12 calls")
    assert SchedulingCycle.objects.count() == 4
    call_command("prune_cycles", stdout=out)
    assert not SchedulingCycle.objects.exists()
    assert audit_chain_verify().ok


@pytest.mark.django_db(transaction=True)
def test_concurrent_ingesters_build_one_chain(kube_scheduler):
    """Two ingesters (own connections, own transactions) appending at once still leave one verifiable chain."""
    if connection.vendor != "postgresql":
        pytest.skip("SQLite serializes writers itself")
    batches = [
        [kube_scheduler.events(at=T0 + (worker * 50 + i) * MINUTE, name=f"w{worker}-{i}") for i in range(8)]
        for worker in range(2)
    ]
    start = threading.Barrier(2)
    errors: list[BaseException] = []

    def ingest(worker_batches: list) -> None:
        try:
            start.wait()
            for events in worker_batches:
                cycles_ingest_events(events=events)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=ingest, args=(b,)) for b in batches]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    report = audit_chain_verify()
    assert (report.ok, report.checked) == (True, 48)


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"body": b"\x02binary body", "record": None, "response": None},
        {"error": 'é \u2028 "quoted" \\ \x00', "server": ""},
        {"duration_ms": 3, "http_status": 200, "cycle_id": 10**20},  # ints hash as floats; a huge one as itself
        {"duration_ms": float("nan"), "started_at": T0 + timedelta(microseconds=7)},
        {"duration_ms": -0.0, "record": {"b": [1, 2.5, None, True], "a": {"z": "x"}}, "response": [{"Host": "n"}]},
        {"record": PackedDict({"nodes": ["n1"]}), "response": 0},
        {"profile_version": "0123456789ab"},
        {"profile_version": "", "body": b"\x02binary body", "record": None, "response": None},
    ],
)
def test_a_call_s_chained_content_is_the_canonical_json_of_its_columns(changes):
    """``call_content`` writes the canonical form key by key: it must stay byte for byte what ``_canonical`` gives,
    or chains recorded before would no longer verify."""
    values = {
        "cycle_id": 7,
        "event_id": "e" * 32,
        "verb": "filter",
        "started_at": T0,
        "duration_ms": 1.25,
        "http_status": 200,
        "error": "",
        "server": "host:1",
        "record": {"nodes": ["a", "b"], "passed": ["a"]},
        "response": {"NodeNames": ["a"]},
        "body": None,
    }
    values.update(changes)
    if isinstance(values["record"], PackedDict):
        values["record"].stored = "KLUv/QBYAQAA"
    content = {name: stored_form(values[name]) for name in CONTENT_FIELDS}
    if values.get("profile_version"):  # sealed when the call has one; a call without hashes as before versions
        content["profile_version"] = values["profile_version"]
    if values["body"] is not None:
        content["body"] = hashlib.sha256(values["body"]).hexdigest()
    expected: list[str] = []
    _canonical(content, expected)
    assert call_content(values) == "".join(expected).encode("ascii")
