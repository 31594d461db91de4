"""Writes of the scheduling record: fold verb events into cycles, and drain the spool into the database.

Calls of one cycle may be answered by different replicas and reach the database in any order, so cycles
are correlated here, through the database, never through a process's memory: a ``filter`` opens a cycle
for the pod's UID; ``prioritize``, ``bind`` and ``preempt`` join the newest cycle of that UID that lacks
them. A call that arrives before its ``filter`` opens a cycle the ``filter`` later joins.

Each record is prepared as soon as it is read (``dashboard.services.ingest_prepare``); this module folds the
prepared calls into cycles and writes them.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Iterable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from itertools import repeat
from typing import Any

import msgspec
from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, transaction

from dashboard.models import NodeMode, NodePosting, Outcome, SchedulingCycle, SharedPart, VerbCall
from dashboard.packing import FilterFacts, body_read, filter_facts, stored_form
from dashboard.services.audit import CONTENT_FIELDS, NodeCounts, audit_chain_open, call_content, copy_upsert
from dashboard.services.ingest_prepare import Prepared, Summary, prepare, settled, when, with_rows
from dashboard.services.spool_read_ahead import SpoolReadAhead
from dashboard.spool import Spool, SpoolRow
from scheduler_core.record import FilterRecord, VerbEvent

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
    new: Prepared | None = None
    stored: VerbCall | None = None

    @property
    def pk(self) -> int | None:
        return self.stored.pk if self.stored is not None else None

    @property
    def event_id(self) -> str:
        return self.new.event_id if self.new is not None else self.stored.event_id if self.stored else ""


class _Batch:
    """The cycles one ingest batch may touch, in memory: one query finds them, one more their verbs.

    Matches exactly what a query per event would (``_find_cycle`` before batching): the same windows, the same
    exclusions, newest first with the id as tie-breaker; cycles opened earlier in the batch take part too, with
    ids above every stored one in the order they were opened.
    """

    def __init__(self, calls: Sequence[Prepared]) -> None:
        self.by_uid: dict[str, list[SchedulingCycle]] = {}
        self.verbs: dict[int, set[str]] = {}
        self.calls: dict[int, list[_Call]] = {}
        """Calls per cycle (by ``id(cycle)``), loaded only for stored cycles the batch adds a call to."""
        self.order: dict[int, int] = {}
        """``id(cycle)`` → the id the query would order by (stored id, or above them for a new cycle)."""
        self.candidates_before: dict[int, list[str]] = {}
        """Stored cycles the batch adds a call to → their candidates before it."""
        self._next_new = 1 << 62
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

    def _add(self, cycle: SchedulingCycle, order: int, verbs: set[str]) -> None:
        self.by_uid.setdefault(cycle.pod_uid, []).append(cycle)
        self.verbs[id(cycle)] = verbs
        self.order[id(cycle)] = order

    def find(self, call: Prepared) -> SchedulingCycle | None:
        if not call.pod_uid:
            return None  # A refused request that named no pod stands alone.
        at = call.at
        if call.verb == "filter":
            # Only a cycle opened just now by an early prioritize/bind, still without a filter, can take it.
            low, high = at - CLOCK_SKEW, at + EARLY_CALL_WINDOW
        else:
            low, high = at - JOIN_WINDOW, at + CLOCK_SKEW
        # A bound pod is not scheduled again: a later prioritize or preempt belongs to a new attempt.
        skip_bound = call.verb in {"prioritize", "preempt"}
        candidates = [
            c
            for c in self.by_uid.get(call.pod_uid, ())
            if low <= c.started_at <= high
            and not (skip_bound and c.outcome == Outcome.BOUND)
            and call.verb not in self.verbs[id(c)]
        ]
        if not candidates:
            return None
        return max(candidates, key=lambda c: (c.started_at, self.order[id(c)]))

    def open(self, cycle: SchedulingCycle) -> None:
        self._add(cycle, self._next_new, set())
        self._next_new += 1
        self.calls[id(cycle)] = []

    def calls_of(self, cycle: SchedulingCycle) -> list[_Call]:
        calls = self.calls.get(id(cycle))
        if calls is None:  # a stored cycle: its stored calls, once
            stored = list(cycle.calls.all())
            for call in stored:
                call.__dict__["siblings"] = stored
            calls = self.calls[id(cycle)] = [_Call(Summary.of_call(c), stored=c) for c in stored]
            self.candidates_before[id(cycle)] = list(_candidates([c.summary for c in calls]))
        return calls

    def join(self, cycle: SchedulingCycle, call: _Call) -> None:
        calls = self.calls_of(cycle)
        calls.append(call)
        # The order ``cycle.calls.all()`` would give (started_at, id): new calls get ids above the stored ones.
        calls.sort(key=lambda c: (c.summary.started_at, c.pk if c.pk is not None else 1 << 62))
        self.verbs[id(cycle)].add(call.summary.verb)


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
    "candidate_slot",
    "preferred_node",
    "answer_tie",
    "outcome",
    "chosen_node",
]
"""What ``_summarize`` (and a late pod name) may change on a stored cycle."""


def _candidates(summaries: Sequence[Summary]) -> Sequence[str]:
    """The cycle's candidate nodes: the filter's, else prioritize's (the last call of each verb counts)."""
    by_verb = {s.verb: s for s in summaries}
    if (found := by_verb.get("filter")) is not None and found.has_record:
        return found.nodes
    if (found := by_verb.get("prioritize")) is not None and found.has_record:
        return found.nodes
    return ()


def _summarize(cycle: SchedulingCycle, summaries: Sequence[Summary], *, postgres: bool) -> None:
    """Derive the cycle's columns from its calls; the calls are the source of truth.

    ``postgres``: the database is PostgreSQL (read once per batch: ``connection.vendor`` goes through Django's
    per-context connection proxy, ~15 µs a read, and this runs for every call)."""
    by_verb = {s.verb: s for s in summaries}
    cycle.started_at = min(s.started_at for s in summaries)
    cycle.finished_at = max(s.finished_at for s in summaries)
    for verb in ("filter", "prioritize", "bind", "preempt"):
        setattr(cycle, f"{verb}_ms", by_verb[verb].duration_ms if verb in by_verb else None)
    cycle.error = "; ".join(f"{s.verb}: {s.error}" for s in summaries if s.error)

    filtered = by_verb.get("filter")
    scored = by_verb.get("prioritize")
    modes = [s.node_mode for s in summaries if s.node_mode]
    cycle.node_mode = modes[0] if modes else NodeMode.NONE
    ages = [age for s in (filtered, scored) if s is not None for age in s.ages]
    known_ages = [a for a in ages if a is not None]
    cycle.metric_age_seconds = max(known_ages) if known_ages else None

    if filtered is not None:
        cycle.candidate_count = len(filtered.nodes)
        cycle.feasible_count = filtered.passed_count
    elif scored is not None:
        cycle.candidate_count = len(scored.nodes)
    candidates = _candidates(summaries)
    if not postgres:  # read by dashboard.filters (PostgreSQL: NodePosting, ``_postings``)
        cycle.candidate_nodes = f"|{'|'.join(candidates)}|" if candidates else ""
    cycle.preferred_node = ""
    if scored is not None and scored.nodes:
        cycle.preferred_node = scored.preferred
    elif filtered is not None and filtered.passed_count == 1:
        cycle.preferred_node = filtered.only_passed  # kube-scheduler skips prioritize for one node
    cycle.answer_tie = scored is not None and scored.answer_tie

    bind = by_verb.get("bind")
    if any(s.http_status != 200 or (s.error and s.verb in {"filter", "bind"}) for s in summaries):
        cycle.outcome = Outcome.ERROR
    elif bind is not None:
        cycle.outcome = Outcome.BOUND
    elif (filtered is not None and not filtered.passed_count) or "preempt" in by_verb:
        cycle.outcome = Outcome.UNSCHEDULABLE
    else:
        cycle.outcome = Outcome.PENDING
    cycle.chosen_node = bind.bind_node if bind is not None and not bind.error else ""


def _cycle_filter(calls: Sequence[_Call]) -> _Call | None:
    """The filter call of a cycle (the last one, as the summary reads it)."""
    for call in reversed(calls):
        if call.summary.verb == "filter":
            return call
    return None


def _stored_facts(call: VerbCall) -> FilterFacts | None:
    """A stored filter call's facts, for a prioritize that joins its cycle in a later batch."""
    if call.http_status != 200 or call.body is None:
        return None
    return _facts_of_record(call.event_id, call.record)


def _new_facts(call: Prepared) -> FilterFacts | None:
    """A new filter call's facts: as prepared, or (not handed over by a preparing process) made from its body."""
    if call.facts is not None or call.body is None or call.http_status != 200:
        return call.facts
    part = call.part
    parts = {part.digest: part.data} if part is not None else {}
    return _facts_of_record(call.event_id, body_read(call.body, lookup=lambda _event_id: None, parts=parts.get)[0])


def _facts_of_record(event_id: str, record: dict[str, Any]) -> FilterFacts | None:
    if "nodes" not in record or "passed" not in record:
        return None
    part = msgspec.convert(
        {k: record[k] for k in ("nodes", "passed", "failures", "traffic_bytes") if k in record}, FilterRecord
    )
    return filter_facts(event_id, part)


def _referring_right(cycle_calls: Sequence[_Call], call: Prepared) -> Prepared:
    """``call`` (a prioritize) referring to its cycle's filter call, or to none: prepared again if it guessed wrong."""
    found = _cycle_filter(cycle_calls)
    if found is None:
        return call if not call.refers_to else call.against(None)
    if call.refers_to and call.refers_to == found.event_id:
        return call
    if found.new is not None:
        facts = _new_facts(found.new)
    else:
        assert found.stored is not None
        facts = _stored_facts(found.stored)
    if facts is None:
        return call if not call.refers_to else call.against(None)
    return call.against(facts)


def _new_ids(count: int) -> list[int]:
    """``count`` ids of the cycle table's sequence (PostgreSQL), so new cycles know theirs before the INSERT."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s)",
            [SchedulingCycle._meta.db_table, count],
        )
        return [row[0] for row in cursor.fetchall()]


_POSTING_BITS = 256


def _postings(cycles: Sequence[tuple[int, Sequence[str]]]) -> None:
    """Set each cycle's bit (its ``candidate_slot``) in the NodePosting rows of its candidates: one upsert.

    Cycles with the same candidate list (all of a cluster's nodes, for most of a busy minute's) share one pass over
    the names.
    """
    by_list: dict[tuple[str, ...], dict[int, int]] = {}
    for slot, names in cycles:
        blocks = by_list.setdefault(tuple(names), {})
        block, offset = divmod(slot, _POSTING_BITS)
        blocks[block] = blocks.get(block, 0) | (1 << (_POSTING_BITS - 1 - offset))
    merged: dict[tuple[str, int], int] = {}
    for names, blocks in by_list.items():
        for block, bits in blocks.items():
            for name in set(names):
                key = (name, block)
                merged[key] = merged.get(key, 0) | bits
    if not merged:
        return
    table = connection.ops.quote_name(NodePosting._meta.db_table)
    copy_upsert(
        NodePosting._meta.db_table,
        ["node", "block", "bits"],
        ((name, block, format(bits, f"0{_POSTING_BITS}b")) for (name, block), bits in sorted(merged.items())),
        f"ON CONFLICT (node, block) DO UPDATE SET bits = {table}.bits | excluded.bits",
    )


_CALL_COPY_COLUMNS = (*CONTENT_FIELDS, "body", "chain_hash")
"""A new call's row as COPY writes it: what its chain link covers (database column names), then body and hash."""
_JSON_COLUMNS = frozenset({"record", "response"})


def _insert_cycles(cycles: list[SchedulingCycle]) -> None:
    """New cycles: COPY on PostgreSQL (their ids already drawn from the sequence), else bulk_create."""
    if connection.vendor != "postgresql" or not cycles:
        SchedulingCycle.objects.bulk_create(cycles)
        return
    fields = list(SchedulingCycle._meta.concrete_fields)
    table = connection.ops.quote_name(SchedulingCycle._meta.db_table)
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    with connection.cursor() as cursor, cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
        for cycle in cycles:
            copy.write_row([getattr(cycle, f.attname) for f in fields])


def _insert_calls(rows: list[tuple[Any, ...]], instances: list[VerbCall]) -> None:
    """The new calls in chain order: COPY on PostgreSQL (ids from the sequence, in row order), else bulk_create."""
    if connection.vendor != "postgresql":
        VerbCall.objects.bulk_create(instances)
        return
    table = connection.ops.quote_name(VerbCall._meta.db_table)
    with (
        connection.cursor() as cursor,
        cursor.cursor.copy(f"COPY {table} ({', '.join(_CALL_COPY_COLUMNS)}) FROM STDIN") as copy,
    ):
        for row in rows:
            copy.write_row(row)


def _upsert_parts(calls: Sequence[Prepared]) -> None:
    """Store the shared parts these calls' bodies refer to (once each), and move each part's ``last_used_at`` to the
    latest of its calls: one statement per batch, a few rows (one per pod kind and traffic snapshot)."""
    latest: dict[str, tuple[bytes, datetime]] = {}
    for call in calls:
        assert call.part is not None
        digest, data = call.part
        known = latest.get(digest)
        if known is None or call.at > known[1]:
            latest[digest] = (data, call.at)
    if not latest:
        return
    q = connection.ops.quote_name
    table = q(SharedPart._meta.db_table)
    newest = "GREATEST" if connection.vendor == "postgresql" else "MAX"
    rows = ", ".join(["(%s, %s, %s)"] * len(latest))
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (digest, data, last_used_at) VALUES {rows} ON CONFLICT (digest) DO UPDATE "  # noqa: S608
            f"SET last_used_at = {newest}({table}.last_used_at, excluded.last_used_at)",
            [value for digest, (data, at) in sorted(latest.items()) for value in (digest, data, at)],
        )


def _json_column(value: Any) -> str | None:
    """What a jsonb column receives for ``value`` (``PackedJSONField``'s stored form, as JSON text)."""
    stored = stored_form(value)
    return None if stored is None else json.dumps(stored)


@dataclass
class _Tallies:
    """Per-node counts of a batch's new calls, as ``audit.tally_call`` counts them, a distinct list at a time.

    Lists are told apart by identity, not content: the same candidate list or outcome is one object from call to
    call (the spool's reader and the hand-over from a preparing process share them), and a copy with the same names
    only adds another entry that counts the same nodes. No tuple of 1000 names is built and hashed per call.
    """

    considered: Counter[int] = field(default_factory=Counter)
    """Candidate list (by ``id``) → how many filter calls listed it."""
    filtered_out: Counter[int] = field(default_factory=Counter)
    placements: Counter[str] = field(default_factory=Counter)
    seen: dict[int | str, datetime] = field(default_factory=dict)
    """Candidate lists (by ``id``) and single bound nodes → the latest time they were seen, in the order last seen."""
    lists: dict[int, Sequence[str]] = field(default_factory=dict)
    """The lists counted, held so that their ids stay theirs."""

    def _key(self, names: Sequence[str]) -> int:
        self.lists[id(names)] = names
        return id(names)

    def add(self, call: Prepared) -> None:
        if call.http_status != 200:
            return
        if call.verb == "filter" and call.summary.has_record:
            nodes = self._key(call.summary.nodes)
            self.considered[nodes] += 1
            self.filtered_out[self._key(call.failed)] += 1
            self.seen.pop(nodes, None)
            self.seen[nodes] = call.at  # calls come in time order: the latest wins
        elif call.verb == "bind" and not call.error and call.summary.bind_node:
            self.placements[call.summary.bind_node] += 1
            self.seen.pop(call.summary.bind_node, None)
            self.seen[call.summary.bind_node] = call.at

    def counts(self) -> dict[str, NodeCounts]:
        considered: Counter[str] = Counter()
        for key, times in self.considered.items():
            if times == 1:
                considered.update(self.lists[key])
            else:
                for name in self.lists[key]:
                    considered[name] += times
        filtered_out: Counter[str] = Counter()
        for key, times in self.filtered_out.items():
            for name in self.lists[key]:
                filtered_out[name] += times
        last_seen: dict[str, datetime] = {}
        for seen, at in self.seen.items():  # oldest first: the latest time of each node wins
            names = (seen,) if isinstance(seen, str) else self.lists[seen]
            last_seen.update(zip(names, repeat(at)))
        return self._merged(considered, filtered_out, last_seen)

    def _merged(
        self, considered: Counter[str], filtered_out: Counter[str], last_seen: dict[str, datetime]
    ) -> dict[str, NodeCounts]:
        names = set(considered) | set(filtered_out) | set(self.placements)
        return {
            name: NodeCounts(
                considered.get(name, 0), filtered_out.get(name, 0), self.placements.get(name, 0), last_seen.get(name)
            )
            for name in names
        }


def _candidates_changed(batch: _Batch, cycle: SchedulingCycle) -> bool:
    """A stored cycle whose candidates this batch changes (an early prioritize joined by its filter) needs a new slot:
    its old bit stays set in the old candidates' postings, and no cycle has that slot any more."""
    now = list(_candidates([c.summary for c in batch.calls_of(cycle)]))
    return bool(now) and now != batch.candidates_before.get(id(cycle), [])


def cycles_ingest_events(*, events: Iterable[VerbEvent]) -> int:
    """Fold events into cycles in one transaction; events already ingested are skipped. Returns new calls."""
    return _ingest([prepare(event) for event in sorted(events, key=lambda e: e.started_at)])


def _ingest(prepared: Sequence[Prepared]) -> int:
    """Fold prepared calls into cycles in one transaction; calls already ingested are skipped. Returns new calls.

    A handful of statements per batch whatever its size (the cycles it may join, their verbs, new ids, new cycles
    and new calls by COPY, summaries, node counts, node postings), never one per call.
    """
    ordered = sorted(prepared, key=lambda c: c.started_at)
    if not ordered:
        return 0
    postgres = connection.vendor == "postgresql"
    with transaction.atomic():
        # Taken first: serializes ingesters, so the hash chain follows id order (dashboard.services.audit).
        chain = audit_chain_open()
        if postgres:
            # Replicas ingest concurrently: serialize per pod so two of them cannot both open a cycle. One round
            # trip, the locks taken in sorted order (every ingester sorts alike, so none waits in a cycle).
            uids = sorted({c.pod_uid for c in ordered if c.pod_uid})
            if uids:
                with connection.cursor() as cursor:
                    cursor.execute(
                        "SELECT count(pg_advisory_xact_lock(hashtext(u))) FROM unnest(%s::text[]) AS u", [uids]
                    )
        seen = set(
            VerbCall.objects.filter(event_id__in=[c.event_id for c in ordered]).values_list("event_id", flat=True)
        )
        fresh = []
        for call in ordered:
            if call.event_id not in seen:
                seen.add(call.event_id)
                fresh.append(call)
        if not fresh:
            return 0
        batch = _Batch(fresh)
        new_cycles: list[SchedulingCycle] = []
        touched: dict[int, SchedulingCycle] = {}
        joined: list[tuple[SchedulingCycle, _Call]] = []
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
                new_cycles.append(cycle)
            elif cycle.pk is not None:
                touched[cycle.pk] = cycle
            if new.pod_name and not cycle.pod_name:
                cycle.pod_namespace, cycle.pod_name = new.pod_namespace, new.pod_name
            call = _Call(new.summary, new=new)
            batch.join(cycle, call)
            # The next call's match reads it.
            _summarize(cycle, [c.summary for c in batch.calls_of(cycle)], postgres=postgres)
            joined.append((cycle, call))

        # Ids and candidate slots before the INSERT (PostgreSQL), so calls and postings can point at them.
        postings: list[tuple[int, Sequence[str]]] = []
        if postgres and new_cycles:
            for cycle, new_id in zip(new_cycles, _new_ids(len(new_cycles)), strict=True):
                cycle.id = new_id
        if postgres:
            fresh_slots = [c for c in touched.values() if _candidates_changed(batch, c)]
            for cycle, slot in zip(fresh_slots, _new_ids(len(fresh_slots)) if fresh_slots else [], strict=True):
                cycle.candidate_slot = slot
            for cycle in new_cycles:
                if _candidates([c.summary for c in batch.calls_of(cycle)]):
                    cycle.candidate_slot = cycle.id
            for cycle in [*new_cycles, *fresh_slots]:
                if cycle.candidate_slot is not None:
                    postings.append((cycle.candidate_slot, _candidates([c.summary for c in batch.calls_of(cycle)])))
        _insert_cycles(new_cycles)  # before the calls that point at them
        _upsert_parts([new for new in fresh if new.part is not None])

        rows: list[tuple[Any, ...]] = []
        instances: list[VerbCall] = []
        tallies = _Tallies()
        for cycle, call in joined:
            new = call.new
            assert new is not None
            if new.verb == "prioritize" and (new.refers_to or new.body is not None):
                new = call.new = _referring_right(batch.calls_of(cycle), new)
            values = {
                "cycle_id": cycle.id,
                "event_id": new.event_id,
                "verb": new.verb,
                "started_at": new.at,
                "duration_ms": new.duration_ms,
                "http_status": new.http_status,
                "error": new.error,
                "server": new.server,
                "record": new.record_json,
                "response": new.response_json,
                "body": new.body,
            }
            # In arrival order: the chain's order, and (one COPY below) the ids' order.
            chain_hash = chain.link(call_content(values))
            tallies.add(new)
            if postgres:
                values["chain_hash"] = chain_hash
                rows.append(
                    tuple(
                        _json_column(values[name]) if name in _JSON_COLUMNS else values[name]
                        for name in _CALL_COPY_COLUMNS
                    )
                )
            else:
                instances.append(
                    VerbCall(
                        cycle=cycle,
                        event_id=new.event_id,
                        verb=new.verb,
                        started_at=new.at,
                        duration_ms=new.duration_ms,
                        http_status=new.http_status,
                        error=new.error,
                        server=new.server,
                        record_json=new.record_json,
                        response_json=new.response_json,
                        body=new.body,
                        chain_hash=chain_hash,
                    )
                )
        _insert_calls(rows, instances)
        if touched:
            SchedulingCycle.objects.bulk_update(list(touched.values()), _SUMMARY_FIELDS)
        if postings:
            _postings(postings)
        chain.count(tallies.counts())
        chain.close()
    _explain_binds(batch, joined)
    return len(joined)


def _explain_binds(batch: _Batch, joined: Sequence[tuple[SchedulingCycle, _Call]]) -> None:
    """After the commit: queue an Explained Event (``dashboard.pod_events``) for each successful bind just folded.

    Here the cycle's filter and prioritize calls are together, whichever replica answered them, and its id is known.
    Only the records are decoded here; the explanation and the API call happen in the emitter's thread. Simulated
    binds (demo mode) get none."""
    if not settings.SCHEDLENS_POD_EVENTS:
        return
    from dashboard import pod_events

    if pod_events.emitter().unavailable:  # no cluster configured: skip decoding records for nothing
        return
    for cycle, call in joined:
        new = call.new
        if new is None or new.verb != "bind" or new.error or new.http_status != 200 or not cycle.chosen_node:
            continue
        try:
            siblings = [
                c.stored
                if c.stored is not None
                else VerbCall(
                    event_id=c.new.event_id if c.new is not None else "",
                    verb=c.summary.verb,
                    http_status=c.new.http_status if c.new is not None else 0,
                    record_json=c.new.record_json if c.new is not None else None,
                    response_json=c.new.response_json if c.new is not None else None,
                    body=c.new.body if c.new is not None else None,
                )
                for c in batch.calls_of(cycle)
            ]
            records: dict[str, Any] = {}
            for sibling in siblings:
                sibling.__dict__["siblings"] = siblings
                if sibling.verb in {"filter", "prioritize", "bind"} and sibling.http_status == 200:
                    records[sibling.verb] = sibling.record
            if (records.get("bind") or {}).get("simulated"):
                continue  # no pod was bound in a cluster (demo mode): nothing to write an Event on
            pod_events.explained_bind(cycle=cycle, records=records)
        except Exception:  # the record is written; an Event is a courtesy and never fails the ingest
            log.warning("could not queue the Explained Event of cycle %s", cycle.pk, exc_info=True)


def _ingest_rows(spool: Spool, ready: list[tuple[SpoolRow, Prepared | None]]) -> None:
    """Ingest in one transaction; if the database refuses the batch's content, row by row, setting aside the rows
    it refuses (an outage is raised instead: those rows wait in the spool)."""
    try:
        _ingest([prepared for _, prepared in ready if prepared is not None])
    except (OperationalError, InterfaceError):
        raise
    except Exception:
        log.warning("an ingest batch was refused; retrying its records one by one", exc_info=True)
    else:
        for row, prepared in ready:
            if prepared is None:
                spool.reject(row.id, "not a verb record")
        return
    for row, prepared in ready:
        if prepared is None:
            spool.reject(row.id, "not a verb record")
            continue
        try:
            _ingest([prepared])
        except (OperationalError, InterfaceError):
            raise
        except Exception as exc:
            log.error("spool row %s was refused by the database and set aside: %s", row.id, exc, exc_info=True)
            spool.reject(row.id, f"{type(exc).__name__}: {exc}")


def spool_ingest(
    *,
    spool: Spool,
    batch_size: int = 500,
    max_batches: int | None = None,
    confirm_grace_seconds: float | None = None,
    preparer: Executor | None = None,
    ahead: int = 2,
) -> int:
    """Move records from the spool into the database; safe to run from several processes at once.

    Deleting from the spool only after the database commit means a crash in between re-ingests the batch,
    which the unique ``event_id`` makes harmless. A record whose answer was not confirmed written within
    ``confirm_grace_seconds`` (``SCHEDLENS_ANSWER_CONFIRM_SECONDS``) is stored as a failed call (see
    ``dashboard.spool``). Returns how many records left the spool. The next batch is prepared while one is
    written (``dashboard.services.spool_read_ahead``): by ``preparer``'s processes
    (``dashboard.services.preparing_processes``), kept ``ahead`` batches ahead, else by a thread.
    """
    grace = settings.SCHEDLENS_ANSWER_CONFIRM_SECONDS if confirm_grace_seconds is None else confirm_grace_seconds
    moved = 0
    with spool.ingest_lease() as leased:
        if not leased:
            return 0
        with SpoolReadAhead(
            spool,
            batch_size=batch_size,
            max_batches=max_batches,
            settle=partial(settled, grace_seconds=grace),
            executor=preparer,
        ) as batches:
            for ready in batches:
                _ingest_rows(spool, with_rows(ready))
                spool.delete_through(ready[-1][0].id)
                moved += len(ready)
    return moved
