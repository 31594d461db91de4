"""Records the verbs spooled in ``SLR\\x04`` form are stored as they were spooled (body format 3) and read back as
recorded: the same record and answer as the verb gave the ingester, the same cycle, a chain that verifies.

Anything the ingester changes on the way (NUL in a string, an over-long name, an answer never confirmed) is stored
transcoded, as before; so is a record spooled in an earlier form.
"""

from __future__ import annotations

import random

import msgspec
import pytest

from dashboard.audit.chain import audit_chain_verify
from dashboard.ingest.cycles import cycles_ingest_records
from dashboard.ingest.new_calls import record_of
from dashboard.ingest.sanitize import NUL_SHOWN
from dashboard.ingest.spool_ingest import spool_ingest
from dashboard.models import SchedulingCycle, VerbCall
from dashboard.spool import Spool
from dashboard.storage.call_body import BODY_AS_SPOOLED, BODY_FORMAT, body_as_spooled
from dashboard.storage.call_body_read import body_read
from scheduler_core.extender.record.spool_codec import SPOOL_DERIVING, answer_of, encode_event
from scheduler_core.extender.record.structs import FILTER, PRIORITIZE
from tests.support.demo_verbs import cycle_events, demo_extender
from tests.support.stored_calls import stored_answer, stored_record


def _spooled_cycles(tmp_path, count: int, *, deriving: bool, seed: int = 5) -> tuple[Spool, list, dict[str, bytes]]:
    extender, cluster = demo_extender(60, without_metrics=2)
    rng = random.Random(seed)
    spool = Spool(tmp_path)
    events, spooled = [], {}
    for _ in range(count):
        for event in cycle_events(extender, cluster, rng, profile="default", mode="names"):
            data = encode_event(event, deriving=deriving)
            spool.append(data)
            events.append(event)
            spooled[event.event_id] = data
    return spool, events, spooled


@pytest.mark.django_db
def test_records_spooled_deriving_are_stored_as_spooled_and_read_back_as_recorded(tmp_path):
    spool, events, spooled = _spooled_cycles(tmp_path, 4, deriving=True)
    assert spool_ingest(spool=spool, confirm_grace_seconds=0) == len(events)
    assert spool.rejected() == []
    verbs = set()
    for event in events:
        call = VerbCall.objects.get(event_id=event.event_id)
        verbs.add(event.verb)
        assert spooled[event.event_id].startswith(SPOOL_DERIVING)
        assert bytes(call.body) == bytes([BODY_AS_SPOOLED]) + spooled[event.event_id], "stored as spooled"
        assert stored_record(call) == record_of(event)
        assert stored_answer(call) == msgspec.json.decode(answer_of(event))
    assert verbs == {FILTER, PRIORITIZE}
    # The cycles' columns come from the records as before: the preferred node is the highest final score.
    for cycle in SchedulingCycle.objects.all():
        scored = next(e for e in events if e.pod_uid == cycle.pod_uid and e.verb == PRIORITIZE).prioritize
        assert cycle.preferred_node == scored.nodes[scored.final.index(max(scored.final))]
        assert cycle.candidate_count == len(next(e for e in events if e.pod_uid == cycle.pod_uid).filter.nodes)
    assert audit_chain_verify().ok


@pytest.mark.django_db
def test_a_body_stored_as_spooled_is_sealed_by_the_chain(tmp_path):
    spool, events, _ = _spooled_cycles(tmp_path, 1, deriving=True)
    spool_ingest(spool=spool, confirm_grace_seconds=0)
    call = VerbCall.objects.get(event_id=events[-1].event_id)
    body = bytearray(call.body)
    body[-1] ^= 1
    VerbCall.objects.filter(pk=call.pk).update(body=bytes(body))
    assert not audit_chain_verify().ok


@pytest.mark.django_db
def test_records_spooled_in_the_earlier_form_are_still_transcoded(tmp_path):
    spool, events, _ = _spooled_cycles(tmp_path, 2, deriving=False)
    spool_ingest(spool=spool, confirm_grace_seconds=0)
    for event in events:
        call = VerbCall.objects.get(event_id=event.event_id)
        assert call.body[0] == BODY_FORMAT
        assert stored_record(call) == record_of(event)


@pytest.mark.django_db
def test_a_record_with_nul_spooled_deriving_is_transcoded_with_nul_visible(tmp_path):
    extender, cluster = demo_extender(20)
    event = cycle_events(extender, cluster, random.Random(6), profile="default", mode="names")[0]
    filtered = event.filter
    assert filtered is not None
    nodes = [*filtered.nodes[:-1], filtered.nodes[-1] + "\x00x"]
    event = msgspec.structs.replace(event, filter=msgspec.structs.replace(filtered, nodes=nodes))
    spool = Spool(tmp_path)
    spool.append(encode_event(event, deriving=True))
    assert spool_ingest(spool=spool, confirm_grace_seconds=0) == 1
    call = VerbCall.objects.get()
    assert call.body[0] == BODY_FORMAT, "changed by the ingester: not as spooled"
    assert stored_record(call)["nodes"][-1] == filtered.nodes[-1] + f"{NUL_SHOWN}x"


@pytest.mark.django_db
def test_nul_only_inside_a_record_spooled_deriving_is_stored_visible(tmp_path):
    # A NUL in a string that goes to no column of its own (a filter's reason, a plugin's note), not only in names.
    extender, cluster = demo_extender(20, without_metrics=2)
    filtered, scored = cycle_events(extender, cluster, random.Random(8), profile="default", mode="names")[:2]
    assert filtered.filter is not None
    assert filtered.filter.failures
    assert scored.prioritize is not None
    failures = {n: {p: f"{r}\x00!" for p, r in reasons.items()} for n, reasons in filtered.filter.failures.items()}
    filtered = msgspec.structs.replace(filtered, filter=msgspec.structs.replace(filtered.filter, failures=failures))
    plugins = [msgspec.structs.replace(p, note=f"{p.note}\x00?") for p in scored.prioritize.plugins]
    scored = msgspec.structs.replace(scored, prioritize=msgspec.structs.replace(scored.prioritize, plugins=plugins))
    spool = Spool(tmp_path)
    for event in (filtered, scored):
        spool.append(encode_event(event, deriving=True))
    assert spool_ingest(spool=spool, confirm_grace_seconds=0) == 2
    stored = {call.verb: call for call in VerbCall.objects.all()}
    assert {verb: call.body[0] for verb, call in stored.items()} == {FILTER: BODY_FORMAT, PRIORITIZE: BODY_FORMAT}
    reasons = [r for rs in stored_record(stored[FILTER])["failures"].values() for r in rs.values()]
    assert all(r.endswith(f"{NUL_SHOWN}!") for r in reasons)
    assert all(p["note"].endswith(f"{NUL_SHOWN}?") for p in stored_record(stored[PRIORITIZE])["plugins"])


def test_only_the_deriving_form_is_stored_as_spooled_and_a_damaged_one_reads_as_unreadable():
    extender, cluster = demo_extender(20)
    event = cycle_events(extender, cluster, random.Random(7), profile="default", mode="names")[-1]
    assert body_as_spooled(encode_event(event)) is None, "SLR\\x03 holds what SLR\\x04 leaves out: transcoded"
    body = body_as_spooled(encode_event(event, deriving=True))
    assert body is not None
    record, answer = body_read(body, filter_records=lambda _event_id: None, shared_parts={}.get)
    assert record.prioritize == event.prioritize
    assert answer == msgspec.json.decode(answer_of(event))
    record, answer = body_read(body[:-7], filter_records=lambda _event_id: None, shared_parts={}.get)
    assert record.unreadable
    assert answer is None
    json_bind = bytes([BODY_AS_SPOOLED]) + b'{"event_id":"x"}'
    assert body_read(json_bind, filter_records=lambda _event_id: None, shared_parts={}.get)[0].unreadable


@pytest.mark.django_db
def test_records_folded_without_a_spool_are_stored_as_the_ingester_stores_their_form(tmp_path):
    # The benchmarks' histories are made so: each record as the spool would hold it, as the ingester stores it.
    _, events, spooled = _spooled_cycles(tmp_path, 2, deriving=True)
    framed = {e.event_id: encode_event(e) for e in events}
    assert cycles_ingest_records(records=[spooled[e.event_id] for e in events[:2]]) == 2
    assert cycles_ingest_records(records=[framed[e.event_id] for e in events[2:]]) == len(events) - 2
    formats = {call.event_id: call.body[0] for call in VerbCall.objects.all()}
    assert [formats[e.event_id] for e in events] == [BODY_AS_SPOOLED] * 2 + [BODY_FORMAT] * (len(events) - 2)
    assert [stored_record(VerbCall.objects.get(event_id=e.event_id)) for e in events] == [record_of(e) for e in events]
