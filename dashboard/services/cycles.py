"""Writes of the scheduling record: fold verb events into cycles, and drain the spool into the database.

Calls of one cycle may be answered by different replicas and reach the database in any order, so cycles
are correlated here, through the database, never through a process's memory: a ``filter`` opens a cycle
for the pod's UID; ``prioritize``, ``bind`` and ``preempt`` join the newest cycle of that UID that lacks
them. A call that arrives before its ``filter`` opens a cycle the ``filter`` later joins.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
from django.db import connection, transaction

from dashboard.models import NodeMode, Outcome, SchedulingCycle, VerbCall
from dashboard.services.audit import audit_chain_open
from dashboard.spool import Spool
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


def _find_cycle(event: VerbEvent, at: datetime) -> SchedulingCycle | None:
    if not event.pod_uid:
        return None  # A refused request that named no pod stands alone.
    same_pod = SchedulingCycle.objects.filter(pod_uid=event.pod_uid)
    if event.verb == "filter":
        # Only a cycle opened just now by an early prioritize/bind, still without a filter, can take it.
        candidates = same_pod.filter(started_at__gte=at - CLOCK_SKEW, started_at__lte=at + EARLY_CALL_WINDOW)
    else:
        candidates = same_pod.filter(started_at__gte=at - JOIN_WINDOW, started_at__lte=at + CLOCK_SKEW)
        # A bound pod is not scheduled again: a later prioritize or preempt belongs to a new attempt.
        if event.verb in {"prioritize", "preempt"}:
            candidates = candidates.exclude(outcome=Outcome.BOUND)
    return candidates.exclude(calls__verb=event.verb).order_by("-started_at", "-id").first()


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
    """Fold events into cycles in one transaction; events already ingested are skipped. Returns new calls."""
    ordered = sorted(events, key=lambda e: e.started_at)
    if not ordered:
        return 0
    with transaction.atomic():
        # Taken first: serializes ingesters, so the hash chain follows id order (dashboard.services.audit).
        chain = audit_chain_open()
        if connection.vendor == "postgresql":
            # Replicas ingest concurrently: serialize per pod so two of them cannot both open a cycle.
            with connection.cursor() as cursor:
                for uid in sorted({e.pod_uid for e in ordered if e.pod_uid}):
                    cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [uid])
        seen = set(
            VerbCall.objects.filter(event_id__in=[e.event_id for e in ordered]).values_list("event_id", flat=True)
        )
        added = 0
        for event in ordered:
            if event.event_id in seen:
                continue
            seen.add(event.event_id)
            at = _when(event.started_at)
            cycle = _find_cycle(event, at)
            if cycle is None:
                cycle = SchedulingCycle(
                    pod_namespace=event.pod_namespace,
                    pod_name=event.pod_name,
                    pod_uid=event.pod_uid,
                    profile=event.profile,
                    started_at=at,
                    finished_at=at,
                )
                cycle.save()
            if event.pod_name and not cycle.pod_name:
                cycle.pod_namespace, cycle.pod_name = event.pod_namespace, event.pod_name
            call = VerbCall(
                cycle=cycle,
                event_id=event.event_id,
                verb=event.verb,
                started_at=at,
                duration_ms=event.duration_ms,
                http_status=event.http_status,
                error=event.error,
                server=event.server,
                record=_record_of(event),
                response=msgspec.json.decode(event.response),
            )
            chain.append(call)  # saves it, sealed into the hash chain
            _summarize(cycle, list(cycle.calls.all()))
            cycle.save()
            added += 1
        chain.close()
    return added


def spool_ingest(*, spool: Spool, batch_size: int = 500, max_batches: int | None = None) -> int:
    """Move records from the spool into the database; safe to run from several processes at once.

    Deleting from the spool only after the database commit means a crash in between re-ingests the batch,
    which the unique ``event_id`` makes harmless. Returns how many records were moved.
    """
    moved = 0
    with spool.ingest_lease() as leased:
        if not leased:
            return 0
        batches = 0
        while max_batches is None or batches < max_batches:
            rows = spool.read_batch(batch_size)
            if not rows:
                break
            events = []
            for row_id, data in rows:
                try:
                    events.append(decode_event(data))
                except msgspec.DecodeError:
                    log.error("spool row %s is not a verb record; left out of the database", row_id)
            cycles_ingest_events(events=events)
            spool.delete_through(rows[-1][0])
            moved += len(rows)
            batches += 1
    return moved
