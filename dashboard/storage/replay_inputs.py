"""A cycle's stored calls (``VerbCall.body``) read straight into a history replay's columns
(:class:`scheduler_core.history_replay.recorded_cycles.CycleColumns`), without a Python object per node where it can
be helped.

:func:`dashboard.storage.call_body_read.body_decode` rebuilds the whole record as the API serves it: every per-node
list, every plugin's figures and details. A replay reads a few of them (the candidates, the filter's failures,
passed nodes and traffic figures; each score plugin's scores, ``NetworkTraffic``'s raw figures and herd bytes), so
this module decodes only those of a transcoded body (formats 1 and 2), into numpy arrays, and keeps what many calls
share (a body stored as spooled, format 3, is read the general way, as the API reads it):

- a shared part (a snapshot's candidates, failures and traffic figures, named by its digest) is read, checked
  against its digest and decoded once, then kept (:class:`CycleReader`, the latest :data:`PARTS_KEPT`);
- the slim JSON records are decoded into structs that name only the fields read (the others, such as a filter's
  per-node ``details``, are skipped by the decoder without being built);
- ``NetworkTraffic``'s recorded scores are not decoded: a replay computes that plugin's scores again from the raw
  figures and herd bytes (:func:`scheduler_core.history_replay.fast_replay.replay_columns`).

Anything else (a call stored as JSON before migration 0004, a prioritize referring to another filter call, a
column holding non-finite values, nodes unknown to the node cache, …) is read the general way,
:func:`~dashboard.storage.call_body_read.body_read` then
:func:`~scheduler_core.history_replay.recorded_cycles.recorded_cycle_from_records`,
so every cycle reads the same either way (``tests/dashboard/replays/test_replay_inputs.py`` checks both against each
other).

Pure functions of bytes and values: where a shared part's bytes are found is the caller's to say.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import msgspec
import numpy as np
import zstandard

from dashboard.storage.call_body import TRANSCODED_FORMATS, Body
from dashboard.storage.call_body_read import as_spooled_event
from dashboard.storage.call_record import call_read
from dashboard.storage.columns import (
    F64_SHUFFLED,
    FILTER_TRAFFIC,
    SAME_AS_SCORES,
    TEXT,
    Column,
)
from dashboard.storage.shared_parts import SharedPartLookup, shared_part_decode
from scheduler_core.extender.lru import LRU
from scheduler_core.extender.record.compression import decompressor
from scheduler_core.extender.record.structs import (
    FILTER,
    NODE_CACHE,
    PRIORITIZE,
    CallRecord,
    CycleRecords,
    FilterRecord,
)
from scheduler_core.extender.scoring.plugins.traffic import NetworkTraffic
from scheduler_core.history_replay.recorded_cycles import (
    CycleColumns,
    CycleShape,
    PluginColumns,
    RecordedCycle,
    byte_counts,
    recorded_cycle_from_records,
)

PARTS_KEPT = 64
"""Decoded shared parts a reader keeps (by digest): one per snapshot and kind of pod in the stretch replayed."""

Call = tuple[str, int, str, "bytes | memoryview | None", Any]
"""A stored call as a replay reads it: (verb, http_status, event_id, body, record_json)."""


@dataclass(slots=True)
class RecordedCycleRow:
    """A cycle's summary fields and its filter and prioritize calls (oldest first), as read from the database."""

    cycle_id: int
    started_at: datetime | None
    pod_namespace: str
    pod_name: str
    profile: str
    preferred_node: str
    chosen_node: str
    calls: Sequence[Call]
    profile_version: str = ""
    """The version of the profile the cycle was decided by; empty: recorded before versions were kept."""


class _SlimFilter(msgspec.Struct, gc=False):
    nodes: list[str] = msgspec.field(default_factory=list)
    passed: list[str] = msgspec.field(default_factory=list)
    failures: dict[str, dict[str, str]] = msgspec.field(default_factory=dict)


class _SlimPlugin(msgspec.Struct, gc=False):
    name: str
    weight: int
    applicable: bool = True


class _SlimPrioritize(msgspec.Struct, gc=False):
    plugins: list[_SlimPlugin]
    nodes: list[str] = msgspec.field(default_factory=list)
    answer_scale: str = "fixed"


_body_decoder = msgspec.msgpack.Decoder(Body)
_slim_filter = msgspec.json.Decoder(_SlimFilter)
_slim_prioritize = msgspec.json.Decoder(_SlimPrioritize)
_names = msgspec.json.Decoder(list[str])
_failures = msgspec.json.Decoder(dict[str, dict[str, str]])
_floats = msgspec.json.Decoder(list[float])
_numbers = msgspec.json.Decoder(list[float | None])


class _Unsupported(Exception):
    """Read this cycle the general way."""


@dataclass(slots=True)
class _FilterPart:
    """A filter's candidates, failures and traffic figures, as arrays (kept per shared part), and the shape of the
    cycles whose prioritize was sent its passed nodes."""

    nodes: list[str]
    failures: dict[str, dict[str, str]]
    failed_by: dict[str, np.ndarray]
    not_failed: np.ndarray
    traffic: np.ndarray | None
    index: dict[str, int]
    shapes: dict[Any, CycleShape] = field(default_factory=dict)

    def shape(self, recorded_passed: np.ndarray, positions: np.ndarray | None, key: Any) -> CycleShape:
        """The shape of a cycle of this filter part; kept by ``key`` when it is not None."""
        found = self.shapes.get(key) if key is not None else None
        if found is None:
            found = CycleShape(
                self.nodes,
                has_filter=True,
                failures=self.failures,
                failed_by=self.failed_by,
                recorded_passed=recorded_passed,
                filter_traffic=self.traffic,
                positions=positions,
            )
            if key is not None and len(self.shapes) < 16:
                self.shapes[key] = found
        return found


_MSGPACK_FLOAT64 = np.dtype([("tag", "u1"), ("value", ">f8")])
"""An item of a MessagePack array of floats: the float 64 tag, then the value big-endian."""
_msgpack = msgspec.msgpack.Encoder()


def _as_array(values: list[float]) -> np.ndarray:
    """Python floats as float64, through their MessagePack (one pass in C: each is its tag and 8 bytes), which is
    faster than numpy's conversion of a list; numpy's when the bytes are not that (never for floats)."""
    count = len(values)
    header = 1 if count < 16 else 3 if count < 1 << 16 else 5
    data = _msgpack.encode(values)
    if len(data) != header + 9 * count:
        return np.array(values, dtype=np.float64)
    items = np.frombuffer(data, dtype=_MSGPACK_FLOAT64, offset=header)
    if not (items["tag"] == 0xCB).all():
        return np.array(values, dtype=np.float64)
    return items["value"].astype(np.float64)


def _column(column: Column | None, count: int) -> np.ndarray | None:
    """A stored column as float64 (None → NaN), checked to hold ``count`` finite numbers; None for no column."""
    if column is None:
        return None
    kind = column.kind
    if kind == F64_SHUFFLED:
        data = column.data
        values = np.frombuffer(data, dtype=np.uint8).reshape(8, -1).T.copy().view(np.float64).ravel()
        if column.nones:
            values = np.insert(values, np.asarray(column.nones) - np.arange(len(column.nones)), np.nan)
    elif kind == TEXT:
        try:
            values = _as_array(_floats.decode(column.data))
        except msgspec.ValidationError:  # None among them
            values = np.array([np.nan if v is None else v for v in _numbers.decode(column.data)], dtype=np.float64)
    else:  # GENERIC (non-finite values), or a reference or prediction the caller resolves
        raise _Unsupported(f"column kind {kind}")
    if len(values) != count or np.isinf(values).any():
        raise _Unsupported("column not aligned, or not finite")
    return values


def _filter_part(nodes: list[str], failures: dict[str, dict[str, str]], traffic: np.ndarray | None) -> _FilterPart:
    count = len(nodes)
    index = {name: i for i, name in enumerate(nodes)}
    if len(index) != count:
        raise _Unsupported("duplicate candidates")
    failed_by: dict[str, np.ndarray] = {}
    failed_any = np.zeros(count, dtype=bool)
    for node, reasons in failures.items():
        if NODE_CACHE in reasons:
            raise _Unsupported("a node unknown to the node cache")
        position = index.get(node)
        for plugin in reasons:
            mask = failed_by.get(plugin)
            if mask is None:
                mask = failed_by[plugin] = np.zeros(count, dtype=bool)
            if position is not None:
                mask[position] = True
                failed_any[position] = True
    return _FilterPart(nodes, failures, failed_by, ~failed_any, traffic, index)


def _as_spooled(filter_call: Call | None, prioritize_call: Call | None) -> CycleRecords | None:
    """The records of a cycle whose calls are stored as spooled (body format 3), decoded without their answers,
    which a replay does not read; None when one of them is stored otherwise, or cannot be read (the general way
    says why)."""
    records: dict[str, Any] = {}
    for verb, call in ((FILTER, filter_call), (PRIORITIZE, prioritize_call)):
        if call is None:
            continue
        body = call[3]
        try:
            event = as_spooled_event(bytes(body) if body is not None else b"", derive_answer=False)
        except (ValueError, zstandard.ZstdError, msgspec.DecodeError):
            return None
        records[verb] = event.filter if verb == FILTER else event.prioritize
        if records[verb] is None:
            return None
    return CycleRecords(filter=records.get(FILTER), prioritize=records.get(PRIORITIZE))


class CycleReader:
    """Reads recorded cycles into :class:`~scheduler_core.history_replay.recorded_cycles.RecordedCycle`, keeping the
    shared parts it decoded (one reader per replay: it is not shared between threads)."""

    def __init__(self, parts_kept: int = PARTS_KEPT) -> None:
        self._parts: LRU[str, _FilterPart] = LRU(parts_kept)
        self.fast = 0
        """Cycles read the fast way (the rest: the general way, or skipped)."""

    def cycle(self, row: RecordedCycleRow, *, shared_parts: SharedPartLookup) -> RecordedCycle:
        """One cycle's recorded inputs: the newest answered (HTTP 200) filter and prioritize call, as the decision
        page and the API explain it."""
        latest: dict[str, Call] = {}
        for call in row.calls:
            if call[1] == 200 and call[0] in (FILTER, PRIORITIZE):
                latest[call[0]] = call
        started = row.started_at.isoformat() if row.started_at is not None else ""
        cycle = RecordedCycle(row.cycle_id, started, row.pod_namespace, row.pod_name, row.profile, row.preferred_node)
        filter_call, prioritize_call = latest.get(FILTER), latest.get(PRIORITIZE)
        if filter_call is None and prioritize_call is None:
            cycle.skipped = "no filter or prioritize record (the cycle never reached our plugins)"
            return cycle
        spooled = _as_spooled(filter_call, prioritize_call)
        if spooled is not None:  # the records as the verbs spooled them, in columns as the general way makes them
            found = recorded_cycle_from_records(
                row.cycle_id,
                spooled,
                started_at=started,
                pod_namespace=row.pod_namespace,
                pod_name=row.pod_name,
                profile=row.profile,
                preferred_node=row.preferred_node,
            )
            self.fast += found.columns is not None
            return found
        try:
            columns, weights = self._columns(filter_call, prioritize_call, shared_parts)
        except (
            _Unsupported,
            ValueError,
            TypeError,
            KeyError,
            IndexError,
            zstandard.ZstdError,
            msgspec.DecodeError,
            msgspec.ValidationError,
        ):
            return self._general(row, filter_call, prioritize_call, shared_parts)
        self.fast += 1
        cycle.columns, cycle.weights = columns, weights
        return cycle

    def _general(
        self,
        row: RecordedCycleRow,
        filter_call: Call | None,
        prioritize_call: Call | None,
        shared_parts: SharedPartLookup,
    ) -> RecordedCycle:
        def record(call: Call | None) -> CallRecord | None:
            if call is None:
                return None
            verb, _status, _event_id, body, stored = call
            return call_read(verb, body, stored, None, filter_records=filter_records, shared_parts=shared_parts)[0]

        def filter_records(event_id: str) -> FilterRecord | None:
            for call in row.calls:
                if call[2] == event_id:
                    found = record(call)
                    return found.filter if found is not None else None
            return None

        return recorded_cycle_from_records(
            row.cycle_id,
            CycleRecords.of_calls(record(filter_call), record(prioritize_call)),
            started_at=row.started_at.isoformat() if row.started_at is not None else "",
            pod_namespace=row.pod_namespace,
            pod_name=row.pod_name,
            profile=row.profile,
            preferred_node=row.preferred_node,
        )

    def _body(self, call: Call) -> Body:
        body = call[3]
        if body is None:
            raise _Unsupported("stored as JSON")
        data = bytes(body)
        if not data or data[0] not in TRANSCODED_FORMATS:
            raise _Unsupported("stored as spooled, or of an unknown format")
        decoded: Body = _body_decoder.decode(decompressor().decompress(data[1:]))
        return decoded

    def _part(self, digest: str, shared_parts: SharedPartLookup) -> _FilterPart:
        found = self._parts.get(digest)
        if found is None:
            shared = shared_part_decode(digest, shared_parts)
            nodes = _names.decode(shared.nodes)
            failures = _failures.decode(shared.failures) if shared.failures else {}
            traffic = _column(shared.traffic, len(nodes)) if shared.traffic is not None else None
            if not byte_counts(traffic):
                raise _Unsupported("traffic figures that are not byte counts")
            found = _filter_part(nodes, failures, traffic)
            self._parts.put(digest, found)
        return found

    def _columns(
        self, filter_call: Call | None, prioritize_call: Call | None, shared_parts: SharedPartLookup
    ) -> tuple[CycleColumns, list[tuple[str, int]] | None]:
        part: _FilterPart | None = None
        recorded_passed: np.ndarray | None = None
        passed_derived = False
        shared = False
        if filter_call is not None:
            body = self._body(filter_call).filter
            if body is None:
                raise _Unsupported("a filter call without a filter body")
            if body.shared_part:
                if body.traffic is not None:
                    raise _Unsupported("traffic both shared and in the body")
                part = self._part(body.shared_part, shared_parts)
                shared = True
            passed_derived = body.passed_derived
            if not shared or not passed_derived:  # else the body's record holds nothing the replay reads
                slim = _slim_filter.decode(body.record)
                if part is None:
                    traffic = _column(body.traffic, len(slim.nodes)) if body.traffic is not None else None
                    if not byte_counts(traffic):
                        raise _Unsupported("traffic figures that are not byte counts")
                    part = _filter_part(slim.nodes, slim.failures, traffic)
                if passed_derived:
                    recorded_passed = part.not_failed
                else:
                    recorded_passed = np.zeros(len(part.nodes), dtype=bool)
                    for node in slim.passed:
                        position = part.index.get(node)
                        if position is not None:
                            recorded_passed[position] = True
            elif part is not None:
                recorded_passed = part.not_failed
        if prioritize_call is None:
            if part is None or recorded_passed is None:
                raise _Unsupported("nothing recorded")
            return CycleColumns(
                part.shape(recorded_passed, None, "alone" if shared and passed_derived else None), []
            ), None
        body_p = self._body(prioritize_call).prioritize
        if body_p is None:
            raise _Unsupported("a prioritize call without a prioritize body")
        slim_p = _slim_prioritize.decode(body_p.record)
        if body_p.filter_event and (filter_call is None or body_p.filter_event != filter_call[2]):
            raise _Unsupported("refers to another filter call")
        if part is not None and recorded_passed is not None:
            if body_p.nodes_passed:
                if not passed_derived:
                    raise _Unsupported("nodes referred to without the filter's passed nodes")
                key: Any = "passed" if shared else None
                found = part.shapes.get(key) if key is not None else None
                shape = found or part.shape(recorded_passed, np.flatnonzero(part.not_failed), key)
            else:
                index = part.index
                try:
                    positions = np.fromiter((index[n] for n in slim_p.nodes), dtype=np.intp, count=len(slim_p.nodes))
                except KeyError:
                    raise _Unsupported("a prioritized node that was not a candidate") from None
                if len(set(positions.tolist())) != len(positions):
                    raise _Unsupported("a node sent twice")
                shape = part.shape(recorded_passed, positions, None)
        else:
            if body_p.nodes_passed:
                raise _Unsupported("nodes referred to without a filter call")
            only = _filter_part(slim_p.nodes, {}, None)
            shape = CycleShape(
                only.nodes,
                has_filter=False,
                failures={},
                failed_by={},
                recorded_passed=np.ones(len(only.nodes), dtype=bool),
                filter_traffic=None,
                positions=np.arange(len(only.nodes), dtype=np.intp),
            )
        assert shape.positions is not None
        sent = len(shape.positions)
        weights: list[tuple[str, int]] = []
        plugins: list[PluginColumns] = []
        columns = CycleColumns(shape, plugins, answer_scale=slim_p.answer_scale)
        traffic_plugins = 0
        for plugin, scores_column, raw_column, herd_column in zip(
            slim_p.plugins, body_p.scores, body_p.raws, body_p.herd, strict=True
        ):
            if plugin.name == NODE_CACHE:
                raise _Unsupported("nodes unknown to the node cache")
            weights.append((plugin.name, plugin.weight))
            is_traffic = plugin.name == NetworkTraffic.name
            scores: np.ndarray | None = None
            if not is_traffic or (raw_column is not None and raw_column.kind == SAME_AS_SCORES):
                scores = _column(scores_column, sent)
                if scores is None or np.isnan(scores).any():
                    raise _Unsupported("a score that is not a number")
            plugins.append(PluginColumns(plugin.name, plugin.weight, plugin.applicable, None if is_traffic else scores))
            if not is_traffic:
                continue
            traffic_plugins += 1
            if raw_column is not None:
                if raw_column.kind == FILTER_TRAFFIC:
                    if shape.filter_traffic is None or not body_p.nodes_passed:
                        raise _Unsupported("raw figures referred to without the filter's")
                    columns.raw_is_filter = True
                elif raw_column.kind == SAME_AS_SCORES:
                    columns.traffic_raw = scores
                else:
                    columns.traffic_raw = _column(raw_column, sent)
                if not byte_counts(columns.traffic_raw):
                    raise _Unsupported("raw figures that are not byte counts")
            if herd_column is not None:
                herd = _column(herd_column, sent)
                if herd is None or np.isnan(herd).any() or not byte_counts(herd):
                    raise _Unsupported("herd bytes that are not numbers")
                columns.herd = herd
        if traffic_plugins > 1:
            raise _Unsupported("NetworkTraffic twice")
        return columns, weights
