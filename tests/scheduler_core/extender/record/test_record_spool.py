"""The spool's binary form carries every field of a ``VerbEvent``, at the positions records already spooled use."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from scheduler_core.extender.protocol.wire import encode_host_priorities
from scheduler_core.extender.record import spool_codec
from scheduler_core.extender.record.compression import compressor, decompressor
from scheduler_core.extender.record.spool_codec import (
    SPOOL_BINARY,
    SPOOL_BINARY_DERIVED,
    SPOOL_DERIVING,
    SPOOL_FIELDS,
    SPOOL_FRAMED,
    answer_of,
    decode_event,
    encode_event,
)
from scheduler_core.extender.record.structs import (
    BindRecord,
    FilterRecord,
    PluginScores,
    PreemptRecord,
    PrioritizeRecord,
    VerbEvent,
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
    "profile_version": "0123456789ab",
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
APPENDED_SINCE = ("answer_derived", "profile_version")
"""Fields appended after ``SPOOLED_LAYOUT``, in order: each new one goes at the end."""


def unpacked(data: bytes) -> tuple[list[Any], list[bytes]]:
    """A framed record's rest (its fields by position, frames by number) and its frames, decompressed."""
    assert data.startswith((SPOOL_FRAMED, SPOOL_DERIVING))
    rest, *frames = msgspec.msgpack.decode(data[len(SPOOL_FRAMED) :])
    return msgspec.msgpack.decode(decompressor().decompress(rest)), [decompressor().decompress(f) for f in frames]


def test_every_field_of_a_verb_event_survives_the_binary_spool_form() -> None:
    names = [f.name for f in msgspec.structs.fields(VerbEvent)]
    assert sorted(EVERY_FIELD) == sorted(names), "a VerbEvent field has no non-default value in this test"
    event = VerbEvent(**EVERY_FIELD)
    defaults = VerbEvent(event_id="", verb="", profile="", started_at=0.0, duration_ms=0.0, http_status=0)
    for name in names:
        assert getattr(event, name) != getattr(defaults, name), name

    data = encode_event(event)
    rest, frames = unpacked(data)
    assert rest[SPOOL_FIELDS.index("response")] == 0, "a derived answer is left out"
    assert not any(bytes(event.response) in frame for frame in frames)
    back = decode_event(data)
    for name in names:
        assert getattr(back, name) == getattr(event, name), name
        assert type(getattr(back, name)) is type(getattr(event, name)), name
    assert back == event


def test_the_spool_form_keeps_the_positions_of_records_already_spooled() -> None:
    assert SPOOL_FIELDS[: len(SPOOLED_LAYOUT)] == SPOOLED_LAYOUT
    assert (*SPOOLED_LAYOUT, *APPENDED_SINCE) == SPOOL_FIELDS
    # A record as the previous, hand-written form wrote it: the fields' values by position, the answer as bytes.
    # Spooled before profile versions were kept: it reads back with none.
    event = VerbEvent(**{**EVERY_FIELD, "answer_derived": False, "profile_version": ""})
    values = [getattr(event, name) for name in SPOOLED_LAYOUT]
    values[SPOOLED_LAYOUT.index("response")] = bytes(event.response)
    data = SPOOL_BINARY + compressor(-1).compress(msgspec.msgpack.encode(values))
    assert decode_event(data) == event

    def positions(record: bytes) -> list[Any]:
        return list(msgspec.msgpack.decode(decompressor().decompress(record[len(SPOOL_BINARY) :])))

    # The framed form keeps the same positions, a frame's number where the field was.
    rest, _ = unpacked(encode_event(event))
    for position, value in enumerate(positions(data)):
        if SPOOLED_LAYOUT[position] not in ("filter", "prioritize", "response"):
            assert rest[position] == value, SPOOLED_LAYOUT[position]


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
    rest, frames = unpacked(data)
    assert frames[rest[SPOOL_FIELDS.index("response")] - 1] == bytes(event.response)
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


def framed(rest: list[Any], frames: list[Any]) -> bytes:
    compress = compressor(-1).compress
    packed = [compress(msgspec.msgpack.encode(rest)), *(compress(msgspec.msgpack.encode(f)) for f in frames)]
    return SPOOL_FRAMED + msgspec.msgpack.encode(packed)


def test_a_framed_node_list_of_the_wrong_type_or_a_missing_frame_is_refused_when_read() -> None:
    rest, _ = unpacked(encode_event(VerbEvent(**{**EVERY_FIELD, "prioritize": None, "answer_derived": False})))
    rest[SPOOL_FIELDS.index("filter")] = {"nodes": 1, "passed": 2}
    rest[SPOOL_FIELDS.index("response")] = 0
    assert decode_event(framed(rest, [["a"], ["a"]])).filter == FilterRecord(nodes=["a"], passed=["a"])
    with pytest.raises(msgspec.DecodeError):
        decode_event(framed(rest, [["a", 7], ["a"]]))
    with pytest.raises(msgspec.DecodeError, match="part 2 but has 1 parts"):
        decode_event(framed(rest, [["a"]]))
    with pytest.raises(msgspec.DecodeError, match="cannot be decompressed"):
        decode_event(SPOOL_FRAMED + msgspec.msgpack.encode([b"not zstd"]))


def _engine_like(final_off: float = 0.0) -> VerbEvent:
    """A prioritize whose NetworkTraffic scores are the inverse share of its raw bytes plus herd bytes and whose final
    scores are the weighted mean, rounded to 4 decimals, as the engine records them (``final_off`` added to the
    last final score)."""
    raw = [3.0e6, 1.5e6, None, 7.25e6]
    herd = [0.0, 2.0e6, 0.0, 0.0]
    # 100 − x·100/max(x) with x = raw + herd, max 7.25e6; the node without a figure scores 0 by the formula.
    traffic = [round(100 - 3.0e6 * 100 / 7.25e6, 4), round(100 - 3.5e6 * 100 / 7.25e6, 4), 0.0, 0.0]
    resources = [20.0, 40.0, 60.0, 80.0]
    final = [round((t * 3 + r * 1) / 4, 4) for t, r in zip(traffic, resources, strict=True)]
    final[-1] += final_off
    scored = PrioritizeRecord(
        nodes=["a", "b", "c", "d"],
        plugins=[
            PluginScores("NetworkTraffic", 3, traffic, raw=raw, herd_bytes=herd),
            PluginScores("NodeResourceFitByCR", 1, resources),
        ],
        final=final,
        extender=[round(f / 10) for f in final],
    )
    answer = msgspec.Raw(encode_host_priorities(scored.nodes, scored.extender))
    fields = {"verb": "prioritize", "filter": None, "prioritize": scored, "bind": None, "preempt": None}
    return VerbEvent(**{**EVERY_FIELD, **fields, "response": answer})


def test_scores_the_record_gives_back_are_left_out_of_the_spool_and_written_again_on_reading() -> None:
    event = _engine_like()
    assert encode_event(event).startswith(SPOOL_FRAMED), "written only when asked for (the rollback rule)"
    data = encode_event(event, deriving=True)
    assert data.startswith(SPOOL_DERIVING)
    rest, frames = unpacked(data)
    spooled = rest[SPOOL_FIELDS.index("prioritize")]
    traffic, resources = spooled["plugins"]
    assert spooled["final"] is None, "the final scores are the weighted mean: left out"
    assert traffic["scores"] == spool_codec.DERIVED_FRAME, "NetworkTraffic's scores are the inverse share: left out"
    assert resources["scores"] != spool_codec.DERIVED_FRAME, "scores without raw figures are spooled"
    assert not any(msgspec.msgpack.decode(f) == event.prioritize.plugins[0].scores for f in frames)
    back = decode_event(data)
    assert back == event
    assert msgspec.msgpack.encode(back.prioritize.final) == msgspec.msgpack.encode(event.prioritize.final)
    assert all(type(v) is float for v in back.prioritize.plugins[0].scores)


def test_a_final_score_off_the_formula_is_spooled_as_it_is() -> None:
    event = _engine_like(final_off=0.0001)
    rest, _ = unpacked(encode_event(event, deriving=True))
    assert rest[SPOOL_FIELDS.index("prioritize")]["final"] == event.prioritize.final
    assert decode_event(encode_event(event, deriving=True)) == event


def test_a_derived_column_in_the_earlier_framed_form_is_refused() -> None:
    # SLR\x03 never left a column out: a frame numbered as derived there is damage, not a derivation.
    event = _engine_like()
    rest, packed = unpacked(encode_event(event, deriving=True))
    frames = [msgspec.msgpack.decode(frame) for frame in packed]
    rest[SPOOL_FIELDS.index("prioritize")]["final"] = event.prioritize.final
    assert decode_event(SPOOL_DERIVING + framed(rest, frames)[len(SPOOL_FRAMED) :]) == event
    with pytest.raises(msgspec.DecodeError, match="part -1"):
        decode_event(framed(rest, frames))


def test_frames_shared_between_calls_are_compressed_once(monkeypatch) -> None:
    # The verbs give calls with the same candidate list and verdicts the same list objects (and the same answer).
    compressed: list[int] = []

    class Counting:
        def __init__(self, level: int) -> None:
            self.inner = compressor(level)

        def compress(self, data: Any) -> bytes:
            compressed.append(len(data))
            return self.inner.compress(data)

    monkeypatch.setattr(spool_codec, "compressor", Counting)
    nodes = [f"node-{i:04d}" for i in range(1000)]
    filter_record = FilterRecord(nodes=nodes, passed=nodes[:900], traffic_bytes=[float(i) for i in range(1000)])
    answer = msgspec.Raw(msgspec.json.encode({"NodeNames": nodes[:900]}))
    events = [
        VerbEvent(
            event_id=f"e-{i}",
            verb="filter",
            profile="p",
            started_at=1.0,
            duration_ms=1.0,
            http_status=200,
            pod_name=f"pod-{i}",
            filter=filter_record,
            response=answer,
        )
        for i in range(3)
    ]
    first = encode_event(events[0])
    assert len(compressed) == 5, "the rest, nodes, passed, traffic and the answer"
    later = [encode_event(event) for event in events[1:]]
    assert len(compressed) == 7, "then only each record's own rest"
    assert [decode_event(data) for data in (first, *later)] == events
    # The same content in new objects reads back the same (and is compressed again, once).
    copy = msgspec.structs.replace(events[0], filter=FilterRecord(nodes=list(nodes), passed=list(nodes[:900])))
    assert decode_event(encode_event(copy)) == copy
