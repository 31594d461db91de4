"""Migration 0004 on a database with rows: calls keep their JSON, their hashes and their readers; cycles their
candidate nodes (now answered from node postings on PostgreSQL)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from dashboard.audit.chain import GENESIS, audit_chain_verify, call_content, chain_link
from dashboard.filters import cycles_considering
from dashboard.models import NodePosting, SchedulingCycle, VerbCall
from dashboard.storage.packed_json import pack
from tests.support.stored_calls import stored_answer, stored_record

BEFORE = [("dashboard", "0003_verbcall_packed_json")]
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
NODES = [f"node-{i:03d}" for i in range(300)]


def migrate(targets):  # type: ignore[no-untyped-def]
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def latest():  # type: ignore[no-untyped-def]
    executor = MigrationExecutor(connection)
    return executor.loader.graph.leaf_nodes()


@pytest.mark.django_db(transaction=True)
def test_rows_written_before_0004_read_and_verify_alike_after_it():
    apps = migrate(BEFORE)
    try:
        cycle_model = apps.get_model("dashboard", "SchedulingCycle")
        call_model = apps.get_model("dashboard", "VerbCall")
        previous = GENESIS
        expected = {}
        for n in range(3):
            nodes = NODES[n * 100 : n * 100 + 150]
            cycle = cycle_model.objects.create(
                pod_namespace="shop",
                pod_name=f"web-{n}",
                pod_uid=f"uid-{n}",
                profile="default",
                started_at=T0 + timedelta(minutes=n),
                finished_at=T0 + timedelta(minutes=n),
                candidate_nodes=f"|{'|'.join(nodes)}|",
            )
            record = {"nodes": nodes, "passed": nodes[:2], "traffic_bytes": [1.0e6] * len(nodes)}
            response = {"NodeNames": nodes[:2], "Nodes": None, "Error": ""}
            values = {
                "cycle_id": cycle.id,
                "event_id": f"{n:032x}",
                "verb": "filter",
                "started_at": T0 + timedelta(minutes=n),
                "duration_ms": 1.5,
                "http_status": 200,
                "error": "",
                "server": "old:1",
                "record": pack(record),  # large: stored packed, as 0003 wrote it
                "response": response,
            }
            previous = chain_link(previous, call_content(values))
            call_model.objects.create(
                **{k: v for k, v in values.items() if k != "cycle_id"}, cycle=cycle, chain_hash=previous
            )
            expected[f"{n:032x}"] = (record, response)
    finally:
        migrate(latest())

    report = audit_chain_verify()
    assert (report.ok, report.checked, report.head_hash) == (True, 3, previous)
    for call in VerbCall.objects.all():
        assert (stored_record(call), stored_answer(call)) == expected[call.event_id]
        assert call.body is None
    cycles = SchedulingCycle.objects.all()
    if connection.vendor == "postgresql":  # (SQLite keeps filtering on candidate_nodes)
        assert all(c.candidate_slot == c.id for c in cycles)
        assert NodePosting.objects.exists()
    assert {c.pod_name for c in cycles_considering(cycles, "node-120")} == {"web-0", "web-1"}
    assert {c.pod_name for c in cycles_considering(cycles, "node-299")} == {"web-2"}
    assert list(cycles_considering(cycles, "node-999")) == []
