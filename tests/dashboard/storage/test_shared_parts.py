"""A filter's per-node lists (candidates, failures, traffic figures) are stored once per kind of pod and traffic
snapshot (``SharedPart``), read back exactly, sealed by their digest, and pruned with the last call that needs them."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import msgspec
import pytest
from django.db import connection

from dashboard import models
from dashboard.audit.chain import audit_chain_verify
from dashboard.ingest.cycles import cycles_ingest_events
from dashboard.ingest.new_calls import record_of
from dashboard.models import SchedulingCycle, SharedPart, VerbCall, shared_part_data
from dashboard.services.retention import cycles_prune
from dashboard.storage.call_body import FilterBody
from dashboard.storage.call_body_read import _body_decoder
from dashboard.storage.shared_parts import MIN_SHARED_BYTES
from scheduler_core.extender.record.compression import decompressor
from scheduler_core.extender.record.structs import VerbEvent
from tests.support.demo_verbs import NOW, cycle_events, demo_extender
from tests.support.stored_calls import stored_answer, stored_record


def _cycles(count: int, *, nodes: int = 200, start: float = NOW, seed: int = 21) -> list[list[VerbEvent]]:
    """``count`` cycles of one pod kind (no GPU: every pod of the default profile fails the same nodes), one
    second apart from ``start``."""
    extender, cluster = demo_extender(nodes)
    rng = random.Random(seed)
    cycles = []
    for n in range(count):
        events = cycle_events(extender, cluster, rng, profile="default", mode="names")
        cycles.append([msgspec.structs.replace(e, started_at=start + n) for e in events])
    return cycles


def _kinds(cycles: list[list[VerbEvent]]) -> int:
    """Distinct sets of lists among the cycles' filters (the pods' requests decide which nodes fail)."""
    lists = {
        msgspec.json.encode([e.filter.nodes, e.filter.failures, e.filter.traffic_bytes])
        for cycle in cycles
        for e in cycle
        if e.filter is not None
    }
    return len(lists)


def _clear_shared_parts_read() -> None:
    models._shared_parts_read.clear()  # what a fresh process reads: the database's bytes


@pytest.mark.django_db
def test_filters_of_one_kind_of_pod_share_one_stored_part_and_read_back_exactly():
    cycles = _cycles(12)
    cycles_ingest_events(events=[e for cycle in cycles for e in cycle])

    assert SharedPart.objects.count() == _kinds(cycles) < 12, "one part per candidate list, outcome and snapshot"
    last = max(SharedPart.objects.values_list("last_used_at", flat=True))
    assert last == datetime.fromtimestamp(NOW + 11, tz=UTC), "moved to the latest call that refers to it"
    _clear_shared_parts_read()
    for call in VerbCall.objects.all():
        event = next(e for cycle in cycles for e in cycle if e.event_id == call.event_id)
        assert stored_record(call) == record_of(event)
        assert stored_answer(call) == msgspec.json.decode(event.response)
    with connection.cursor() as cursor:
        cursor.execute("SELECT max(length(body)) FROM dashboard_verbcall WHERE verb = 'filter'")
        (largest,) = cursor.fetchone()
    assert largest < 1024, "a 200-node filter's body holds no per-node list"
    assert audit_chain_verify().ok


@pytest.mark.django_db
def test_a_small_filter_keeps_its_lists_in_its_body():
    cycles = _cycles(2, nodes=4)
    cycles_ingest_events(events=[e for cycle in cycles for e in cycle])
    assert SharedPart.objects.count() == 0
    first = cycles[0][0]
    assert len(msgspec.json.encode(first.filter.nodes)) < MIN_SHARED_BYTES
    assert stored_record(VerbCall.objects.get(event_id=first.event_id)) == record_of(first)


@pytest.mark.django_db
def test_an_altered_shared_part_is_reported_by_verification_and_never_read_as_the_record():
    cycles = _cycles(3)
    cycles_ingest_events(events=[e for cycle in cycles for e in cycle])
    shared_part = SharedPart.objects.first()
    data = bytearray(shared_part.data)
    data[-1] ^= 1
    SharedPart.objects.filter(digest=shared_part.digest).update(data=bytes(data))
    _clear_shared_parts_read()

    report = audit_chain_verify()
    assert not report.ok
    assert report.altered_parts == (shared_part.digest,)
    assert shared_part.digest in report.reason
    readings = [stored_record(call) for call in VerbCall.objects.filter(verb="filter")]
    assert any("does not match its digest" in r.get("$unreadable", "") for r in readings)


@pytest.mark.django_db
def test_pruning_deletes_the_parts_only_pruned_calls_referred_to():
    old = _cycles(3, start=NOW, seed=1)
    new = _cycles(3, nodes=201, start=NOW + 7200, seed=2)  # another candidate list: another part
    cycles_ingest_events(events=[e for cycle in old + new for e in cycle])
    assert SharedPart.objects.count() == _kinds(old) + _kinds(new)
    kept = {f.filter.nodes[-1] for cycle in new for f in cycle if f.filter is not None}

    result = cycles_prune(older_than=datetime.fromtimestamp(NOW + 3600, tz=UTC))

    assert (result.cycles_deleted, result.parts_deleted) == (3, _kinds(old))
    assert SchedulingCycle.objects.count() == 3
    _clear_shared_parts_read()
    for call in VerbCall.objects.filter(verb="filter"):
        assert stored_record(call)["nodes"][-1] in kept
        assert shared_part_data(_digest_of(call)) is not None
    assert audit_chain_verify().ok
    assert cycles_prune(older_than=datetime.fromtimestamp(NOW + 86400, tz=UTC)).parts_deleted == _kinds(new)
    assert SharedPart.objects.count() == 0


def _filter_body_of(call: VerbCall) -> FilterBody:
    body = _body_decoder.decode(decompressor().decompress(bytes(call.body)[1:]))
    assert body.filter is not None
    return body.filter


def _digest_of(call: VerbCall) -> str:
    return _filter_body_of(call).shared_part


@pytest.mark.django_db
def test_a_part_pruned_away_is_stored_again_by_a_late_call_that_refers_to_it():
    cycles = _cycles(2)
    cycles_ingest_events(events=cycles[0])
    cycles_prune(older_than=datetime.fromtimestamp(NOW + 60, tz=UTC))
    assert SharedPart.objects.count() == 0
    late = [msgspec.structs.replace(e, started_at=e.started_at + 120) for e in cycles[1]]  # after an outage
    cycles_ingest_events(events=late)
    _clear_shared_parts_read()
    assert stored_record(VerbCall.objects.get(event_id=late[0].event_id)) == record_of(late[0])
    assert SharedPart.objects.get().last_used_at == datetime.fromtimestamp(late[0].started_at, tz=UTC)


@pytest.mark.django_db
def test_a_filter_answered_otherwise_than_the_part_keeps_its_own_answer():
    first = _cycles(1, seed=5)[0][0]
    # The same lists as the first filter, answered with an error text the first did not have.
    answer = msgspec.json.decode(first.response)
    answer["Error"] = "kube-scheduler asked twice"
    other = msgspec.structs.replace(
        first, event_id="f" * 32, pod_uid="other", started_at=first.started_at + 1, response=msgspec.json.encode(answer)
    )
    cycles_ingest_events(events=[first, other])
    _clear_shared_parts_read()
    assert stored_answer(VerbCall.objects.get(event_id=first.event_id)) == msgspec.json.decode(first.response)
    assert stored_answer(VerbCall.objects.get(event_id=other.event_id)) == answer
    assert SharedPart.objects.count() == 1
    shared = {call.event_id: _filter_body_of(call).answer_shared for call in VerbCall.objects.all()}
    assert shared == {first.event_id: True, other.event_id: False}, "the first's answer is the part's"
