"""A stored call's record and answer as readers take them: :class:`scheduler_core.extender.record.structs.CallRecord`,
decoded once from a body (``call_body``) or from the JSON columns (calls stored without one), and the JSON the API
serves of it.

The only place besides the codecs that reads a record by key: the JSON column holds the dict the ingester wrote
(``dashboard.ingest.new_calls.record_of``).
"""

from __future__ import annotations

from typing import Any

import msgspec

from dashboard.storage.call_body_read import FilterRecordLookup, body_read, node_mode_of
from dashboard.storage.shared_parts import SharedPartLookup
from scheduler_core.extender.protocol.decode_errors import document_refusal
from scheduler_core.extender.record.structs import (
    BIND,
    FILTER,
    PREEMPT,
    PRIORITIZE,
    BindRecord,
    CallRecord,
    FilterRecord,
    PreemptRecord,
    PrioritizeRecord,
)

_json = msgspec.json.Encoder()

_RECORD_TYPES: dict[str, type[FilterRecord | PrioritizeRecord | BindRecord | PreemptRecord]] = {
    FILTER: FilterRecord,
    PRIORITIZE: PrioritizeRecord,
    BIND: BindRecord,
    PREEMPT: PreemptRecord,
}
_CALL_FIELDS = ("error_path", "node_mode")
"""The call's fields a stored record holds beside its verb's (``record_builtins``)."""
UNREADABLE = "$unreadable"
"""The key of the record ``packed_json.unpack`` and :func:`record_builtins` give for one that cannot be read."""


def record_from_json(verb: str, stored: Any) -> CallRecord:
    """A call's record from the JSON column (calls stored without a body): typed as its verb's record."""
    if not stored:
        return CallRecord()
    if UNREADABLE in stored:
        return CallRecord(unreadable=str(stored[UNREADABLE]))
    fields = {k: v for k, v in stored.items() if k not in _CALL_FIELDS}
    record = CallRecord(error_path=str(stored.get("error_path", "")))
    kind = _RECORD_TYPES.get(verb)
    try:
        record.node_mode = node_mode_of(stored.get("node_mode", ""))
        if kind is None:
            raise ValueError(f"no record type for verb {verb[:20]!r}")
        if fields:
            setattr(record, verb, msgspec.convert(fields, kind))
    except msgspec.ValidationError as exc:  # described in our words: msgspec's sentence changes between releases
        refusal = document_refusal(fields, kind, exc)
        reason = f"{refusal.message} (at {refusal.path})"
        return CallRecord(untyped=msgspec.Raw(_json.encode(stored)), untyped_reason=reason)
    except (ValueError, TypeError) as exc:  # raised above, in our words
        return CallRecord(untyped=msgspec.Raw(_json.encode(stored)), untyped_reason=str(exc))
    return record


def record_builtins(record: CallRecord) -> dict[str, Any]:
    """``record`` as the API and the exports serve it: the verb's record, with ``error_path`` and ``node_mode`` (as
    ``dashboard.ingest.new_calls.record_of`` stores it); one that cannot be read, as ``{"$unreadable": why}``."""
    if record.unreadable:
        return {UNREADABLE: record.unreadable}
    if record.untyped is not None:
        untyped: dict[str, Any] = msgspec.json.decode(record.untyped)
        return untyped
    verb_record = record.filter or record.prioritize or record.bind or record.preempt
    fields: dict[str, Any] = msgspec.to_builtins(verb_record) if verb_record is not None else {}
    if record.error_path:
        fields["error_path"] = record.error_path
    if record.node_mode:
        fields["node_mode"] = record.node_mode
    return fields


def call_read(
    verb: str,
    body: bytes | memoryview | None,
    record_json: Any,
    response_json: Any,
    *,
    filter_records: FilterRecordLookup,
    shared_parts: SharedPartLookup,
) -> tuple[CallRecord, Any]:
    """A call's record and answer from its stored columns (``VerbCall``'s: a body, or the two JSON columns);
    ``filter_records`` and ``shared_parts``: where a body's references are found (``body_read``'s)."""
    if body is not None:
        return body_read(bytes(body), filter_records=filter_records, shared_parts=shared_parts)
    return record_from_json(verb, record_json), response_json
