"""Spool records made ready for the database: decoded, made storable, their bodies built, in arrival order.

Each record is *prepared* as soon as it is read (:class:`Prepared`: its stored body and the few fields the fold
needs) and its decoded form dropped, so a batch holds kilobytes per call instead of the ~300 KB of objects a
1000-node record decodes to (allocating those afresh for a whole batch tripled the time decoding took). A
prioritize body that refers to its cycle's filter call (``dashboard.packing.FilterFacts``) is prepared against
the latest filter of the same pod this process saw (:data:`recent_filters`); the fold
(``dashboard.services.cycles``) checks that this is the cycle's filter and prepares it again when it is not.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import msgspec
import zstandard

from dashboard.models import VerbCall
from dashboard.packing import (
    EncodedBody,
    FilterFacts,
    NulInRecordError,
    Part,
    body_encode_with_facts,
    filter_facts,
    pack,
)
from dashboard.services.storable import event_storable
from dashboard.spool import SpoolRow
from scheduler_core.answer import preference_tied
from scheduler_core.lru import LRU
from scheduler_core.record import VerbEvent, answer_of, decode_event

log = logging.getLogger(__name__)


def when(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


def record_of(event: VerbEvent) -> dict[str, Any]:
    part = event.filter or event.prioritize or event.bind or event.preempt
    record: dict[str, Any] = msgspec.to_builtins(part) if part is not None else {}
    if event.error_path:
        record["error_path"] = event.error_path
    if event.node_mode:
        record["node_mode"] = event.node_mode
    return record


NAME_LISTS_KEPT = 64
"""Distinct node lists a process receiving prepared calls keeps (a candidate list repeats across pods)."""
_name_lists: LRU[str, list[str]] = LRU(NAME_LISTS_KEPT)


class _JoinedNames(str):
    """Node names joined by NUL, as prepared calls carry a list between processes (``preparing_processes``)."""


def _names_out(names: Sequence[str]) -> object:
    """``names`` for the trip to another process: one string instead of one object per node (pickled ~5× faster)."""
    if type(names) is list and names:
        try:
            joined = "\x00".join(names)
        except TypeError:
            return names
        if joined.count("\x00") == len(names) - 1:  # no name holds the separator: splitting gives them back
            return _JoinedNames(joined)
    return names


def _names_in(value: Any) -> Any:
    """The list :func:`_names_out` sent; a list received before is that same list object (never mutated)."""
    if type(value) is not _JoinedNames:
        return value
    return _name_lists.get_or_make(str(value), partial(value.split, "\x00"))


def _state_out(obj: Any, names_field: str) -> tuple[Any, ...]:
    """A slotted object's fields in slot order, its ``names_field`` list as :func:`_names_out` sends it."""
    return tuple(
        _names_out(getattr(obj, name)) if name == names_field else getattr(obj, name) for name in obj.__slots__
    )


def _state_in(obj: Any, state: tuple[Any, ...], names_field: str) -> None:
    for name, value in zip(obj.__slots__, state, strict=True):
        setattr(obj, name, _names_in(value) if name == names_field else value)


@dataclass(slots=True)
class Summary:
    """What a call contributes to its cycle's columns (``_summarize``), from its event or its stored record."""

    verb: str
    started_at: datetime
    finished_at: datetime
    duration_ms: float
    http_status: int
    error: str
    node_mode: str
    has_record: bool
    nodes: Sequence[str] = ()
    passed_count: int = 0
    only_passed: str = ""
    """The passed node when exactly one passed."""
    preferred: str = ""
    answer_tie: bool = False
    """A prioritize's: our preferred node answered the same 0..10 as a lower-scored node (``preference_tied``)."""
    ages: Sequence[float | None] = ()
    bind_node: str = ""

    def __getstate__(self) -> tuple[Any, ...]:  # to the ingester from its preparing process
        return _state_out(self, "nodes")

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        _state_in(self, state, "nodes")

    @classmethod
    def of_event(cls, event: VerbEvent, at: datetime) -> Summary:
        summary = cls(
            event.verb,
            at,
            at + timedelta(milliseconds=event.duration_ms),
            event.duration_ms,
            event.http_status,
            event.error,
            event.node_mode,
            bool(
                event.filter or event.prioritize or event.bind or event.preempt or event.error_path or event.node_mode
            ),
        )
        if (part := event.filter) is not None:
            summary.nodes, summary.ages = part.nodes, (part.metric_age_seconds,)
            summary._passed(part.passed)
        elif (scored := event.prioritize) is not None:
            summary.nodes = scored.nodes
            if scored.nodes:
                best = scored.final.index(max(scored.final))
                summary.preferred = scored.nodes[best]
                summary.answer_tie = preference_tied(scored.final, scored.extender)
            summary.ages = (None, *(p.metric_age_seconds for p in scored.plugins))
        elif event.bind is not None:
            summary.bind_node = event.bind.node
        return summary

    @classmethod
    def of_call(cls, call: VerbCall) -> Summary:
        """A stored call (a cycle this batch adds a call to): from its record, as before batching."""
        record = call.record
        at = call.started_at
        summary = cls(
            call.verb,
            at,
            at + timedelta(milliseconds=call.duration_ms),
            call.duration_ms,
            call.http_status,
            call.error,
            record.get("node_mode", ""),
            bool(record),
        )
        if call.verb == "filter":
            summary.nodes, summary.ages = record.get("nodes", []), (record.get("metric_age_seconds"),)
            summary._passed(record.get("passed", []))
        elif call.verb == "prioritize":
            summary.nodes = record.get("nodes", [])
            if summary.nodes:
                scores = record["final"]
                best = scores.index(max(scores))
                summary.preferred = summary.nodes[best]
                summary.answer_tie = preference_tied(scores, record.get("extender") or [])
            plugins = record.get("plugins", [])
            summary.ages = (record.get("metric_age_seconds"), *(p.get("metric_age_seconds") for p in plugins))
        elif call.verb == "bind":
            summary.bind_node = record.get("node", "")
        return summary

    def _passed(self, passed: Sequence[str]) -> None:
        self.passed_count = len(passed)
        self.only_passed = passed[0] if len(passed) == 1 else ""


STORE_BODIES = True
"""False stores every record as JSON, as before migration 0004 (``benchmarks/record_path.py`` compares both)."""


def body_of(event: VerbEvent, facts: FilterFacts | None) -> tuple[VerbEvent, EncodedBody | None]:
    """The binary body of a per-node record (``dashboard.packing``), None when the call is stored as JSON; with a
    filter's facts (what a prioritize of its cycle may refer to) and shared part.

    The event comes back with NUL replaced when a string of its record held one (``event_storable`` found the
    strings written to columns; the body's encoder finds the rest).
    """
    if not STORE_BODIES or (event.filter is None and event.prioritize is None and event.preempt is None):
        return event, None
    try:
        return event, body_encode_with_facts(event, filter_facts=facts)
    except NulInRecordError:
        event = event_storable(event, msgspec.json.encode(event))  # NUL → ␀ everywhere, as for a JSON record
        return event, body_encode_with_facts(event, filter_facts=facts)


class RecentFilters:
    """The latest filter of each pod this process's ingester saw (~1000 pods, ~15 KB each), for prioritize bodies."""

    LIMIT = 1024

    def __init__(self) -> None:
        self._facts: OrderedDict[str, FilterFacts] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, pod_uid: str) -> FilterFacts | None:
        with self._lock:
            return self._facts.get(pod_uid)

    def put(self, pod_uid: str, facts: FilterFacts | None) -> None:
        with self._lock:
            self._facts.pop(pod_uid, None)
            if facts is not None:
                self._facts[pod_uid] = facts
                while len(self._facts) > self.LIMIT:
                    self._facts.popitem(last=False)


recent_filters = RecentFilters()


@dataclass(slots=True)
class Prepared:
    """One call ready for the database: its columns, its body (or JSON), what its cycle's summary needs."""

    event_id: str
    verb: str
    profile: str
    started_at: float
    at: datetime
    duration_ms: float
    http_status: int
    pod_namespace: str
    pod_name: str
    pod_uid: str
    error: str
    server: str
    summary: Summary
    body: bytes | None
    record_json: Any = None
    response_json: Any = None
    failed: Sequence[str] = ()
    """A filter's failed nodes (node counts)."""
    facts: FilterFacts | None = None
    """A filter's: what a later prioritize of its cycle may refer to."""
    refers_to: str = ""
    """A prioritize's: the filter call its body refers to ("" none)."""
    source: VerbEvent | bytes | None = None
    """A prioritize's event (or its spool bytes), to prepare it again against another filter. None for one prepared
    from a spool row: the ingester holds the row (:func:`with_rows`), nothing travels back for it."""
    part: Part | None = None
    """A filter's shared part (``dashboard.packing``), stored with the first call that refers to it."""

    def __getstate__(self) -> tuple[Any, ...]:  # to the ingester from its preparing process
        state = _state_out(self, "failed")
        if self.facts is not None and self.body is not None:
            # ~15 KB a filter, needed only when a prioritize of the batch referred to another filter: the writer
            # makes them again from the body then (``dashboard.services.cycles``), as for a stored filter.
            state = tuple(None if name == "facts" else value for name, value in zip(self.__slots__, state, strict=True))
        return state

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        _state_in(self, state, "failed")

    @classmethod
    def of(cls, event: VerbEvent, *, facts: FilterFacts | None = None, source: bytes | None = None) -> Prepared:
        """``event`` (already storable) prepared; a prioritize refers to ``facts`` when it can."""
        event, encoded = body_of(event, facts if event.prioritize is not None else None)
        body = encoded.body if encoded is not None else None
        at = when(event.started_at)
        prepared = cls(
            event.event_id,
            event.verb,
            event.profile,
            event.started_at,
            at,
            event.duration_ms,
            event.http_status,
            event.pod_namespace,
            event.pod_name,
            event.pod_uid,
            event.error,
            event.server,
            Summary.of_event(event, at),
            body,
        )
        if body is None:
            prepared.record_json = pack(record_of(event))
            prepared.response_json = pack(msgspec.json.decode(answer_of(event)))
        if event.filter is not None:
            prepared.failed = list(event.filter.failures)
            prepared.part = encoded.part if encoded is not None else None
            if event.http_status == 200:
                prepared.facts = encoded.facts if encoded is not None else filter_facts(event.event_id, event.filter)
        if event.prioritize is not None:
            prepared.refers_to = facts.event_id if facts is not None and body is not None else ""
            prepared.source = source if source is not None else event
        return prepared

    def against(self, facts: FilterFacts | None) -> Prepared:
        """This prioritize prepared again, referring to ``facts`` (another filter) or to none."""
        source = self.source
        assert source is not None
        event = (
            event_storable(decode_event(source, derive_answer=False), source) if isinstance(source, bytes) else source
        )
        return Prepared.of(event, facts=facts, source=source if isinstance(source, bytes) else None)


def prepare(event: VerbEvent, source: bytes | None = None) -> Prepared:
    """Prepare ``event`` (storable) in arrival order: a filter is remembered for its pod's prioritize."""
    facts = recent_filters.get(event.pod_uid) if event.prioritize is not None and event.pod_uid else None
    prepared = Prepared.of(event, facts=facts, source=source)
    if event.filter is not None and event.pod_uid:
        recent_filters.put(event.pod_uid, prepared.facts)
    return prepared


ANSWER_NOT_CONFIRMED = (
    "answer not confirmed: schedlens stopped, or lost the connection, before the answer was written; "
    "kube-scheduler saw this call fail"
)


def unconfirmed(event: VerbEvent) -> VerbEvent:
    error = f"{ANSWER_NOT_CONFIRMED}; {event.error}" if event.error else ANSWER_NOT_CONFIRMED
    return msgspec.structs.replace(event, error=error)


def settled(rows: list[SpoolRow], grace_seconds: float) -> list[Prepared | None]:
    """The leading rows ready for the database, prepared (None: not a verb record); stops at a row whose answer is
    still being written. A prioritize's source is left to its row (:func:`with_rows`)."""
    ready: list[Prepared | None] = []
    now = time.time()
    for row in rows:
        try:
            event = event_storable(decode_event(row.data, derive_answer=False), row.data)
        except (msgspec.DecodeError, zstandard.ZstdError) as exc:
            log.error("spool row %s is not a verb record (%s); set aside in the spool's rejected table", row.id, exc)
            ready.append(None)
            continue
        if not row.answered:
            if now - event.started_at < grace_seconds:
                break  # the answer is (most likely) being written right now; the next pass takes it
            log.warning("the answer recorded in spool row %s (%s) was never confirmed written", row.id, event.verb)
            event = unconfirmed(event)
            ready.append(prepare(event))  # its source is the event: the row's bytes lack the error
            continue
        prepared = prepare(event)
        prepared.source = None  # a prioritize's: its row holds it, and ``with_rows`` puts the row's bytes back
        ready.append(prepared)
    return ready


def with_rows(ready: list[tuple[SpoolRow, Prepared | None]]) -> list[tuple[SpoolRow, Prepared | None]]:
    """``ready`` (rows with what :func:`settled` made of them) with each prioritize's source back: its row's bytes."""
    for row, prepared in ready:
        if prepared is not None and prepared.source is None and prepared.verb == "prioritize":
            prepared.source = row.data
    return ready
