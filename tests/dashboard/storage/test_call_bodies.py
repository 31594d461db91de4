"""Calls stored as binary bodies (migration 0004) read back exactly as recorded, whatever the record holds.

Every reader sees a stored call's record and answer (``dashboard.selectors.cycles.call_reads``); these tests compare
them with what the ingester was given (``record_of(event)`` and the answer's JSON), for records from the real verbs
in both node modes, with nodes without metrics, unknown nodes, one or no passing node, preemption, NUL in strings and
over-long names.
"""

from __future__ import annotations

import math
import pickle
import random
from typing import Any

import msgspec
import numpy as np
import pytest
from django.db import connection

from dashboard.audit.chain import audit_chain_verify
from dashboard.ingest import cycles, new_calls
from dashboard.ingest.cycles import cycles_ingest_events
from dashboard.ingest.new_calls import record_of
from dashboard.ingest.sanitize import NAME_LIMIT, NUL_SHOWN
from dashboard.ingest.spool_ingest import spool_ingest
from dashboard.models import NodePosting, SchedulingCycle, VerbCall
from dashboard.selectors.cycles import call_reads
from dashboard.spool import Spool
from dashboard.storage.call_body import Body, body_encode, body_encode_with_references
from dashboard.storage.call_body_read import body_decode
from dashboard.storage.call_record import record_builtins
from dashboard.storage.columns import (
    F64_SHUFFLED,
    FILTER_TRAFFIC,
    GENERIC,
    INVERSE_SHARE,
    TEXT,
    WEIGHTED_MEAN,
    column_decode,
    column_encode,
)
from scheduler_core.cli.simulator import make_pod
from scheduler_core.extender.protocol.binding import SimulatedBinder
from scheduler_core.extender.protocol.cluster import NodeInfo, StaticCluster
from scheduler_core.extender.record.spool_codec import SPOOL_FRAMED, decode_event, encode_event
from scheduler_core.extender.record.structs import VerbEvent
from scheduler_core.extender.scoring.profiles import load_profiles
from scheduler_core.extender.verbs import Extender
from tests.support.demo_verbs import NOW, cycle_events, demo_extender
from tests.support.inputs import traffic_store
from tests.support.stored_calls import stored_answer, stored_record


class SyncedCache(StaticCluster):
    knows_all_nodes = True


def assert_read_back(event: VerbEvent) -> dict[str, Any]:
    encoded = body_encode_with_references(event)
    shared = encoded.shared_part
    shared_parts = {shared.digest: shared.data} if shared is not None else {}
    decoded, answer = body_decode(encoded.body, filter_records=lambda _event_id: None, shared_parts=shared_parts.get)
    record = record_builtins(decoded)
    assert record == record_of(event)
    assert answer == msgspec.json.decode(event.response)
    return record


@pytest.mark.parametrize("mode", ["names", "nodes"])
@pytest.mark.parametrize("profile", ["default", "gpu-aware"])
def test_records_of_the_real_verbs_read_back_exactly(mode, profile):
    extender, cluster = demo_extender(80, without_metrics=3)
    rng = random.Random(11)
    for _ in range(6):
        events = cycle_events(extender, cluster, rng, profile=profile, mode=mode)
        for event in events:
            assert_read_back(event)


def test_unknown_nodes_one_passing_node_and_none_read_back_exactly():
    cache = SyncedCache([NodeInfo("node-1"), NodeInfo("node-2")])
    extender = Extender(
        load_profiles(None),
        cluster=cache,
        traffic=traffic_store({"node-1": 1e6, "node-2": 2e6}),
        binder=SimulatedBinder(),
        clock=lambda: NOW,
    )
    pod = {"metadata": {"name": "p", "namespace": "n", "uid": "u"}}
    for names in (["node-1", "ghost", "node-2"], ["node-1", "ghost"], ["ghost"], []):
        body = msgspec.json.encode({"Pod": pod, "Nodes": None, "NodeNames": names})
        assert_read_back(decode_event(encode_event(extender.filter("default", body).event)))
        assert_read_back(decode_event(encode_event(extender.prioritize("default", body).event)))


def test_a_preempt_record_reads_back_exactly():
    extender, cluster = demo_extender(10)
    pod = make_pod(random.Random(2))
    victims = {"Pods": [{"metadata": {"uid": "v1"}}], "NumPDBViolations": 0}
    body = {"Pod": pod, "NodeNameToMetaVictims": dict.fromkeys(cluster.node_names[:4], victims)}
    event = extender.preempt("default", msgspec.json.encode(body)).event
    assert_read_back(decode_event(encode_event(event)))


@pytest.mark.parametrize(
    "values",
    [
        [],
        [1.5, None, 2.25, None],
        [None, None],
        [4.0e9 + i for i in range(300)],
        [4.0e9, None, 7.0e9, 123456789.0],
        [round(i * 0.3137, 4) for i in range(300)],
        [0.0, -0.0, 1.0],
        [-0.0, 5.0e9, 6.0e9],
        [1, 2, 3],
        [1.0, 2, None],
        [math.nan, 1.0],
        [math.inf, -math.inf],
        [1e300, 5e-324, -2.5],
        # Byte counts with, past the first 64 looked at, an int or a bool (either would read back as a float).
        [4.0e9 + i for i in range(70)] + [5_000_000_000],
        [4.0e9 + i for i in range(70)] + [True],
        [4.0e9 + i for i in range(70)] + [None, 6.0e9],
    ],
)
def test_a_column_reads_back_exactly(values):
    column = column_encode(values)
    decoded = column_decode(column)
    assert msgspec.msgpack.encode(decoded) == msgspec.msgpack.encode(values)  # same types, bits, NaN and -0.0
    assert column.kind in {TEXT, F64_SHUFFLED, GENERIC}


def test_byte_counts_are_stored_as_shuffled_floats_and_scores_as_text():
    assert column_encode([4.0e9 + i for i in range(100)]).kind == F64_SHUFFLED
    assert column_encode([round(i / 7, 4) for i in range(100)]).kind == TEXT


@pytest.mark.django_db
def test_a_prioritize_refers_to_its_filter_and_not_to_another_filter_of_the_same_pod():
    extender, cluster = demo_extender(40)
    events = cycle_events(extender, cluster, random.Random(3), profile="default", mode="names")
    assert [e.verb for e in events] == ["filter", "prioritize"]
    cycles_ingest_events(events=events[:1])
    # The ingester last saw another filter of this pod (say, of a retry it had not written yet).
    other = msgspec.structs.replace(events[0], event_id="f" * 32, started_at=events[0].started_at + 60)
    new_calls.build_call(other)
    cycles_ingest_events(events=events[1:])
    prioritize = VerbCall.objects.get(verb="prioritize")
    assert stored_record(prioritize) == record_of(events[1])
    assert bytes(events[0].event_id, "ascii") in body_plain(prioritize.body), "refers to its own cycle's filter"
    assert audit_chain_verify().ok


@pytest.mark.django_db
def test_a_prioritize_ingested_after_its_filter_still_refers_to_it():
    extender, cluster = demo_extender(40)
    events = cycle_events(extender, cluster, random.Random(4), profile="default", mode="names")
    cycles_ingest_events(events=events[:1])
    new_calls.recent_filters.put(events[0].pod_uid, None)  # another replica's ingester: never saw the filter
    cycles_ingest_events(events=events[1:])
    prioritize = VerbCall.objects.get(verb="prioritize")
    decoded = msgspec.msgpack.decode(body_plain(prioritize.body))
    assert decoded[3][5] == events[0].event_id  # Body.prioritize.filter_event
    assert any(raw and raw[0] == FILTER_TRAFFIC for raw in decoded[3][2])
    assert stored_record(prioritize) == record_of(events[1])


@pytest.mark.django_db
def test_a_prioritize_that_guessed_another_filter_refers_to_its_own_handed_over_in_the_same_batch():
    extender, cluster = demo_extender(40)
    events = cycle_events(extender, cluster, random.Random(12), profile="default", mode="names")
    other = msgspec.structs.replace(events[0], event_id="e" * 32, started_at=events[0].started_at - 60)
    new_calls.build_call(other)  # the builder process last saw another filter of this pod
    guessed = new_calls.NewCall.of(events[1], reference=new_calls.recent_filters.get(events[1].pod_uid))
    assert guessed.refers_to == other.event_id
    own = _through_a_process(new_calls.build_call(events[0]))  # its reference stayed in the builder process
    cycles.ingest_calls([own, guessed])
    prioritize = VerbCall.objects.get(verb="prioritize")
    assert msgspec.msgpack.decode(body_plain(prioritize.body))[3][5] == events[0].event_id
    assert stored_record(prioritize) == record_of(events[1])
    assert audit_chain_verify().ok


def _through_a_process(value: Any) -> Any:
    """What a preparing process hands back (``ProcessPoolExecutor`` pickles results): our own bytes, never input."""
    return pickle.loads(pickle.dumps(value))  # noqa: S301


def test_prepared_calls_come_back_from_a_preparing_process_field_for_field(settings):
    settings.SCHEDLENS_POD_EVENTS = True
    extender, cluster = demo_extender(40)
    events = cycle_events(extender, cluster, random.Random(5), profile="default", mode="names")
    sent = [new_calls.build_call(event) for event in events]
    assert sent[0].summary.nodes, "a filter's candidate list travels joined"
    assert sent[0].failures, "and so do its failures (node counts)"
    assert sent[0].filter_reference is not None, "the filter has a reference a prioritize may make"
    for original, back in zip(sent, _through_a_process(sent), strict=True):
        for name in original.__slots__:
            if name not in {"summary", "filter_reference", "event"}:
                assert getattr(back, name) == getattr(original, name), name
        # A filter's reference stays behind; the writer makes the same again from the body when it needs it.
        assert back.filter_reference is None
        # So does the event: the Explained Event's summary decodes the body instead, the same record.
        assert original.event is not None
        assert back.event is None
        assert cycles._new_filter_reference(back) == original.filter_reference
        for name in original.summary.__slots__:
            assert getattr(back.summary, name) == getattr(original.summary, name), f"summary.{name}"
    stored = [VerbCall(event_id=c.event_id, verb=c.verb, body=c.body, record_json=c.record_json) for c in sent]
    for read, original in zip(call_reads(calls=stored), sent, strict=True):
        back_record = record_builtins(read.recorded)
        assert back_record == new_calls.record_of(original.event), f"{read.call.verb}: the event is the body's record"
    first, second = _through_a_process(sent[0]), _through_a_process(sent[0])
    assert first.summary.nodes is second.summary.nodes, "a list received again is the same list"
    again = msgspec.structs.replace(events[0], event_id="f" * 32, pod_uid="other")
    batch = _through_a_process([sent[0], new_calls.build_call(again)])
    assert batch[0].failures is batch[1].failures, "failures repeated in a batch arrive as one object"


def body_plain(body: bytes) -> bytes:
    import zstandard

    return zstandard.ZstdDecompressor().decompress(bytes(body)[1:])


@pytest.mark.django_db
def test_nul_anywhere_in_a_binary_spooled_record_is_stored_visible(tmp_path):
    extender, cluster = demo_extender(20)
    event = cycle_events(extender, cluster, random.Random(6), profile="default", mode="names")[0]
    filtered = event.filter
    assert filtered is not None
    failures = {n: {plugin: f"{reason}\x00!" for plugin, reason in r.items()} for n, r in filtered.failures.items()}
    nodes = [*filtered.nodes[:-1], filtered.nodes[-1] + "\x00x"]
    event = msgspec.structs.replace(
        event, pod_name="web\x00", filter=msgspec.structs.replace(filtered, failures=failures, nodes=nodes)
    )
    spool = Spool(tmp_path)
    data = encode_event(event)
    assert data.startswith(SPOOL_FRAMED)
    spool.append(data)
    assert spool_ingest(spool=spool, confirm_grace_seconds=0) == 1
    assert spool.rejected() == []
    call = VerbCall.objects.get()
    assert stored_record(call)["nodes"][-1] == filtered.nodes[-1] + f"{NUL_SHOWN}x"
    assert all(NUL_SHOWN in reason for r in stored_record(call)["failures"].values() for reason in r.values())
    assert call.cycle.pod_name == f"web{NUL_SHOWN}"
    assert audit_chain_verify().ok


@pytest.mark.django_db
def test_nul_in_a_node_name_of_a_prioritize_spooled_without_its_answer_is_stored_visible_in_the_answer(tmp_path):
    nodes = [NodeInfo("node-1"), NodeInfo("node\x002")]
    extender = Extender(
        load_profiles(None),
        cluster=StaticCluster(nodes),
        traffic=traffic_store({"node-1": 1e6, "node\x002": 2e6}),
        binder=SimulatedBinder(),
        clock=lambda: NOW,
    )
    pod = {"metadata": {"name": "p", "namespace": "n", "uid": "uid-nul"}}
    body = msgspec.json.encode({"Pod": pod, "Nodes": None, "NodeNames": ["node-1", "node\x002"]})
    scored = extender.prioritize("default", body).event
    assert scored.answer_derived
    spool = Spool(tmp_path)
    spool.append(encode_event(scored))
    assert spool_ingest(spool=spool, confirm_grace_seconds=0) == 1
    call = VerbCall.objects.get()
    assert [host["Host"] for host in stored_answer(call)] == ["node-1", f"node{NUL_SHOWN}2"]
    assert stored_record(call)["nodes"] == ["node-1", f"node{NUL_SHOWN}2"]


@pytest.mark.django_db
def test_a_backlog_ingested_in_many_small_batches_reads_back_exactly_and_chains(tmp_path):
    # Each batch is prepared while the one before is written: every record lands once, and reads back exactly.
    extender, cluster = demo_extender(30)
    rng = random.Random(8)
    events = [e for n in range(9) for e in cycle_events(extender, cluster, rng, profile="default", mode="names")]
    spool = Spool(tmp_path)
    for event in events:
        spool.append(encode_event(event))
    assert spool_ingest(spool=spool, batch_size=2, confirm_grace_seconds=0) == len(events)
    assert spool.depth() == 0
    stored = {call.event_id: call for call in VerbCall.objects.all()}
    assert sorted(stored) == sorted(e.event_id for e in events)
    for event in events:
        assert stored_record(stored[event.event_id]) == record_of(event)
        assert stored_answer(stored[event.event_id]) == msgspec.json.decode(event.response)
    assert SchedulingCycle.objects.count() == 9
    assert audit_chain_verify().ok


@pytest.mark.django_db
def test_over_long_node_names_are_cut_alike_in_filter_and_prioritize():
    long = "n" * 300
    extender = Extender(
        load_profiles(None),
        cluster=StaticCluster([NodeInfo(long), NodeInfo("node-2")]),
        traffic=traffic_store({long: 1e6, "node-2": 2e6}),
        binder=SimulatedBinder(),
        clock=lambda: NOW,
    )
    pod = {"metadata": {"name": "p", "namespace": "n", "uid": "uid-long"}}
    body = msgspec.json.encode({"Pod": pod, "Nodes": None, "NodeNames": [long, "node-2"]})
    events = [extender.filter("default", body).event, extender.prioritize("default", body).event]
    spool_events = [encode_event(e) for e in events]
    spool = Spool_in_memory(spool_events)
    spool_ingest(spool=spool, confirm_grace_seconds=0)
    filter_call, prioritize_call = VerbCall.objects.get(verb="filter"), VerbCall.objects.get(verb="prioritize")
    cut = stored_record(filter_call)["nodes"][0]
    assert len(cut) == NAME_LIMIT
    assert stored_record(prioritize_call)["nodes"][0] == cut
    # The answer as sent, with the name whole: not one derived again from the record's cut names.
    assert stored_answer(prioritize_call) == msgspec.json.decode(events[1].response)
    assert stored_answer(prioritize_call)[0]["Host"] == long
    if connection.vendor == "postgresql":
        assert NodePosting.objects.filter(node=cut).exists()


class Spool_in_memory(Spool):
    def __init__(self, rows: list[bytes]) -> None:
        import tempfile

        super().__init__(tempfile.mkdtemp())
        for row in rows:
            self.append(row)


@pytest.mark.django_db
def test_a_cycle_opened_by_its_prioritize_and_joined_by_its_filter_is_found_by_the_filter_s_nodes():
    extender, cluster = demo_extender(30)
    events = cycle_events(extender, cluster, random.Random(8), profile="default", mode="names")
    filtered, scored = events
    early = msgspec.structs.replace(scored, started_at=filtered.started_at - 0.5)  # another replica's, ingested first
    cycles_ingest_events(events=[early])
    cycle = SchedulingCycle.objects.get()
    first_slot = cycle.candidate_slot
    cycles_ingest_events(events=[filtered])
    cycle.refresh_from_db()
    if connection.vendor == "postgresql":
        assert cycle.candidate_slot != first_slot, "a new slot for the new candidate list"
    from dashboard.filters import cycles_considering

    failed = next(iter(filtered.filter.failures))  # a candidate of the filter, not of the prioritize
    assert list(cycles_considering(SchedulingCycle.objects.all(), failed)) == [cycle]
    assert list(cycles_considering(SchedulingCycle.objects.all(), scored.prioritize.nodes[0])) == [cycle]
    assert audit_chain_verify().ok


def test_a_json_spool_record_written_before_binary_records_still_decodes():
    extender, cluster = demo_extender(10)
    event = cycle_events(extender, cluster, random.Random(9), profile="default", mode="names")[0]
    legacy = msgspec.json.encode(event)
    assert decode_event(legacy) == event
    binary = encode_event(event)
    assert binary.startswith(SPOOL_FRAMED)
    assert len(binary) < len(legacy)
    assert decode_event(binary) == event


def prioritize_body(event: VerbEvent) -> Any:
    return msgspec.msgpack.decode(body_plain(body_encode(event)), type=Body).prioritize


def bound_cycles(extender: Extender, cluster: Any, rng: random.Random, count: int) -> list[VerbEvent]:
    """``count`` cycles' prioritize records, each pod bound to our preferred node (the herd grows)."""
    scored = []
    for _ in range(count):
        events = cycle_events(extender, cluster, rng, profile="default", mode="names")
        scored_record = events[-1].prioritize
        best = scored_record.nodes[scored_record.final.index(max(scored_record.final))]
        meta = events[-1]
        extender.bind(
            "default",
            msgspec.json.encode(
                {"PodName": meta.pod_name, "PodNamespace": meta.pod_namespace, "PodUID": meta.pod_uid, "Node": best}
            ),
        )
        scored.append(events[-1])
    return scored


@pytest.mark.parametrize("without_metrics", [0, 5])
def test_final_and_traffic_scores_are_stored_as_what_they_are_computed_from(without_metrics):
    """The engine's final scores are the weighted mean of the plugins' scores, NetworkTraffic's are 100 − x·100/max of
    the raw and herd bytes: a body keeps neither column, only where a value differs (a node without metrics)."""
    extender, cluster = demo_extender(300, without_metrics=without_metrics, herd=True)
    scored = bound_cycles(extender, cluster, random.Random(8), 6)
    assert any(p.herd_bytes for p in scored[-1].prioritize.plugins), "the herd estimate is on"
    for event in scored:
        assert_read_back(event)
        body = prioritize_body(event)
        assert (body.final.kind, body.final.data) == (WEIGHTED_MEAN, b"")
        traffic = body.scores[[p.name for p in event.prioritize.plugins].index("NetworkTraffic")]
        assert traffic.kind == INVERSE_SHARE
        residuals = np.frombuffer(traffic.data, dtype="<i8") if traffic.data else np.zeros(0)
        unmeasured = event.prioritize.plugins[[p.name for p in event.prioritize.plugins].index("NetworkTraffic")]
        assert np.count_nonzero(residuals) == unmeasured.raw.count(None), "one residual per node without metrics"


@pytest.mark.parametrize(
    ("change", "kind"),
    [
        (lambda final: [round(v + 0.0001, 4) if i % 9 == 0 else v for i, v in enumerate(final)], WEIGHTED_MEAN),
        (lambda final: [v + 0.00001 for v in final], TEXT),  # off the 4-decimal grid
        (lambda final: [v + 3.0 for v in final], TEXT),  # every value another
        (lambda final: [-0.0, *final[1:]], TEXT),
        (lambda final: [int(v) for v in final], TEXT),
        (lambda final: [math.nan, *final[1:]], GENERIC),
    ],
)
def test_final_scores_that_are_not_the_mean_of_the_scores_read_back_exactly(change, kind):
    """A record from another version, or altered: whatever the final scores hold, they come back as recorded."""
    extender, cluster = demo_extender(120, herd=True)
    event = bound_cycles(extender, cluster, random.Random(9), 2)[-1]
    scored = event.prioritize
    final = change(scored.final)
    changed = msgspec.structs.replace(event, prioritize=msgspec.structs.replace(scored, final=final))
    record, _answer = body_decode(
        body_encode(changed), filter_records=lambda _event_id: None, shared_parts=lambda _digest: None
    )
    # Compared as MessagePack: the same types, bits, NaN and -0.0 (NaN is never equal to itself in a list).
    assert msgspec.msgpack.encode(record_builtins(record)) == msgspec.msgpack.encode(record_of(changed))
    assert prioritize_body(changed).final.kind == kind


def test_traffic_scores_that_are_not_computed_from_the_raw_figures_read_back_exactly():
    extender, cluster = demo_extender(120, herd=True)
    event = bound_cycles(extender, cluster, random.Random(10), 2)[-1]
    scored = event.prioritize
    plugins = [
        msgspec.structs.replace(p, scores=[round(s / 3, 4) for s in p.scores]) if p.name == "NetworkTraffic" else p
        for p in scored.plugins
    ]
    changed = msgspec.structs.replace(event, prioritize=msgspec.structs.replace(scored, plugins=plugins))
    assert_read_back(changed)
    body = prioritize_body(changed)
    assert body.scores[[p.name for p in plugins].index("NetworkTraffic")].kind == TEXT
