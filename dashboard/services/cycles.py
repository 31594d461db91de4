"""Writes of the scheduling record: fold verb events into cycles, and drain the spool into the database.

Calls of one cycle may be answered by different replicas and reach the database in any order, so cycles
are correlated here, through the database, never through a process's memory: a ``filter`` opens a cycle
for the pod's UID; ``prioritize``, ``bind`` and ``preempt`` join the newest cycle of that UID that lacks
them. A call that arrives before its ``filter`` opens a cycle the ``filter`` later joins.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, transaction

from dashboard.models import NodeMode, Outcome, SchedulingCycle, VerbCall
from dashboard.packing import pack
from dashboard.services.audit import audit_chain_open
from dashboard.services.storable import event_storable
from dashboard.spool import Spool, SpoolRow
from scheduler_core.record import VerbEvent, decode_event

log = logging.getLogger(__name__)

JOIN_WINDOW = timedelta(minutes=10)
"""How far after its filter a call may still belong to the same attempt (binds can queue behind others)."""
EARLY_CALL_WINDOW = timedelta(seconds=30)
"""How far a call seen before its filter (another replica's spool lagging) may precede nothing."""
CLOCK_SKEW = timedelta(seconds=2)


def _when(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


def _record_of(event: VerbEvent) -> dict[str, Any]:
    part = event.filter or event.prioritize or event.bind or event.preempt
    record: dict[str, Any] = msgspec.to_builtins(part) if part is not None else {}
    if event.error_path:
        record["error_path"] = event.error_path
    if event.node_mode:
        record["node_mode"] = event.node_mode
    return record


class _Batch:
    """The cycles one ingest batch may touch, in memory: one query finds them, one more their verbs.

    Matches exactly what a query per event would (``_find_cycle`` before batching): the same windows, the same
    exclusions, newest first with the id as tie-breaker; cycles opened earlier in the batch take part too, with
    ids above every stored one in the order they were opened.
    """

    def __init__(self, events: Sequence[VerbEvent]) -> None:
        self.by_uid: dict[str, list[SchedulingCycle]] = {}
        self.verbs: dict[int, set[str]] = {}
        self.calls: dict[int, list[VerbCall]] = {}
        """Calls per cycle (by ``id(cycle)``), loaded only for stored cycles the batch adds a call to."""
        self.order: dict[int, int] = {}
        """``id(cycle)`` → the id the query would order by (stored id, or above them for a new cycle)."""
        self._next_new = 1 << 62
        uids = sorted({e.pod_uid for e in events if e.pod_uid})
        if not uids:
            return
        earliest = _when(min(e.started_at for e in events)) - JOIN_WINDOW
        latest = _when(max(e.started_at for e in events)) + EARLY_CALL_WINDOW
        stored = list(
            SchedulingCycle.objects.filter(pod_uid__in=uids, started_at__gte=earliest, started_at__lte=latest)
        )
        verbs = VerbCall.objects.filter(cycle_id__in=[c.id for c in stored]).values_list("cycle_id", "verb")
        by_id: dict[int, set[str]] = {}
        for cycle_id, verb in verbs:
            by_id.setdefault(cycle_id, set()).add(verb)
        for cycle in stored:
            self._add(cycle, cycle.id, by_id.get(cycle.id, set()))

    def _add(self, cycle: SchedulingCycle, order: int, verbs: set[str]) -> None:
        self.by_uid.setdefault(cycle.pod_uid, []).append(cycle)
        self.verbs[id(cycle)] = verbs
        self.order[id(cycle)] = order

    def find(self, event: VerbEvent, at: datetime) -> SchedulingCycle | None:
        if not event.pod_uid:
            return None  # A refused request that named no pod stands alone.
        if event.verb == "filter":
            # Only a cycle opened just now by an early prioritize/bind, still without a filter, can take it.
            low, high = at - CLOCK_SKEW, at + EARLY_CALL_WINDOW
        else:
            low, high = at - JOIN_WINDOW, at + CLOCK_SKEW
        # A bound pod is not scheduled again: a later prioritize or preempt belongs to a new attempt.
        skip_bound = event.verb in {"prioritize", "preempt"}
        candidates = [
            c
            for c in self.by_uid.get(event.pod_uid, ())
            if low <= c.started_at <= high
            and not (skip_bound and c.outcome == Outcome.BOUND)
            and event.verb not in self.verbs[id(c)]
        ]
        if not candidates:
            return None
        return max(candidates, key=lambda c: (c.started_at, self.order[id(c)]))

    def open(self, cycle: SchedulingCycle) -> None:
        self._add(cycle, self._next_new, set())
        self._next_new += 1
        self.calls[id(cycle)] = []

    def calls_of(self, cycle: SchedulingCycle) -> list[VerbCall]:
        calls = self.calls.get(id(cycle))
        if calls is None:  # a stored cycle: its stored calls, once
            calls = self.calls[id(cycle)] = list(cycle.calls.all())
        return calls

    def join(self, cycle: SchedulingCycle, call: VerbCall) -> None:
        calls = self.calls_of(cycle)
        calls.append(call)
        # The order ``cycle.calls.all()`` would give (started_at, id): new calls get ids above the stored ones.
        calls.sort(key=lambda c: (c.started_at, c.pk if c.pk is not None else 1 << 62))
        self.verbs[id(cycle)].add(call.verb)


_SUMMARY_FIELDS = [
    "pod_namespace",
    "pod_name",
    "started_at",
    "finished_at",
    "filter_ms",
    "prioritize_ms",
    "bind_ms",
    "preempt_ms",
    "error",
    "node_mode",
    "metric_age_seconds",
    "candidate_count",
    "feasible_count",
    "candidate_nodes",
    "preferred_node",
    "outcome",
    "chosen_node",
]
"""What ``_summarize`` (and a late pod name) may change on a stored cycle."""


def _summarize(cycle: SchedulingCycle, calls: Sequence[VerbCall]) -> None:
    """Derive the cycle's columns from its calls; the calls are the source of truth."""
    by_verb = {call.verb: call for call in calls}
    first = min(calls, key=lambda c: c.started_at)
    cycle.started_at = first.started_at
    cycle.finished_at = max(c.started_at + timedelta(milliseconds=c.duration_ms) for c in calls)
    for verb in ("filter", "prioritize", "bind", "preempt"):
        setattr(cycle, f"{verb}_ms", by_verb[verb].duration_ms if verb in by_verb else None)
    errors = [f"{c.verb}: {c.error}" for c in calls if c.error]
    cycle.error = "; ".join(errors)

    filter_record = by_verb["filter"].record if "filter" in by_verb else None
    prioritize_record = by_verb["prioritize"].record if "prioritize" in by_verb else None
    modes = [c.record.get("node_mode", "") for c in calls if c.record.get("node_mode")]
    cycle.node_mode = modes[0] if modes else NodeMode.NONE
    ages = [r.get("metric_age_seconds") for r in (filter_record, prioritize_record) if r]
    ages += [p.get("metric_age_seconds") for p in (prioritize_record or {}).get("plugins", [])]
    known_ages = [a for a in ages if a is not None]
    cycle.metric_age_seconds = max(known_ages) if known_ages else None

    if filter_record is not None:
        cycle.candidate_count = len(filter_record.get("nodes", []))
        cycle.feasible_count = len(filter_record.get("passed", []))
    elif prioritize_record is not None:
        cycle.candidate_count = len(prioritize_record.get("nodes", []))
    candidates = (filter_record or prioritize_record or {}).get("nodes", [])
    cycle.candidate_nodes = f"|{'|'.join(candidates)}|" if candidates else ""  # read by dashboard.filters
    cycle.preferred_node = ""
    if prioritize_record is not None and prioritize_record.get("nodes"):
        scores = prioritize_record["final"]
        cycle.preferred_node = prioritize_record["nodes"][scores.index(max(scores))]
    elif filter_record is not None and len(filter_record.get("passed", [])) == 1:
        cycle.preferred_node = filter_record["passed"][0]  # kube-scheduler skips prioritize for one node

    bind = by_verb.get("bind")
    if any(c.http_status != 200 or (c.error and c.verb in {"filter", "bind"}) for c in calls):
        cycle.outcome = Outcome.ERROR
    elif bind is not None:
        cycle.outcome = Outcome.BOUND
    elif (filter_record is not None and not filter_record.get("passed")) or "preempt" in by_verb:
        cycle.outcome = Outcome.UNSCHEDULABLE
    else:
        cycle.outcome = Outcome.PENDING
    cycle.chosen_node = bind.record.get("node", "") if bind is not None and not bind.error else ""


def cycles_ingest_events(*, events: Iterable[VerbEvent]) -> int:
    """Fold events into cycles in one transaction; events already ingested are skipped. Returns new calls.

    A handful of queries per batch whatever its size (the cycles it may join, their verbs, new cycles, new
    calls, summaries), never one per event; large records and answers are packed (``dashboard.packing``).
    """
    ordered = sorted(events, key=lambda e: e.started_at)
    if not ordered:
        return 0
    with transaction.atomic():
        # Taken first: serializes ingesters, so the hash chain follows id order (dashboard.services.audit).
        chain = audit_chain_open()
        if connection.vendor == "postgresql":
            # Replicas ingest concurrently: serialize per pod so two of them cannot both open a cycle. One round
            # trip, the locks taken in sorted order (every ingester sorts alike, so none waits in a cycle).
            uids = sorted({e.pod_uid for e in ordered if e.pod_uid})
            if uids:
                with connection.cursor() as cursor:
                    cursor.execute(
                        "SELECT count(pg_advisory_xact_lock(hashtext(u))) FROM unnest(%s::text[]) AS u", [uids]
                    )
        seen = set(
            VerbCall.objects.filter(event_id__in=[e.event_id for e in ordered]).values_list("event_id", flat=True)
        )
        fresh = []
        for event in ordered:
            if event.event_id not in seen:
                seen.add(event.event_id)
                fresh.append(event)
        if not fresh:
            return 0
        batch = _Batch(fresh)
        new_cycles: list[SchedulingCycle] = []
        touched: dict[int, SchedulingCycle] = {}
        joined: list[tuple[SchedulingCycle, VerbCall]] = []
        for event in fresh:
            at = _when(event.started_at)
            cycle = batch.find(event, at)
            if cycle is None:
                cycle = SchedulingCycle(
                    pod_namespace=event.pod_namespace,
                    pod_name=event.pod_name,
                    pod_uid=event.pod_uid,
                    profile=event.profile,
                    started_at=at,
                    finished_at=at,
                )
                batch.open(cycle)
                new_cycles.append(cycle)
            elif cycle.pk is not None:
                touched[cycle.pk] = cycle
            if event.pod_name and not cycle.pod_name:
                cycle.pod_namespace, cycle.pod_name = event.pod_namespace, event.pod_name
            call = VerbCall(
                event_id=event.event_id,
                verb=event.verb,
                started_at=at,
                duration_ms=event.duration_ms,
                http_status=event.http_status,
                error=event.error,
                server=event.server,
                record=pack(_record_of(event)),
                response=pack(msgspec.json.decode(event.response)),
            )
            batch.join(cycle, call)
            _summarize(cycle, batch.calls_of(cycle))
            joined.append((cycle, call))
        SchedulingCycle.objects.bulk_create(new_cycles)  # their ids, before the calls that point at them
        calls = []
        for cycle, call in joined:
            call.cycle = cycle
            chain.seal(call)  # in event order: the chain's order, and (one INSERT below) the ids' order
            calls.append(call)
        VerbCall.objects.bulk_create(calls)
        if touched:
            SchedulingCycle.objects.bulk_update(list(touched.values()), _SUMMARY_FIELDS)
        chain.close()
    return len(calls)


ANSWER_NOT_CONFIRMED = (
    "answer not confirmed: schedlens stopped, or lost the connection, before the answer was written; "
    "kube-scheduler saw this call fail"
)


def _unconfirmed(event: VerbEvent) -> VerbEvent:
    error = f"{ANSWER_NOT_CONFIRMED}; {event.error}" if event.error else ANSWER_NOT_CONFIRMED
    return msgspec.structs.replace(event, error=error)


def _settled(spool: Spool, rows: list[SpoolRow], grace_seconds: float) -> list[tuple[SpoolRow, VerbEvent | None]]:
    """The leading rows ready for the database: stops at a row whose answer is still being written."""
    ready: list[tuple[SpoolRow, VerbEvent | None]] = []
    now = time.time()
    for row in rows:
        try:
            event = event_storable(decode_event(row.data), row.data)
        except msgspec.DecodeError as exc:
            log.error("spool row %s is not a verb record (%s); set aside in the spool's rejected table", row.id, exc)
            ready.append((row, None))
            continue
        if not row.answered:
            if now - event.started_at < grace_seconds:
                break  # the answer is (most likely) being written right now; the next pass takes it
            log.warning("the answer recorded in spool row %s (%s) was never confirmed written", row.id, event.verb)
            event = _unconfirmed(event)
        ready.append((row, event))
    return ready


def _ingest_rows(spool: Spool, ready: list[tuple[SpoolRow, VerbEvent | None]]) -> None:
    """Ingest in one transaction; if the database refuses the batch's content, row by row, setting aside the rows
    it refuses (an outage is raised instead: those rows wait in the spool)."""
    try:
        cycles_ingest_events(events=[event for _, event in ready if event is not None])
    except (OperationalError, InterfaceError):
        raise
    except Exception:
        log.warning("an ingest batch was refused; retrying its records one by one", exc_info=True)
    else:
        for row, event in ready:
            if event is None:
                spool.reject(row.id, "not a verb record")
        return
    for row, event in ready:
        if event is None:
            spool.reject(row.id, "not a verb record")
            continue
        try:
            cycles_ingest_events(events=[event])
        except (OperationalError, InterfaceError):
            raise
        except Exception as exc:
            log.error("spool row %s was refused by the database and set aside: %s", row.id, exc, exc_info=True)
            spool.reject(row.id, f"{type(exc).__name__}: {exc}")


def spool_ingest(
    *, spool: Spool, batch_size: int = 500, max_batches: int | None = None, confirm_grace_seconds: float | None = None
) -> int:
    """Move records from the spool into the database; safe to run from several processes at once.

    Deleting from the spool only after the database commit means a crash in between re-ingests the batch,
    which the unique ``event_id`` makes harmless. A record whose answer was not confirmed written within
    ``confirm_grace_seconds`` (``SCHEDLENS_ANSWER_CONFIRM_SECONDS``) is stored as a failed call (see
    ``dashboard.spool``). Returns how many records left the spool.
    """
    grace = settings.SCHEDLENS_ANSWER_CONFIRM_SECONDS if confirm_grace_seconds is None else confirm_grace_seconds
    moved = 0
    with spool.ingest_lease() as leased:
        if not leased:
            return 0
        batches = 0
        while max_batches is None or batches < max_batches:
            rows = spool.read_rows(batch_size)
            ready = _settled(spool, rows, grace)
            if not ready:
                break
            _ingest_rows(spool, ready)
            spool.delete_through(ready[-1][0].id)
            moved += len(ready)
            batches += 1
            if len(ready) < len(rows):
                break  # held back behind an answer still being written
    return moved
