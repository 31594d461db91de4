"""Large records and answers are stored packed, read back as they were, and sealed into the chain as stored."""

from __future__ import annotations

import msgspec
import pytest
from django.db import connection

from dashboard.audit.chain import audit_chain_verify
from dashboard.ingest.cycles import cycles_ingest_events
from dashboard.models import VerbCall
from dashboard.selectors.cycles import call_reads, cycle_list_with_calls
from dashboard.storage.call_body import BODY_FORMAT
from dashboard.storage.call_record import record_builtins
from dashboard.storage.packed_json import PACK_KEY, PackedDict, pack, unpack
from scheduler_core.extender.protocol.binding import SimulatedBinder
from scheduler_core.extender.protocol.cluster import NodeInfo, StaticCluster
from scheduler_core.extender.record.spool_codec import decode_event, encode_event
from scheduler_core.extender.scoring.profiles import load_profiles
from scheduler_core.extender.verbs import Extender
from scheduler_core.traffic import TrafficQuery, TrafficSnapshot
from scheduler_core.traffic.store import TrafficStore
from tests.support.stored_calls import stored_answer, stored_record

NODES = [f"node-{i:04d}" for i in range(300)]


def big_cycle():
    store = TrafficStore()
    store.put(TrafficSnapshot(TrafficQuery(), {n: 1e6 + i * 977.5 for i, n in enumerate(NODES)}, 1.7e9, "test"))
    extender = Extender(
        load_profiles(None),
        cluster=StaticCluster(NodeInfo(n) for n in NODES),
        traffic=store,
        binder=SimulatedBinder(),
        clock=lambda: 1.7e9,
    )
    pod = {"metadata": {"name": "web-1", "namespace": "shop", "uid": "uid-1"}}
    body = msgspec.json.encode({"Pod": pod, "Nodes": None, "NodeNames": NODES})
    events = [extender.filter("default", body).event, extender.prioritize("default", body).event]
    return [decode_event(encode_event(e)) for e in events]


def test_pack_keeps_small_values_plain_and_gives_large_ones_back_unchanged():
    assert pack({"node": "node-1"}) == {"node": "node-1"}
    assert not isinstance(pack({"node": "node-1"}), PackedDict)
    large = {"nodes": NODES, "final": [float(i) for i in range(300)]}
    packed = pack(large)
    assert isinstance(packed, PackedDict)
    assert unpack({PACK_KEY: packed.stored}) == large


def test_a_damaged_packed_value_reads_as_unreadable_instead_of_failing():
    assert "$unreadable" in unpack({PACK_KEY: "not base64 zstd"})


@pytest.mark.django_db
def test_a_large_cycle_is_stored_packed_and_read_back_as_recorded():
    events = big_cycle()
    cycles_ingest_events(events=events)
    calls = {c.verb: c for c in VerbCall.objects.all()}
    assert stored_record(calls["filter"])["nodes"] == NODES
    assert stored_answer(calls["filter"])["NodeNames"] == NODES
    assert stored_record(calls["prioritize"]) == msgspec.to_builtins(events[1].prioritize) | {"node_mode": "names"}
    assert stored_answer(calls["prioritize"]) == msgspec.json.decode(events[1].response)
    with connection.cursor() as cursor:
        cursor.execute("SELECT record, response, body FROM dashboard_verbcall WHERE verb = 'prioritize'")
        record, response, body = cursor.fetchone()
    # Since migration 0004 a per-node record and its answer are one binary body; the JSON columns stay empty.
    assert (record, response) == (None, None)
    assert bytes(body)[0] == BODY_FORMAT
    assert len(body) < len(pack(stored_record(calls["prioritize"])).stored) / 2
    assert audit_chain_verify().ok


@pytest.mark.django_db
def test_a_prioritize_body_refers_to_its_filter_and_reads_back_alone_or_with_its_cycle():
    events = big_cycle()
    cycles_ingest_events(events=events)
    prioritize = VerbCall.objects.get(verb="prioritize")
    expected = msgspec.to_builtins(events[1].prioritize) | {"node_mode": "names"}
    assert stored_record(prioritize) == expected  # alone: the filter call is looked up
    calls = list(cycle_list_with_calls().get().calls.all())  # with its cycle: read from the prefetched calls
    assert {r.call.verb: record_builtins(r.recorded) for r in call_reads(calls=calls)}["prioritize"] == expected


@pytest.mark.django_db
def test_replacing_a_body_breaks_the_chain_at_that_call():
    cycles_ingest_events(events=big_cycle())
    victim, other = VerbCall.objects.get(verb="prioritize"), VerbCall.objects.get(verb="filter")
    with connection.cursor() as cursor:
        cursor.execute("UPDATE dashboard_verbcall SET body = %s WHERE id = %s", [bytes(other.body), victim.id])
    report = audit_chain_verify()
    assert (report.ok, report.first_broken_id) == (False, victim.id)


@pytest.mark.django_db
def test_altering_a_filter_that_a_prioritize_body_refers_to_breaks_the_chain_at_the_filter():
    cycles_ingest_events(events=big_cycle())
    victim = VerbCall.objects.get(verb="filter")
    with connection.cursor() as cursor:
        cursor.execute("UPDATE dashboard_verbcall SET body = NULL, record = '{}' WHERE id = %s", [victim.id])
    report = audit_chain_verify()
    assert (report.ok, report.first_broken_id) == (False, victim.id)
    assert "$unreadable" in stored_record(VerbCall.objects.get(verb="prioritize"))


@pytest.mark.django_db
def test_replacing_a_packed_record_with_its_plain_json_breaks_the_chain_at_that_call():
    cycles_ingest_events(events=big_cycle())
    victim = VerbCall.objects.get(verb="prioritize")
    plain = msgspec.json.encode(dict(stored_record(victim))).decode()
    cast = "::jsonb" if connection.vendor == "postgresql" else ""
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE dashboard_verbcall SET record = %s{cast} WHERE id = %s", [plain, victim.id])  # noqa: S608
    assert stored_record(VerbCall.objects.get(id=victim.id)) == stored_record(victim), "the same content, stored plain"
    report = audit_chain_verify()
    assert (report.ok, report.first_broken_id) == (False, victim.id)
