"""Reads of recorded cycles for the dashboard, the audit API, pod Events and the commands.

The history pages (keyset pages ordered by the ``cycle_newest`` index (-started_at, -id): "the next ``limit`` rows
before this (started_at, id)", which PostgreSQL answers with an index range scan at any depth), and one place for
what every reader must agree on: which calls a cycle has, in which order, and how a cycle is explained
(the same ``scheduler_core.explanation.explain`` with the same traffic window and staleness limit,
:func:`cycle_traffic_terms`, everywhere a person reads an explanation).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
from django.db.models import Prefetch, Q, QuerySet
from django.utils import timezone

from dashboard.models import SchedulingCycle, VerbCall, shared_part_data
from dashboard.selectors.profile_versions import cycle_profile_version
from dashboard.storage.call_record import call_read
from scheduler_core.explanation.explain import Explanation, explain, explain_summary
from scheduler_core.explanation.recompute import Mismatch, recompute_explanation
from scheduler_core.extender.record.structs import BIND, FILTER, PRIORITIZE, CallRecord, CycleRecords, FilterRecord
from scheduler_core.extender.scoring.traffic_terms import TrafficTerms, terms_of


def cycle_list() -> QuerySet[SchedulingCycle]:
    # candidate_nodes is kilobytes per 1000-node cycle and only ever filtered on.
    return SchedulingCycle.objects.defer("candidate_nodes")


_NO_REFERENCES: dict[str, Any] = {"filter_records": lambda _event_id: None, "shared_parts": shared_part_data}
"""The lookups of a call whose body refers to no other call (a filter's)."""

NEWEST_FIRST_WINDOWS = (timedelta(days=1), timedelta(days=8))
"""How far back :func:`newest_first_page` looks before it reads the whole history: a day partition, then a week's."""


def newest_first_page(rows: QuerySet[SchedulingCycle], *, count: int, below: datetime | None) -> list[SchedulingCycle]:
    """The first ``count`` of ``rows`` (ordered newest first; those after a cursor at ``below``, if any), read from
    the newest day first, then the newest week, then the rest.

    On PostgreSQL's day partitions, one query over the whole history must find a first match in every partition
    before it yields the newest: a filter that most old days lack reads them all. When the window holds ``count``
    rows, no row outside it can come before them, so the page is the same as the whole history's.
    """
    top = below if below is not None else timezone.now()
    for window in NEWEST_FIRST_WINDOWS:
        page = list(rows.filter(started_at__gte=top - window)[:count])
        if len(page) >= count:
            return page
    return list(rows[:count])


def cycle_list_with_calls() -> QuerySet[SchedulingCycle]:
    """Cycles with their calls prefetched in the order they were made."""
    calls = Prefetch("calls", queryset=VerbCall.objects.order_by("started_at", "id"))
    return cycle_list().prefetch_related(calls)


@dataclass(frozen=True, slots=True)
class CallRead:
    """One stored call with its record and answer decoded, once."""

    call: VerbCall
    recorded: CallRecord
    answer: Any
    """The JSON answered to kube-scheduler."""


@dataclass(frozen=True, slots=True)
class CycleRead:
    """A cycle and its calls in the order they were made, decoded, and the records it is explained by."""

    cycle: SchedulingCycle
    calls: list[CallRead]
    records: CycleRecords


def call_reads(*, calls: Sequence[VerbCall]) -> list[CallRead]:
    """``calls`` with their records and answers decoded, in the same order.

    A prioritize call stored as a reference to its cycle's filter call finds that call among ``calls`` (decoded
    first); one not among them (a call read alone) is read from the database here, in one query for all of them.
    """
    decoded: dict[int, tuple[CallRecord, Any]] = {}
    filters: dict[str, FilterRecord | None] = {}
    for call in calls:
        if call.verb == FILTER:
            record, answer = call_read(call.verb, call.body, call.record_json, call.response_json, **_NO_REFERENCES)
            decoded[id(call)] = record, answer
            filters[call.event_id] = record.filter
    others = [call for call in calls if id(call) not in decoded]

    def filter_records(event_id: str) -> FilterRecord | None:
        if event_id not in filters:  # not among ``calls``: another cycle's, or ``calls`` is one call
            filters[event_id] = call_filter_get(event_id=event_id)
        return filters[event_id]

    for call in others:
        decoded[id(call)] = call_read(
            call.verb,
            call.body,
            call.record_json,
            call.response_json,
            filter_records=filter_records,
            shared_parts=shared_part_data,
        )
    return [CallRead(call, *decoded[id(call)]) for call in calls]


def call_filter_get(*, event_id: str) -> FilterRecord | None:
    """The record of the stored filter call ``event_id`` (None: not stored, or it has none)."""
    found = VerbCall.objects.filter(event_id=event_id, verb=FILTER).first()
    return call_read(FILTER, found.body, found.record_json, None, **_NO_REFERENCES)[0].filter if found else None


def cycle_records(*, reads: Sequence[CallRead]) -> CycleRecords:
    """The records a cycle is explained and replayed by: its newest answered call's of each verb."""
    newest: dict[str, CallRecord] = {}
    for read in reads:
        if read.call.http_status == 200:
            newest[read.call.verb] = read.recorded
    return CycleRecords.of_calls(newest.get(FILTER), newest.get(PRIORITIZE), newest.get(BIND))


def cycle_read(*, cycle: SchedulingCycle, calls: Sequence[VerbCall] | None = None) -> CycleRead:
    """``cycle`` decoded: its ``calls`` (in order), else its calls as prefetched (``cycle_list_with_calls``) or read
    here."""
    reads = call_reads(calls=list(cycle.calls.all()) if calls is None else calls)
    return CycleRead(cycle, reads, cycle_records(reads=reads))


def cycle_get_read(*, cycle_id: int) -> CycleRead | None:
    """One cycle and its calls in order, decoded."""
    cycle = SchedulingCycle.objects.filter(pk=cycle_id).first()
    if cycle is None:
        return None
    return cycle_read(cycle=cycle, calls=list(cycle.calls.order_by("started_at", "id")))


def call_get_read(*, call: VerbCall) -> CallRead:
    """One call decoded alone (its filter call read when its body refers to one)."""
    return call_reads(calls=[call])[0]


def cycle_traffic_terms(*, profile: str, profile_version: str) -> TrafficTerms:
    """The traffic window and staleness limit a cycle of ``profile`` is explained with, for every screen and export.

    The record carries its profile's version, not its args: they are that version's, as stored, and say so. A cycle
    recorded before versions were kept, or whose version is not stored, leaves them unknown with the reason, never
    today's file or a default.
    """
    recorded = cycle_profile_version(profile=profile, digest=profile_version)
    if recorded.description is None:
        return TrafficTerms(unknown=f"not recorded; {recorded.missing}", profile=profile)
    return terms_of(profile, recorded.description.get("pluginConfig", {}), version=profile_version)


def cycle_explanation(*, cycle: SchedulingCycle, read: CycleRead | None = None) -> Explanation:
    """Explain a cycle from its calls (prefetched by ``cycle_list_with_calls``), or from its ``read``."""
    records = (read if read is not None else cycle_read(cycle=cycle)).records
    return records_explanation(
        records=records,
        chosen_node=cycle.chosen_node,
        error=cycle.error,
        profile=cycle.profile,
        profile_version=cycle.profile_version,
    )


def records_explanation(
    *, records: CycleRecords, chosen_node: str, error: str, profile: str, profile_version: str
) -> Explanation:
    """Explain a cycle from its records (as ``cycle_records`` collects them), under its recorded profile version."""
    return explain(
        filter_record=records.filter,
        prioritize_record=records.prioritize,
        chosen_node=chosen_node,
        error=error,
        traffic_terms=cycle_traffic_terms(profile=profile, profile_version=profile_version),
    )


def records_summary(*, records: CycleRecords, chosen_node: str, error: str, terms: TrafficTerms) -> str:
    """``records_explanation(...).summary``, the same text, without explaining every node (the pod's Event);
    ``terms``: the cycle's (``cycle_traffic_terms``), read where the cycle was, not in the Event's thread."""
    return explain_summary(
        filter_record=records.filter,
        prioritize_record=records.prioritize,
        chosen_node=chosen_node,
        error=error,
        traffic_window_minutes=terms.window_minutes,
    )


def cycle_explanations_recomputed(
    *, started_after: datetime | None = None, limit: int | None = None, chunk_size: int = 200
) -> Iterator[tuple[SchedulingCycle, list[Mismatch]]]:
    """Each cycle (oldest first) with what its explanation, as the audit API serves it, fails to add up to."""
    cycles = cycle_list_with_calls().order_by("started_at", "id")
    if started_after is not None:
        cycles = cycles.filter(started_at__gte=started_after)
    if limit is not None:
        cycles = cycles[:limit]
    for cycle in cycles.iterator(chunk_size=chunk_size):
        served = msgspec.json.decode(msgspec.json.encode(cycle_explanation(cycle=cycle)))  # the JSON an auditor reads
        yield cycle, recompute_explanation(served)


def cycle_latest_for_pod(*, namespace: str = "", name: str = "", pod_uid: str = "") -> SchedulingCycle | None:
    """The newest cycle of a pod, by UID or by namespace and name, with its calls."""
    cycles = cycle_list_with_calls()
    cycles = cycles.filter(pod_uid=pod_uid) if pod_uid else cycles.filter(pod_namespace=namespace, pod_name=name)
    return cycles.order_by("-started_at", "-id").first()


def cycle_export_queryset() -> QuerySet[SchedulingCycle]:
    return cycle_list().order_by("started_at", "id")


# --- the history pages ---------------------------------------------------------------------------------

PAGE_SIZE = 50
CYCLE_FIELDS = (
    "id",
    "started_at",
    "finished_at",
    "pod_namespace",
    "pod_name",
    "pod_uid",
    "profile",
    "node_mode",
    "outcome",
    "chosen_node",
    "preferred_node",
    "answer_tie",
    "candidate_count",
    "feasible_count",
    "filter_ms",
    "prioritize_ms",
    "bind_ms",
    "preempt_ms",
    "metric_age_seconds",
    "error",
    "profile_version",
)
"""A cycle's columns as a reader is shown them, in this order: the audit API's cycle, the exports' columns."""
HISTORY_COLUMNS = tuple(f for f in CYCLE_FIELDS if f not in {"finished_at", "pod_uid", "preempt_ms", "profile_version"})
"""What the history pages read of each cycle: the columns they show."""


class BadCursorError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Cursor:
    """A position in the history: the (started_at, id) of the last row seen."""

    started_at: datetime
    id: int

    def encode(self) -> str:
        micros = int(self.started_at.timestamp() * 1_000_000)
        return f"{micros}_{self.id}"

    @classmethod
    def decode(cls, text: str) -> Cursor:
        micros, sep, ident = text.partition("_")
        if not sep or not micros.lstrip("-").isdigit() or not ident.isdigit():
            raise BadCursorError(f"not a history cursor: {text[:40]!r}")
        return cls(datetime.fromtimestamp(int(micros) / 1_000_000, tz=UTC), int(ident))


@dataclass(frozen=True, slots=True)
class HistoryPage:
    rows: list[SchedulingCycle]
    next_cursor: Cursor | None
    """Where the next (older) page starts; ``None`` on the last page."""
    newest_id: int
    """The highest id on the page: polling asks for rows inserted after it."""


def cycle_history_page(
    *, queryset: QuerySet[SchedulingCycle], before: Cursor | None, limit: int = PAGE_SIZE
) -> HistoryPage:
    """One page of ``queryset`` (already filtered), newest first, strictly older than ``before``."""
    rows = queryset.only(*HISTORY_COLUMNS).order_by("-started_at", "-id")
    if before is not None:
        # The redundant started_at <= bound lets the planner turn the OR into one index range.
        rows = rows.filter(
            Q(started_at__lt=before.started_at) | Q(started_at=before.started_at, id__lt=before.id),
            started_at__lte=before.started_at,
        )
    found = newest_first_page(rows, count=limit + 1, below=before.started_at if before is not None else None)
    page, more = found[:limit], len(found) > limit
    last = page[-1] if page else None
    return HistoryPage(
        rows=page,
        next_cursor=Cursor(last.started_at, last.id) if more and last is not None else None,
        newest_id=max((r.id for r in page), default=0),
    )


def cycle_history_newer(
    *, queryset: QuerySet[SchedulingCycle], after_id: int, limit: int = PAGE_SIZE
) -> list[SchedulingCycle]:
    """Rows recorded after ``after_id`` (ids grow with insertion, so late-ingested cycles count too)."""
    return list(queryset.only(*HISTORY_COLUMNS).filter(id__gt=after_id).order_by("-started_at", "-id")[:limit])


def call_filter_record(*, body: bytes | memoryview | None, record_json: Any) -> FilterRecord | None:
    """A filter call's record from its stored columns (a filter's body refers to no other call); None: it has none
    or it cannot be read."""
    return call_read(FILTER, body, record_json, None, **_NO_REFERENCES)[0].filter


def cycle_newest_started_at() -> datetime | None:
    return SchedulingCycle.objects.order_by("-started_at", "-id").values_list("started_at", flat=True).first()


RECENT_CALLS_WINDOW = 20_000
"""Health reads only the newest calls by id: a verb that is never called (preempt) must not make the page
walk the whole table looking for its latest 500."""


def call_list_recent() -> QuerySet[VerbCall]:
    """The newest ``RECENT_CALLS_WINDOW`` calls by id."""
    newest = VerbCall.objects.order_by("-id").values_list("id", flat=True).first() or 0
    return VerbCall.objects.filter(id__gt=newest - RECENT_CALLS_WINDOW)
