"""The spool's binary form carries every field of a ``VerbEvent``, at the positions records already spooled use."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from scheduler_core.compression import compressor, decompressor
from scheduler_core.record import (
    SPOOL_BINARY,
    SPOOL_BINARY_DERIVED,
    SPOOL_FIELDS,
    BindRecord,
    FilterRecord,
    PluginScores,
    PreemptRecord,
    PrioritizeRecord,
    VerbEvent,
    answer_of,
    decode_event,
    encode_event,
)

EVERY_FIELD: dict[str, Any] = {
    "event_id": "e-1",
    "verb": "filter",
    "profile": "gpu-aware",
    "started_at": 1_800_000_000.25,
    "duration_ms": 3.5,
    "http_status": 400,
    "pod_namespace": "ns",
    "pod_name": "pod",
    "pod_uid": "uid-1",
    "pod_resource_version": "42",
    "node_mode": "nodes",
    "error": "refused",
    "error_path": "$.Pod",
    "filter": FilterRecord(
        nodes=["a", "b"],
        passed=["a"],
        failures={"b": {"P": "why"}},
        details={"b": {"P": "1 MB/s"}},
        unresolvable=["b"],
        traffic_bytes=[1e6, None],
        metric_age_seconds=2.0,
        metric_note="stale",
    ),
    "prioritize": PrioritizeRecord(
        nodes=["a"],
        plugins=[PluginScores("P", 2, [50.0], raw=[1e6], herd_bytes=[2.0], notes={"a": "n"}, applicable=False)],
        final=[50.0],
        extender=[5],
    ),
    "bind": BindRecord(node="a", detail="bound", api_status=201, simulated=True),
    "preempt": PreemptRecord(candidates=["a"], kept=["a"], dropped={"b": "why"}),
    "response": msgspec.Raw(b'[{"Host":"a","Score":5}]'),  # the prioritize part's hosts and scores: derived
    "server": "host:1",
    "answer_derived": True,
}
"""A value for every field of ``VerbEvent``, none of them its default."""

# The layout of records spooled by every version so far: only appending a field (with a default) keeps them readable.
SPOOLED_LAYOUT = (
    "event_id",
    "verb",
    "profile",
    "started_at",
    "duration_ms",
    "http_status",
    "pod_namespace",
    "pod_name",
    "pod_uid",
    "pod_resource_version",
    "node_mode",
    "error",
    "error_path",
    "filter",
    "prioritize",
    "bind",
    "preempt",
    "response",
    "server",
)


def test_every_field_of_a_verb_event_survives_the_binary_spool_form() -> None:
    names = [f.name for f in msgspec.structs.fields(VerbEvent)]
    assert sorted(EVERY_FIELD) == sorted(names), "a VerbEvent field has no non-default value in this test"
    event = VerbEvent(**EVERY_FIELD)
    defaults = VerbEvent(event_id="", verb="", profile="", started_at=0.0, duration_ms=0.0, http_status=0)
    for name in names:
        assert getattr(event, name) != getattr(defaults, name), name

    data = encode_event(event)
    assert data.startswith(SPOOL_BINARY_DERIVED)
    assert bytes(event.response) not in decompressor().decompress(data[len(SPOOL_BINARY_DERIVED) :])
    back = decode_event(data)
    for name in names:
        assert getattr(back, name) == getattr(event, name), name
        assert type(getattr(back, name)) is type(getattr(event, name)), name
    assert back == event


def test_the_spool_form_keeps_the_positions_of_records_already_spooled() -> None:
    assert SPOOL_FIELDS[: len(SPOOLED_LAYOUT)] == SPOOLED_LAYOUT
    # A record as the previous, hand-written form wrote it: the fields' values by position, the answer as bytes.
    event = VerbEvent(**{**EVERY_FIELD, "answer_derived": False})
    values = [getattr(event, name) for name in SPOOLED_LAYOUT]
    values[SPOOLED_LAYOUT.index("response")] = bytes(event.response)
    data = SPOOL_BINARY + compressor(-1).compress(msgspec.msgpack.encode(values))
    assert decode_event(data) == event

    def positions(record: bytes) -> list[Any]:
        return list(msgspec.msgpack.decode(decompressor().decompress(record[len(SPOOL_BINARY) :])))

    assert positions(encode_event(event))[: len(SPOOLED_LAYOUT)] == positions(data)


@pytest.mark.parametrize("verb", ["bind", "refused"])
def test_a_call_without_a_per_node_record_stays_json(verb: str) -> None:
    fields = {**EVERY_FIELD, "filter": None, "prioritize": None, "preempt": None}
    if verb == "refused":
        fields["bind"] = None
    event = VerbEvent(**fields)
    data = encode_event(event)
    assert data.startswith(b"{")
    assert decode_event(data) == event


def test_an_answer_not_derived_from_the_record_is_spooled_as_it_was_sent() -> None:
    # A prioritize answered otherwise (not by the verb's own encoding) keeps its bytes in the spool.
    event = VerbEvent(**{**EVERY_FIELD, "answer_derived": False, "response": msgspec.Raw(b'[{"Host":"a","Score":7}]')})
    data = encode_event(event)
    assert data.startswith(SPOOL_BINARY)
    assert decode_event(data) == event


def test_a_record_without_its_answer_and_without_a_prioritize_part_is_refused() -> None:
    values = [EVERY_FIELD[name] for name in SPOOL_FIELDS]
    values[SPOOL_FIELDS.index("prioritize")] = None
    values[SPOOL_FIELDS.index("response")] = b""
    data = SPOOL_BINARY_DERIVED + compressor(-1).compress(msgspec.msgpack.encode(values))
    with pytest.raises(msgspec.DecodeError, match="no prioritize part"):
        decode_event(data)


def test_the_ingester_s_decoding_leaves_a_derived_answer_unwritten_until_asked() -> None:
    event = VerbEvent(**EVERY_FIELD)
    lazy = decode_event(encode_event(event), derive_answer=False)
    assert bytes(lazy.response) == b""
    assert answer_of(lazy) == bytes(event.response)
    assert msgspec.structs.replace(lazy, response=event.response) == event


def test_records_with_the_same_node_lists_read_back_equal_and_share_one_decoded_object() -> None:
    # The ingester's reader decodes a repeated candidate list (and a repeated outcome) once.
    first = VerbEvent(**{**EVERY_FIELD, "event_id": "e-1"})
    second = VerbEvent(**{**EVERY_FIELD, "event_id": "e-2", "pod_uid": "uid-2"})
    one, two = decode_event(encode_event(first)), decode_event(encode_event(second))
    assert one == first
    assert two == second
    assert one.filter is not None
    assert two.filter is not None
    assert one.filter.nodes is two.filter.nodes
    assert one.filter.failures is two.filter.failures
    assert one.prioritize is not None
    assert two.prioritize is not None
    assert one.prioritize.nodes is two.prioritize.nodes
    # An empty list is never shared: it is the one value someone might fill.
    empty = decode_event(encode_event(VerbEvent(**{**EVERY_FIELD, "filter": FilterRecord(nodes=[], passed=[])})))
    again = decode_event(encode_event(VerbEvent(**{**EVERY_FIELD, "filter": FilterRecord(nodes=[], passed=[])})))
    assert empty.filter is not None
    assert again.filter is not None
    assert empty.filter.nodes == []
    assert empty.filter.nodes is not again.filter.nodes


def test_a_node_list_of_the_wrong_type_is_refused_when_read() -> None:
    values = [EVERY_FIELD[name] for name in SPOOL_FIELDS]
    values[SPOOL_FIELDS.index("filter")] = {"nodes": ["a", 7], "passed": ["a"]}
    values[SPOOL_FIELDS.index("response")] = b"{}"
    data = SPOOL_BINARY + compressor(-1).compress(msgspec.msgpack.encode(values))
    with pytest.raises(msgspec.DecodeError):
        decode_event(data)
