"""Large records and answers are stored packed, read back as they were, and sealed into the chain as stored."""

from __future__ import annotations

import msgspec
import pytest
from django.db import connection

from dashboard.models import VerbCall
from dashboard.packing import PACK_KEY, PackedDict, pack, unpack
from dashboard.services.audit import audit_chain_verify
from dashboard.services.cycles import cycles_ingest_events
from scheduler_core.binding import SimulatedBinder
from scheduler_core.cluster import NodeInfo, StaticCluster
from scheduler_core.profiles import load_profiles
from scheduler_core.record import decode_event, encode_event
from scheduler_core.traffic import TrafficQuery, TrafficSnapshot
from scheduler_core.traffic.store import TrafficStore
from scheduler_core.verbs import Extender

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
    assert calls["filter"].record["nodes"] == NODES
    assert calls["filter"].response["NodeNames"] == NODES
    assert calls["prioritize"].record == msgspec.to_builtins(events[1].prioritize) | {"node_mode": "names"}
    assert calls["prioritize"].response == msgspec.json.decode(events[1].response)
    with connection.cursor() as cursor:
        cursor.execute("SELECT record FROM dashboard_verbcall WHERE verb = 'prioritize'")
        stored = cursor.fetchone()[0]
    assert PACK_KEY in (stored if isinstance(stored, dict) else msgspec.json.decode(stored))
    assert audit_chain_verify().ok


@pytest.mark.django_db
def test_replacing_a_packed_record_with_its_plain_json_breaks_the_chain_at_that_call():
    cycles_ingest_events(events=big_cycle())
    victim = VerbCall.objects.get(verb="prioritize")
    plain = msgspec.json.encode(dict(victim.record)).decode()
    cast = "::jsonb" if connection.vendor == "postgresql" else ""
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE dashboard_verbcall SET record = %s{cast} WHERE id = %s", [plain, victim.id])  # noqa: S608
    assert VerbCall.objects.get(id=victim.id).record == victim.record, "the same content, stored plain"
    report = audit_chain_verify()
    assert (report.ok, report.first_broken_id) == (False, victim.id)
