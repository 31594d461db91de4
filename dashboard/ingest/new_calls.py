"""New calls: spool records decoded, sanitized and turned into what the database stores, in arrival order.

Each record becomes a :class:`NewCall` as soon as it is read (its stored body, or JSON, and the few fields the fold
into cycles needs) and its decoded form is dropped: a batch then holds the stored bytes of its calls, not the
objects every per-node record decodes to. The dedicated ingester builds them in processes of their own
(``dashboard.ingest.call_builders``) and they travel back pickled, hence the compact ``__getstate__``s here.

A record the verb spooled in ``SLR\\x04`` form is stored as it was spooled (``call_body.body_as_spooled``): nothing
is transcoded. Any other per-node record is transcoded; then a prioritize body refers to its cycle's filter call
(``dashboard.storage.call_body.FilterReference``) instead of repeating the filter's per-node data. It is built
against the latest filter of the same pod this process saw (:data:`recent_filters`); the fold
(``dashboard.ingest.cycles``) checks that this is the cycle's filter and builds it again
(:meth:`NewCall.referring_to`) when it is not.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import msgspec
from django.conf import settings

from dashboard.ingest.sanitize import sanitize_for_postgres
from dashboard.models import VerbCall
from dashboard.storage.call_body import (
    BODY_AS_SPOOLED,
    EncodedBody,
    FilterReference,
    NulInRecordError,
    body_as_spooled,
    body_encode_with_references,
    filter_reference,
)
from dashboard.storage.call_record import record_builtins
from dashboard.storage.packed_json import pack
from dashboard.storage.shared_parts import SharedPartBytes
from scheduler_core.extender.lru import LRU
from scheduler_core.extender.record.spool_codec import answer_of, decode_event
from scheduler_core.extender.record.structs import (
    BIND,
    FILTER,
    PRIORITIZE,
    BindRecord,
    CallRecord,
    FilterRecord,
    PrioritizeRecord,
    VerbEvent,
)
from scheduler_core.extender.scoring.answer import preference_tied


def when(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


def record_of(event: VerbEvent) -> dict[str, Any]:
    """The record of ``event`` as the JSON column stores it (a call without a body)."""
    return record_builtins(CallRecord.of_event(event))


NAME_LISTS_KEPT = 64
"""Distinct node lists a process receiving new calls keeps (a candidate list repeats across pods)."""
_name_lists: LRU[str, list[str]] = LRU(NAME_LISTS_KEPT)


class _JoinedNames(str):
    """Node names joined by NUL, as new calls carry a list between processes (``call_builders``)."""


def _names_out(names: Sequence[str]) -> object:
    """``names`` for the trip to another process: one string to pickle instead of one object per node."""
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
    """What a call contributes to its cycle's columns (``cycle_summary.summarize``), from its event or its stored
    record."""

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
    profile_version: str = ""
    """The version of the profile that answered (the cycle's ``profile_version``); empty: recorded before versions."""

    def __getstate__(self) -> tuple[Any, ...]:  # to the ingester from its builder process
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
        summary.profile_version = event.profile_version
        summary._fold(event.filter, event.prioritize, event.bind)
        return summary

    @classmethod
    def of_call(cls, call: VerbCall, record: CallRecord) -> Summary:
        """A stored call (a cycle this batch adds a call to): from its record, as before batching."""
        at = call.started_at
        summary = cls(
            call.verb,
            at,
            at + timedelta(milliseconds=call.duration_ms),
            call.duration_ms,
            call.http_status,
            call.error,
            record.node_mode,
            bool(record_builtins(record)),
        )
        summary.profile_version = call.profile_version
        summary._fold(record.filter, record.prioritize, record.bind)
        return summary

    def _fold(self, filtered: FilterRecord | None, scored: PrioritizeRecord | None, bound: BindRecord | None) -> None:
        """The summary columns a call's record gives, whether it comes from an event or from a stored call."""
        if filtered is not None:
            self.nodes, self.ages = filtered.nodes, (filtered.metric_age_seconds,)
            self._passed(filtered.passed)
        elif scored is not None:
            self.nodes = scored.nodes
            if scored.nodes:
                best = scored.final.index(max(scored.final))
                self.preferred = scored.nodes[best]
                self.answer_tie = preference_tied(scored.final, scored.extender)
            self.ages = (None, *(p.metric_age_seconds for p in scored.plugins))
        elif bound is not None:
            self.bind_node = bound.node

    def _passed(self, passed: Sequence[str]) -> None:
        self.passed_count = len(passed)
        self.only_passed = passed[0] if len(passed) == 1 else ""


EXPLAINED_VERBS = frozenset({FILTER, PRIORITIZE, BIND})
"""The verbs whose records an ``Explained`` Event's summary reads."""


def body_of(
    event: VerbEvent, reference: FilterReference | None, spooled: bytes | None = None
) -> tuple[VerbEvent, EncodedBody | None]:
    """The binary body of a per-node record (``dashboard.storage.call_body``), None when the call is stored as JSON;
    with a filter's reference (what a prioritize of its cycle may refer to) and shared part.

    ``spooled``: the spool bytes ``event`` was decoded from, unchanged (no NUL, no name cut, no error added), to be
    stored as they are when their form allows; then with neither reference nor shared part.

    The event comes back with NUL replaced when a string of its record held one (``sanitize_for_postgres`` found
    the strings written to columns; the body's encoder finds the rest).
    """
    if event.filter is None and event.prioritize is None and event.preempt is None:
        return event, None
    if spooled is not None and (body := body_as_spooled(spooled)) is not None:
        return event, EncodedBody(body, None, None)
    try:
        return event, body_encode_with_references(event, filter_reference=reference)
    except NulInRecordError:
        event = sanitize_for_postgres(event, msgspec.json.encode(event))  # NUL → ␀ everywhere, as for a JSON record
        return event, body_encode_with_references(event, filter_reference=reference)


class RecentFilters:
    """The latest filter reference of each pod this process saw, for the bodies of the pods' prioritize calls.

    Bounded: the pods being scheduled at a time, with room to spare; a prioritize of a pod forgotten is stored whole.
    """

    LIMIT = 1024

    def __init__(self) -> None:
        self._references: OrderedDict[str, FilterReference] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, pod_uid: str) -> FilterReference | None:
        with self._lock:
            return self._references.get(pod_uid)

    def put(self, pod_uid: str, reference: FilterReference | None) -> None:
        with self._lock:
            self._references.pop(pod_uid, None)
            if reference is not None:
                self._references[pod_uid] = reference
                while len(self._references) > self.LIMIT:
                    self._references.popitem(last=False)


recent_filters = RecentFilters()


@dataclass(slots=True)
class NewCall:
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
    failures: Mapping[str, Mapping[str, str]] | None = None
    """A filter's failed nodes → {plugin: reason} (node counts, ``node_tallies``): the record's own object, shared
    from call to call when the outcome repeats (the spool's reader hands the same one on), never mutated."""
    filter_reference: FilterReference | None = None
    """A filter's: what a later prioritize of its cycle may refer to."""
    refers_to: str = ""
    """A prioritize's: the filter call its body refers to ("" none)."""
    source: VerbEvent | bytes | None = None
    """A prioritize's event (or its spool bytes), to build it again against another filter. None for one built
    from a spool row: the ingester holds the row (``spool_ingest.with_row_sources``), nothing travels back for it."""
    shared_part: SharedPartBytes | None = None
    """A filter's shared part (``dashboard.storage.shared_parts``), stored with the first call that refers to it."""
    event: VerbEvent | None = None
    """The event as stored, while the pods' ``Explained`` Events are on, for its record (``record_of``) without
    decoding the body again; None once it has travelled from a builder process (its record is then decoded)."""

    def __getstate__(self) -> tuple[Any, ...]:  # to the ingester from its builder process
        # The failures go as they are: a batch's calls are pickled together, so a mapping that repeats from call to
        # call is written once and received as one object again. A filter's reference is as large as its per-node
        # data, and needed only when a prioritize of the batch referred to another filter: the fold makes it again
        # from the body then (``dashboard.ingest.cycles``), as for a stored filter.
        # The event would double what travels back; the Event's summary decodes the body instead.
        drop_reference = self.filter_reference is not None and self.body is not None
        return tuple(
            None if name == "event" or (drop_reference and name == "filter_reference") else getattr(self, name)
            for name in self.__slots__
        )

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        for name, value in zip(self.__slots__, state, strict=True):
            setattr(self, name, value)

    @classmethod
    def of(
        cls,
        event: VerbEvent,
        *,
        reference: FilterReference | None = None,
        source: bytes | None = None,
        spooled: bytes | None = None,
    ) -> NewCall:
        """The new call of ``event`` (already sanitized); a prioritize refers to ``reference`` when it can.
        ``spooled``: the spool bytes of an event that sanitizing left as it was (see :func:`body_of`)."""
        event, encoded = body_of(event, reference if event.prioritize is not None else None, spooled)
        body = encoded.body if encoded is not None else None
        at = when(event.started_at)
        call = cls(
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
        if settings.SCHEDLENS_POD_EVENTS and event.http_status == 200 and event.verb in EXPLAINED_VERBS:
            call.event = event
        if body is None:
            call.record_json = pack(record_of(event))
            call.response_json = pack(msgspec.json.decode(answer_of(event)))
        if event.filter is not None:
            call.failures = event.filter.failures
            call.shared_part = encoded.shared_part if encoded is not None else None
            if event.http_status == 200:
                call.filter_reference = (
                    encoded.filter_reference if encoded is not None else filter_reference(event.event_id, event.filter)
                )
        if event.prioritize is not None:
            call.refers_to = (
                reference.event_id if reference is not None and body is not None and not call.as_spooled else ""
            )
            call.source = source if source is not None else event
        return call

    @property
    def as_spooled(self) -> bool:
        """Stored as the verb spooled it: it refers to no other call, whatever its cycle."""
        return self.body is not None and self.body[0] == BODY_AS_SPOOLED

    def referring_to(self, reference: FilterReference | None) -> NewCall:
        """This prioritize built again, referring to ``reference`` (another filter) or to none."""
        source = self.source
        assert source is not None
        event = (
            sanitize_for_postgres(decode_event(source, derive_answer=False), source)
            if isinstance(source, bytes)
            else source
        )
        return NewCall.of(event, reference=reference, source=source if isinstance(source, bytes) else None)


def build_call(event: VerbEvent, source: bytes | None = None, spooled: bytes | None = None) -> NewCall:
    """The new call of ``event`` (sanitized), built in arrival order: a filter is remembered for its pod's
    prioritize. ``spooled``: as :meth:`NewCall.of`."""
    reference = recent_filters.get(event.pod_uid) if event.prioritize is not None and event.pod_uid else None
    call = NewCall.of(event, reference=reference, source=source, spooled=spooled)
    if event.filter is not None and event.pod_uid:
        recent_filters.put(event.pod_uid, call.filter_reference)
    return call
