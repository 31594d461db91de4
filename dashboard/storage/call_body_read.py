"""Reading a stored call body (``call_body`` says what each format holds): the record as the event carried it and
the answer, written again from what the body keeps.

Decoding never reads the database: the caller passes where a referenced filter call's record (``filter_records``)
and a shared part's bytes (``shared_parts``) are found.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from itertools import compress
from typing import Any, cast

import msgspec
import zstandard

from dashboard.storage.call_body import (
    ANSWER_PASSED,
    BODY_AS_SPOOLED,
    BODY_FORMATS_READ,
    BODY_LEVEL,
    TRANSCODED_FORMATS,
    Body,
    FilterBody,
    PrioritizeBody,
    passed_positions,
)
from dashboard.storage.columns import (
    FILTER_TRAFFIC,
    INVERSE_SHARE,
    SAME_AS_SCORES,
    WEIGHTED_MEAN,
    column_decode,
    extender_of,
    from_prediction,
)
from dashboard.storage.shared_parts import SharedFilterPart, SharedPartLookup, shared_part_decode
from scheduler_core.extender.record.compression import compressor, decompressor
from scheduler_core.extender.record.formulas import inverse_share, weighted_mean
from scheduler_core.extender.record.spool_codec import SPOOL_DERIVING, answer_of, decode_event
from scheduler_core.extender.record.structs import (
    CallRecord,
    FilterRecord,
    NodeMode,
    PreemptRecord,
    PrioritizeRecord,
    VerbEvent,
)

_json = msgspec.json.Encoder()
_body_encoder = msgspec.msgpack.Encoder()
_body_decoder = msgspec.msgpack.Decoder(Body)
_filter_record_decoder = msgspec.json.Decoder(FilterRecord)
_names_json_decoder = msgspec.json.Decoder(list[str])
_failures_json_decoder = msgspec.json.Decoder(dict[str, dict[str, str]])
_prioritize_record_decoder = msgspec.json.Decoder(PrioritizeRecord)
_preempt_record_decoder = msgspec.json.Decoder(PreemptRecord)


def as_spooled_event(body: bytes, *, derive_answer: bool = True) -> VerbEvent:
    """The event a body stored as spooled (format 3) holds; ``derive_answer=False`` leaves a derived answer out (a
    reader that never reads it). Raises ``ValueError`` (or the codec's errors) for a body of another format, or one
    whose record is not of a form format 3 stores or has no per-node record."""
    if body[:1] != bytes([BODY_AS_SPOOLED]):
        raise ValueError(f"not a body of format {BODY_AS_SPOOLED}")
    spooled = body[1:]
    if not spooled.startswith(SPOOL_DERIVING):
        raise ValueError(f"a body of format {BODY_AS_SPOOLED} holds no spooled record of a form it stores")
    event = decode_event(spooled, derive_answer=derive_answer)
    if event.filter is None and event.prioritize is None and event.preempt is None:
        raise ValueError("a spooled body holds no per-node record")
    return event


def _as_spooled_decode(body: bytes) -> tuple[CallRecord, Any]:
    event = as_spooled_event(body)
    return CallRecord.of_event(event), msgspec.json.decode(answer_of(event))


FilterRecordLookup = Callable[[str], "FilterRecord | None"]
"""Event id of a filter call → its record (as :func:`body_decode` gives it), or None when it is not found."""


def _filter_record_decode(
    body: FilterBody, shared_parts: SharedPartLookup
) -> tuple[FilterRecord, SharedFilterPart | None]:
    """A filter body's record, with its shared part's lists put back (and the part, for its answer)."""
    record = _filter_record_decoder.decode(body.record)
    shared: SharedFilterPart | None = None
    if body.shared_part:
        shared = shared_part_decode(body.shared_part, shared_parts)
        record.nodes = _names_json_decoder.decode(shared.nodes)
        if shared.failures:
            record.failures = _failures_json_decoder.decode(shared.failures)
        if shared.traffic is not None:
            record.traffic_bytes = column_decode(shared.traffic)
    if body.passed_derived:
        failures = record.failures
        record.passed = [n for n in record.nodes if n not in failures]
    if body.unresolvable is not None:
        record.unresolvable = list(compress(record.failures, body.unresolvable))
    if body.traffic is not None:
        record.traffic_bytes = column_decode(body.traffic)
    return record, shared


def _prioritize_record_decode(body: PrioritizeBody, filter_records: FilterRecordLookup) -> PrioritizeRecord:
    record = _prioritize_record_decoder.decode(body.record)
    filter_record = filter_records(body.filter_event) if body.filter_event else None
    if body.filter_event and filter_record is None:
        raise ValueError(f"the filter call {body.filter_event} this record refers to is not stored")
    if body.nodes_passed:
        record.nodes = list(filter_record.passed) if filter_record is not None else []
    traffic: list[Any] | None = None
    for plugin, scores, raw, herd in zip(record.plugins, body.scores, body.raws, body.herd, strict=True):
        # Raw figures and herd bytes first: a plugin's scores may be predicted from them (``INVERSE_SHARE``).
        if raw is not None and raw.kind == FILTER_TRAFFIC:
            if traffic is None:
                assert filter_record is not None
                nodes, failures = filter_record.nodes, filter_record.failures
                traffic = list(compress(filter_record.traffic_bytes, passed_positions(nodes, failures)))
            plugin.raw = list(traffic)
        elif raw is not None and raw.kind != SAME_AS_SCORES:
            plugin.raw = column_decode(raw)
        if herd is not None:
            plugin.herd_bytes = column_decode(herd)
        if scores.kind == INVERSE_SHARE:
            plugin.scores = from_prediction(inverse_share(plugin.raw, plugin.herd_bytes), scores.data).tolist()
        else:
            plugin.scores = column_decode(scores)
        if raw is not None and raw.kind == SAME_AS_SCORES:
            plugin.raw = list(plugin.scores)
    if body.final.kind == WEIGHTED_MEAN:
        predicted = weighted_mean(record.plugins, len(record.nodes))
        record.final = from_prediction(predicted, body.final.data).tolist()
    else:
        record.final = column_decode(body.final)
    record.extender = extender_of(record.final) if body.extender is None else list(body.extender)
    return record


def body_decode(
    body: bytes, *, filter_records: FilterRecordLookup, shared_parts: SharedPartLookup
) -> tuple[CallRecord, Any]:
    """The record (as the event carried it) and the answer, from a stored body.

    ``filter_records``: where the filter call a prioritize body refers to is found; ``shared_parts``: where the
    shared part a filter body names is found."""
    if not body or body[0] not in BODY_FORMATS_READ:
        raise ValueError(f"unknown body format {body[:1]!r}")
    if body[0] == BODY_AS_SPOOLED:
        return _as_spooled_decode(body)
    decoded = _body_decoder.decode(decompressor().decompress(body[1:]))
    answer: Any
    record = CallRecord(node_mode=node_mode_of(decoded.node_mode), error_path=decoded.error_path)
    if decoded.filter is not None:
        record.filter, shared = _filter_record_decode(decoded.filter, shared_parts)
        text = shared.answer if decoded.filter.answer_shared and shared is not None else decoded.filter.answer
        if decoded.filter.answer_passed:
            text = ANSWER_PASSED + _json.encode(record.filter.passed) + text
        answer = msgspec.json.decode(text)
    elif decoded.prioritize is not None:
        scored = record.prioritize = _prioritize_record_decode(decoded.prioritize, filter_records)
        if decoded.prioritize.answer is None:
            answer = [{"Host": h, "Score": s} for h, s in zip(scored.nodes, scored.extender, strict=True)]
        else:
            answer = msgspec.json.decode(decoded.prioritize.answer)
    else:
        if decoded.record not in (b"", b"{}"):  # a body holds no other record than a preempt's
            record.preempt = _preempt_record_decoder.decode(decoded.record)
        answer = msgspec.json.decode(decoded.answer)
    return record, answer


def node_mode_of(text: str) -> NodeMode:
    if text not in ("names", "nodes", ""):
        raise ValueError(f"unknown node mode {text[:20]!r}")
    return cast(NodeMode, text)


def body_referring_to(body: bytes, event_ids: Mapping[str, str]) -> bytes:
    """``body`` with its reference to a filter call (a prioritize's) renamed by ``event_ids`` (old → new); other
    bodies as they are. For copies of whole cycles under new event ids (``benchmarks/dashboard/history.py``), never for
    recorded ones."""
    if body[0] not in TRANSCODED_FORMATS:  # a body as spooled refers to nothing
        return body
    decoded = _body_decoder.decode(decompressor().decompress(body[1:]))
    if decoded.prioritize is None or decoded.prioritize.filter_event not in event_ids:
        return body
    decoded.prioritize.filter_event = event_ids[decoded.prioritize.filter_event]
    return body[:1] + compressor(BODY_LEVEL).compress(_body_encoder.encode(decoded))


def body_read(
    body: bytes, *, filter_records: FilterRecordLookup, shared_parts: SharedPartLookup
) -> tuple[CallRecord, Any]:
    """:func:`body_decode`, or, for a damaged body, a record saying so (as ``packed_json.unpack`` does)."""
    try:
        return body_decode(body, filter_records=filter_records, shared_parts=shared_parts)
    except (ValueError, TypeError, KeyError, zstandard.ZstdError, msgspec.DecodeError, msgspec.ValidationError) as exc:
        return CallRecord(unreadable=f"stored body cannot be read: {exc}"), None
