"""Fold new calls into scheduling cycles and write them, one transaction per batch.

Calls of one cycle may be answered by different replicas and reach the database in any order, so cycles
are correlated here, through the database, never through a process's memory: a ``filter`` opens a cycle
for the pod's UID; ``prioritize``, ``bind`` and ``preempt`` join the newest cycle of that UID that lacks
them. A call that arrives before its ``filter`` opens a cycle the ``filter`` later joins.

The calls come built (``dashboard.ingest.new_calls``), from the spool (``dashboard.ingest.spool_ingest``) or
from events (:func:`cycles_ingest_events`). A batch goes through :func:`ingest_calls`'s steps: lock, drop calls
already stored, fold the rest into cycles, number the new cycles, write cycles and shared parts, seal each call's
row into the audit chain and write the rows (``dashboard.ingest.record_writes``: the only step that differs by
database), update the cycles joined, add node postings and node counts; after the commit, queue the Explained Events
of the binds, and of the binds the placement watcher observed whose cycle the batch completed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction

from dashboard import pod_events
from dashboard.audit.chain import ChainAppender, audit_chain_open, call_content
from dashboard.ingest.batch_tallies import BatchTallies
from dashboard.ingest.cycle_summary import SUMMARY_FIELDS, candidates, summarize
from dashboard.ingest.new_calls import EXPLAINED_VERBS, NewCall, Summary, build_call, when
from dashboard.ingest.observed_binds import claim_explanation, keep_observed, observed_binds
from dashboard.ingest.record_writes import (
    call_row,
    insert_calls,
    insert_cycles,
    new_cycle_ids,
    postings_add,
    shared_parts_upsert,
    update_cycles,
)
from dashboard.models import Outcome, SchedulingCycle, VerbCall, shared_part_data
from dashboard.selectors.cycles import call_filter_get, call_reads
from dashboard.services.node_tallies import placed_node
from dashboard.storage.call_body import FilterReference, filter_reference
from dashboard.storage.call_body_read import body_read
from dashboard.storage.call_record import call_read
from scheduler_core.extender.record.spool_codec import decode_event
from scheduler_core.extender.record.structs import (
    BIND,
    FILTER,
    PREEMPT,
    PRIORITIZE,
    CallRecord,
    CycleRecords,
    FilterRecord,
    VerbEvent,
)

log = logging.getLogger(__name__)

JOIN_WINDOW = timedelta(minutes=10)
"""How far after its filter a call may still belong to the same attempt (binds can queue behind others)."""
EARLY_CALL_WINDOW = timedelta(seconds=30)
"""How far a call seen before its filter (another replica's spool lagging) may precede nothing."""
CLOCK_SKEW = timedelta(seconds=2)


@dataclass(slots=True)
class _Call:
    """One call of a cycle on its way into the database: stored (``stored`` set) or new (``new`` set)."""

    summary: Summary
    new: NewCall | None = None
    stored: VerbCall | None = None
    recorded: CallRecord | None = None
    """A stored call's record, decoded once with its cycle's other stored calls."""

    @property
    def pk(self) -> int | None:
        return self.stored.pk if self.stored is not None else None

    @property
    def event_id(self) -> str:
        return self.new.event_id if self.new is not None else self.stored.event_id if self.stored else ""


class _Batch:
    """The cycles one ingest batch may touch, in memory: one query finds them, one more their verbs.

    Matches exactly what a query per event would: the same windows, the same exclusions, newest first with the id as
    tie-breaker; cycles opened earlier in the batch take part too, with ids above every stored one in the order they
    were opened.
    """

    def __init__(self, calls: Sequence[NewCall]) -> None:
        self.by_uid: dict[str, list[SchedulingCycle]] = {}
        self.verbs: dict[int, set[str]] = {}
        self.calls: dict[int, list[_Call]] = {}
        """Calls per cycle (by ``id(cycle)``), loaded only for stored cycles the batch adds a call to."""
        self.order: dict[int, int] = {}
        """``id(cycle)`` → the id the query would order by (stored id, or above them for a new cycle)."""
        self.candidates_before: dict[int, list[str]] = {}
        """Stored cycles the batch adds a call to → their candidates before it."""
        self._next_new = 1 << 62
        self._unread: dict[int, SchedulingCycle] = {}
        """Stored cycles whose calls no call of the batch has needed yet: read together at the first need."""
        self._stored_calls: dict[int, list[VerbCall]] = {}
        uids = sorted({c.pod_uid for c in calls if c.pod_uid})
        if not uids:
            return
        earliest = when(min(c.started_at for c in calls)) - JOIN_WINDOW
        latest = when(max(c.started_at for c in calls)) + EARLY_CALL_WINDOW
        stored = list(
            SchedulingCycle.objects.filter(pod_uid__in=uids, started_at__gte=earliest, started_at__lte=latest)
        )
        verbs = VerbCall.objects.filter(cycle_id__in=[c.id for c in stored]).values_list("cycle_id", "verb")
        by_id: dict[int, set[str]] = {}
        for cycle_id, verb in verbs:
            by_id.setdefault(cycle_id, set()).add(verb)
        for cycle in stored:
            self._add(cycle, cycle.id, by_id.get(cycle.id, set()))
        self._unread = {cycle.id: cycle for cycle in stored}

    def _add(self, cycle: SchedulingCycle, order: int, verbs: set[str]) -> None:
        self.by_uid.setdefault(cycle.pod_uid, []).append(cycle)
        self.verbs[id(cycle)] = verbs
        self.order[id(cycle)] = order

    def find(self, call: NewCall) -> SchedulingCycle | None:
        if not call.pod_uid:
            return None  # A refused request that named no pod stands alone.
        at = call.at
        if call.verb == FILTER:
            # Only a cycle opened just now by an early prioritize/bind, still without a filter, can take it.
            low, high = at - CLOCK_SKEW, at + EARLY_CALL_WINDOW
        else:
            low, high = at - JOIN_WINDOW, at + CLOCK_SKEW
        # A bound pod is not scheduled again: a prioritize or preempt made after the bind belongs to a new attempt.
        # One made before it joins, even when it arrives after the bind: with two replicas, the bind's replica may
        # store the bind before the other replica stores the prioritize.
        skip_bound = call.verb in {PRIORITIZE, PREEMPT}
        matching = [
            c
            for c in self.by_uid.get(call.pod_uid, ())
            if low <= c.started_at <= high
            and not (skip_bound and c.outcome == Outcome.BOUND and at > c.finished_at + CLOCK_SKEW)
            and call.verb not in self.verbs[id(c)]
        ]
        if not matching:
            return None
        return max(matching, key=lambda c: (c.started_at, self.order[id(c)]))

    def open(self, cycle: SchedulingCycle) -> None:
        self._add(cycle, self._next_new, set())
        self._next_new += 1
        self.calls[id(cycle)] = []

    def calls_of(self, cycle: SchedulingCycle) -> list[_Call]:
        calls = self.calls.get(id(cycle))
        if calls is None:  # a stored cycle: its stored calls, once
            reads = call_reads(calls=self._read_calls(cycle.id))
            calls = self.calls[id(cycle)] = [
                _Call(Summary.of_call(read.call, read.recorded), stored=read.call, recorded=read.recorded)
                for read in reads
            ]
            self.candidates_before[id(cycle)] = list(candidates([c.summary for c in calls]))
        return calls

    def _read_calls(self, cycle_id: int) -> list[VerbCall]:
        """A stored cycle's calls in ``cycle.calls.all()``'s order; the first need reads those of every stored cycle
        the batch found, in one query: a batch of two replicas' calls joins many of them."""
        if cycle_id not in self._stored_calls and self._unread:
            for cycle_id_read in self._unread:
                self._stored_calls[cycle_id_read] = []
            rows = VerbCall.objects.filter(cycle_id__in=list(self._unread)).order_by("cycle_id", "started_at", "id")
            for row in rows:
                self._stored_calls[row.cycle_id].append(row)
            self._unread = {}
        return self._stored_calls.get(cycle_id, [])

    def join(self, cycle: SchedulingCycle, call: _Call) -> None:
        calls = self.calls_of(cycle)
        calls.append(call)
        # The order ``cycle.calls.all()`` would give (started_at, id): new calls get ids above the stored ones.
        calls.sort(key=lambda c: (c.summary.started_at, c.pk if c.pk is not None else 1 << 62))
        self.verbs[id(cycle)].add(call.summary.verb)


def _cycle_filter(calls: Sequence[_Call]) -> _Call | None:
    """The filter call of a cycle (the last one, as the summary reads it)."""
    for call in reversed(calls):
        if call.summary.verb == FILTER:
            return call
    return None


def _stored_filter_reference(call: VerbCall, record: CallRecord | None) -> FilterReference | None:
    """A stored filter call's reference, for a prioritize that joins its cycle in a later batch."""
    if call.http_status != 200 or call.body is None or record is None or record.filter is None:
        return None
    return filter_reference(call.event_id, record.filter)


def _new_filter_reference(call: NewCall) -> FilterReference | None:
    """A new filter call's reference: as built, or (left behind by a builder process) made again from its body."""
    if call.filter_reference is not None or call.body is None or call.http_status != 200:
        return call.filter_reference
    shared = call.shared_part
    shared_parts = {shared.digest: shared.data} if shared is not None else {}
    record = body_read(call.body, filter_records=lambda _event_id: None, shared_parts=shared_parts.get)[0]
    return filter_reference(call.event_id, record.filter) if record.filter is not None else None


def _referring_right(cycle_calls: Sequence[_Call], call: NewCall) -> NewCall:
    """``call`` (a prioritize) referring to its cycle's filter call, or to none: built again if it guessed wrong."""
    if call.as_spooled:
        return call
    found = _cycle_filter(cycle_calls)
    if found is None:
        return call if not call.refers_to else call.referring_to(None)
    if call.refers_to and call.refers_to == found.event_id:
        return call
    if found.new is not None:
        reference = _new_filter_reference(found.new)
    else:
        assert found.stored is not None
        reference = _stored_filter_reference(found.stored, found.recorded)
    if reference is None:
        return call if not call.refers_to else call.referring_to(None)
    return call.referring_to(reference)


def _candidates_changed(batch: _Batch, cycle: SchedulingCycle) -> bool:
    """A stored cycle whose candidates this batch changes (an early prioritize joined by its filter) needs a new slot:
    its old bit stays set in the old candidates' postings, and no cycle has that slot any more."""
    now = list(candidates([c.summary for c in batch.calls_of(cycle)]))
    return bool(now) and now != batch.candidates_before.get(id(cycle), [])


@dataclass
class _Fold:
    """Where a batch's new calls went: the cycles they opened or joined, in arrival order."""

    batch: _Batch
    new_cycles: list[SchedulingCycle] = field(default_factory=list)
    touched: dict[int, SchedulingCycle] = field(default_factory=dict)
    """Stored cycles a new call joined (by id): their summary columns are written again."""
    before: dict[int, tuple[str, str]] = field(default_factory=dict)
    """Their preferred and placed nodes as stored, before the batch re-derived them (node counts)."""
    joined: list[tuple[SchedulingCycle, _Call]] = field(default_factory=list)

    def count_cycles(self, tallies: BatchTallies) -> None:
        """The cycles' preferred and placed nodes into the node counts: each new cycle's, each stored one's change."""
        for cycle in self.new_cycles:
            tallies.move(("", ""), _counted(cycle))
        for pk, cycle in self.touched.items():
            tallies.move(self.before[pk], _counted(cycle))


def _counted(cycle: SchedulingCycle) -> tuple[str, str]:
    return cycle.preferred_node, placed_node(cycle.outcome, cycle.chosen_node)


def cycles_ingest_events(*, events: Iterable[VerbEvent]) -> int:
    """Fold events into cycles in one transaction; events already ingested are skipped. Returns new calls."""
    return ingest_calls([build_call(event) for event in sorted(events, key=lambda e: e.started_at)])


def cycles_ingest_records(*, records: Iterable[bytes]) -> int:
    """:func:`cycles_ingest_events` for records as the verbs spooled them: each stored as the ingester stores it
    (as spooled, where its form allows). For histories made without a spool (the benchmarks' templates)."""
    events = sorted(
        ((decode_event(data, derive_answer=False), data) for data in records), key=lambda e: e[0].started_at
    )
    return ingest_calls([build_call(event, spooled=data) for event, data in events])


def ingest_calls(calls: Sequence[NewCall]) -> int:
    """Fold new calls into cycles in one transaction; calls already ingested are skipped. Returns new calls.

    A handful of statements per batch whatever its size (the cycles it may join, their verbs, new ids, new cycles
    and new calls by COPY, summaries, node counts, node postings), never one per call.
    """
    ordered = sorted(calls, key=lambda c: c.started_at)
    if not ordered:
        return 0
    postgres = connection.vendor == "postgresql"
    with transaction.atomic():
        # Taken first: serializes ingesters, so the hash chain follows id order (dashboard.audit.chain).
        chain = audit_chain_open()
        if postgres:
            lock_pods(c.pod_uid for c in ordered)
        fresh = _not_stored_yet(ordered)
        if not fresh:
            return 0
        fold = _fold(fresh, postgres=postgres)
        observed = _observed(fold)
        postings = _number_cycles(fold) if postgres else []
        insert_cycles(fold.new_cycles)  # before the calls that point at them
        shared_parts_upsert([call for call in fresh if call.shared_part is not None])
        rows, tallies = _sealed_rows(fold, chain)
        fold.count_cycles(tallies)
        insert_calls(rows, recorded_at=chain.recorded_at)
        if fold.touched:
            update_cycles(list(fold.touched.values()), SUMMARY_FIELDS)
        if postings:
            postings_add(postings)
        tallies.write(day=chain.day)
    _explain_binds(fold.batch, _explained(fold, observed))
    return len(fold.joined)


def lock_pods(pod_uids: Iterable[str]) -> None:
    """PostgreSQL: serialize the writers of a pod's cycles (ingesters, the placement watcher) until the transaction
    ends, so that two replicas cannot both open a cycle for it. One round trip, the locks taken in sorted order (every
    writer sorts alike, so none waits in a cycle)."""
    uids = sorted({uid for uid in pod_uids if uid})
    if uids and connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(pg_advisory_xact_lock(hashtext(u))) FROM unnest(%s::text[]) AS u", [uids])


def _not_stored_yet(calls: Sequence[NewCall]) -> list[NewCall]:
    """``calls`` less those already stored (a batch ingested again after a crash) and repeats within the batch."""
    seen = set(VerbCall.objects.filter(event_id__in=[c.event_id for c in calls]).values_list("event_id", flat=True))
    fresh = []
    for call in calls:
        if call.event_id not in seen:
            seen.add(call.event_id)
            fresh.append(call)
    return fresh


def _fold(fresh: Sequence[NewCall], *, postgres: bool) -> _Fold:
    """Each new call joined to its cycle (stored, or opened earlier in the batch), or to a cycle it opens."""
    fold = _Fold(_Batch(fresh))
    batch = fold.batch
    for new in fresh:
        cycle = batch.find(new)
        if cycle is None:
            cycle = SchedulingCycle(
                pod_namespace=new.pod_namespace,
                pod_name=new.pod_name,
                pod_uid=new.pod_uid,
                profile=new.profile,
                started_at=new.at,
                finished_at=new.at,
            )
            batch.open(cycle)
            fold.new_cycles.append(cycle)
        elif cycle.pk is not None and cycle.pk not in fold.touched:
            fold.touched[cycle.pk] = cycle
            fold.before[cycle.pk] = _counted(cycle)
        if new.pod_name and not cycle.pod_name:
            cycle.pod_namespace, cycle.pod_name = new.pod_namespace, new.pod_name
        call = _Call(new.summary, new=new)
        batch.join(cycle, call)
        # The next call's match reads it.
        summarize(cycle, [c.summary for c in batch.calls_of(cycle)], postgres=postgres)
        fold.joined.append((cycle, call))
    return fold


@dataclass
class _Observed:
    """A batch's stored cycles whose bind the placement watcher observed, and the Events that fall to this batch."""

    earlier: set[int] = field(default_factory=set)
    """Cycles whose Event was settled before this batch (the watcher explained them)."""
    claimed: list[SchedulingCycle] = field(default_factory=list)
    """Cycles this batch completed: their Event is this batch's to write."""


def _observed(fold: _Fold) -> _Observed:
    """Cycles the watcher concluded keep their node, and the Event of those this batch completes is claimed
    (``dashboard.ingest.observed_binds``); under the pods' locks, before the cycles and node counts are written."""
    observed = _Observed()
    for pk, observation in observed_binds(fold.touched.values()).items():
        cycle = fold.touched[pk]
        keep_observed(cycle, observation)
        if observation.explained_at is not None:
            observed.earlier.add(pk)
        elif claim_explanation(observation, cycle):
            observed.claimed.append(cycle)
    return observed


def _explained(fold: _Fold, observed: _Observed) -> list[SchedulingCycle]:
    """The cycles whose Explained Event this batch writes: each successful bind just folded (unless the watcher
    explained its cycle already), then each observed bind this batch completed."""
    bound = [
        cycle
        for cycle, call in fold.joined
        if (new := call.new) is not None
        and new.verb == BIND
        and not new.error
        and new.http_status == 200
        and cycle.chosen_node
        and cycle.pk not in observed.earlier
    ]
    return [*bound, *observed.claimed]


def _number_cycles(fold: _Fold) -> list[tuple[int, Sequence[str]]]:
    """PostgreSQL: ids and candidate slots before the INSERT, so that calls and postings can point at them. Returns
    the postings to add: (slot, candidates) of each cycle that got a slot."""
    batch = fold.batch
    if fold.new_cycles:
        for cycle, new_id in zip(fold.new_cycles, new_cycle_ids(len(fold.new_cycles)), strict=True):
            cycle.id = new_id
    fresh_slots = [c for c in fold.touched.values() if _candidates_changed(batch, c)]
    for cycle, slot in zip(fresh_slots, new_cycle_ids(len(fresh_slots)) if fresh_slots else [], strict=True):
        cycle.candidate_slot = slot
    for cycle in fold.new_cycles:
        if candidates([c.summary for c in batch.calls_of(cycle)]):
            cycle.candidate_slot = cycle.id
    return [
        (cycle.candidate_slot, candidates([c.summary for c in batch.calls_of(cycle)]))
        for cycle in [*fold.new_cycles, *fresh_slots]
        if cycle.candidate_slot is not None
    ]


def _sealed_rows(fold: _Fold, chain: ChainAppender) -> tuple[list[dict[str, Any]], BatchTallies]:
    """Each new call's row (``record_writes.call_row``) linked into the chain, and the batch's node counts.

    In arrival order: the chain's order, and (the rows are inserted in this order) the ids' order.
    """
    rows: list[dict[str, Any]] = []
    tallies = BatchTallies()
    for cycle, call in fold.joined:
        new = call.new
        assert new is not None
        if new.verb == PRIORITIZE and (new.refers_to or new.body is not None):
            new = call.new = _referring_right(fold.batch.calls_of(cycle), new)
        row = call_row(cycle.id, new)
        row["chain_hash"] = chain.link(call_content(row))
        tallies.add(new)
        rows.append(row)
    return rows, tallies


def _explain_binds(batch: _Batch, cycles: Sequence[SchedulingCycle]) -> None:
    """After the commit: queue an Explained Event (``dashboard.pod_events``) for each of ``cycles`` (``_explained``).

    Here the cycle's filter and prioritize calls are together, whichever replica answered them, and its id is known.
    Only the records are decoded here; the explanation and the API call happen in the emitter's thread. Simulated
    binds (demo mode) get none."""
    if not settings.SCHEDLENS_POD_EVENTS or not cycles:
        return
    events = pod_events.emitter()
    if events.unavailable:  # no cluster configured: skip decoding records for nothing, count each Event owed
        for _ in cycles:
            events.drop("unconfigured", pod_events.UNCONFIGURED)
        return
    for cycle in cycles:
        try:
            records = _explained_records(batch.calls_of(cycle))
            if records.bind is not None and records.bind.simulated:
                continue  # no pod was bound in a cluster (demo mode): nothing to write an Event on
            pod_events.explained_bind(cycle=cycle, records=records)
        except Exception as exc:  # the record is written; an Event is a courtesy and never fails the ingest
            log.warning("could not queue the Explained Event of cycle %s", cycle.pk, exc_info=True)
            events.drop("error", f"preparing an Explained Event failed: {type(exc).__name__}: {exc}")


def _explained_records(calls: Sequence[_Call]) -> CycleRecords:
    """The records a cycle's Explained Event reads: stored calls' as decoded with their cycle; a new call's is the
    event it was built from in this process (no body decoded), else its body, decoded here."""
    decoded: dict[int, CallRecord] = {}

    def record(index: int) -> CallRecord:
        if index not in decoded:
            c = calls[index]
            event = c.new.event if c.new is not None else None
            if c.recorded is not None:
                decoded[index] = c.recorded
            elif event is not None:
                decoded[index] = CallRecord.of_event(event)
            else:
                new = c.new
                assert new is not None
                decoded[index] = call_read(
                    new.verb,
                    new.body,
                    new.record_json,
                    None,
                    filter_records=filter_records,
                    shared_parts=shared_part_data,
                )[0]
        return decoded[index]

    def filter_records(event_id: str) -> FilterRecord | None:
        for index, c in enumerate(calls):
            if c.event_id == event_id:
                return record(index).filter
        return call_filter_get(event_id=event_id)  # a filter call of another cycle: read from the database

    newest: dict[str, CallRecord] = {}
    for index, c in enumerate(calls):
        status = c.new.http_status if c.new is not None else c.stored.http_status if c.stored is not None else 0
        if c.summary.verb in EXPLAINED_VERBS and status == 200:
            newest[c.summary.verb] = record(index)
    return CycleRecords.of_calls(newest.get(FILTER), newest.get(PRIORITIZE), newest.get(BIND))
