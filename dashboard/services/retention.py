"""Retention of the scheduling record: old cycles are deleted as a prefix of the audit chain, never a gap.

A prune verifies the stretch of chain it is about to delete (evidence that does not verify is never deleted),
deletes it, and leaves an ``AuditCheckpoint`` with its last link, from which ``audit_chain_verify`` resumes.
The per-node counts lose what the deleted calls and cycles had added, and shared parts no remaining call can refer
to go too, as do the placement observations that occurred before the cut-off.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from datetime import datetime

from django.db import connection, transaction
from django.db.models import Max, Min
from django.utils import timezone

from dashboard.audit.chain import ChainReport, ChainWalk, chain_walk, checkpoint_link
from dashboard.audit.lock import lock_chain
from dashboard.models import AuditCheckpoint, SchedulingCycle, SharedPart, VerbCall
from dashboard.placements.models import PlacementObservation
from dashboard.services.node_tallies import (
    DayTallies,
    NodeCounts,
    tallies_subtract,
    tallies_subtract_calls,
    tally_cycles,
)
from dashboard.services.partitions import (
    DaysVerified,
    PartitionsDropped,
    days_verify,
    is_partitioned,
    oldest_day_start,
    partitions_drop,
)

log = logging.getLogger(__name__)


class AuditChainBrokenError(Exception):
    """Raised instead of pruning a stretch of the chain that does not verify: evidence is never deleted."""

    def __init__(self, report: ChainReport) -> None:
        super().__init__(f"audit chain broken at call {report.first_broken_id}: {report.reason}")
        self.report = report


@dataclass(frozen=True, slots=True)
class PruneResult:
    cycles_deleted: int
    calls_deleted: int
    parts_deleted: int
    """Shared parts (``SharedPart``) no remaining call refers to."""
    checkpoint_call_id: int | None
    """The last deleted call: verification resumes after it. None when nothing was deleted."""
    held_back: int
    """Cycles older than the cut-off kept because some of their calls were chained after newer cycles' calls
    (a late bind): the chain can only lose a prefix. A later prune takes them."""
    partitions_dropped: tuple[str, ...] = ()
    """PostgreSQL: the day partitions dropped whole (``dashboard.services.partitions``)."""
    partitions_held_back: str = ""
    """PostgreSQL: why a day of calls past the cut-off was kept ("" none)."""
    observations_deleted: int = 0
    """Placement observations (``dashboard.placements``) that occurred before the cut-off."""
    verified_seconds: float = 0.0
    """Spent verifying the days to drop before taking the chain lock (ingest went on meanwhile)."""
    locked_seconds: float = 0.0
    """Spent holding the chain lock: what ingest waited (its records stayed in the spool)."""


def _prune_parts() -> int:
    """Delete the shared parts no remaining call can refer to: last used before the oldest remaining cycle started.

    A call refers to a part only if the part's ``last_used_at`` is at least the call's start, which is at least its
    cycle's (a cycle starts with its first call); the cycles' newest-first index finds the oldest at once.
    """
    oldest = SchedulingCycle.objects.aggregate(m=Min("started_at"))["m"]
    doomed = SharedPart.objects.all() if oldest is None else SharedPart.objects.filter(last_used_at__lt=oldest)
    return doomed.delete()[0]


def _prune_boundary(older_than: datetime) -> int:
    """The id of the first call that stays: every call below it belongs to a cycle older than the cut-off."""
    # Calls in id order, each looked up in the cycles until the first that stays: after the days dropped whole, it is
    # among the first few. Asked as a join with min(), PostgreSQL hashes every call of the retained history instead.
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT c.id FROM {VerbCall._meta.db_table} c WHERE EXISTS (SELECT 1 FROM "  # noqa: S608
            f"{SchedulingCycle._meta.db_table} s WHERE s.id = c.cycle_id AND s.started_at >= %s) ORDER BY c.id LIMIT 1",
            [older_than],
        )
        row = cursor.fetchone()
    boundary = row[0] if row is not None else (VerbCall.objects.aggregate(m=Max("id"))["m"] or 0) + 1
    while True:  # a cycle straddling the boundary stays whole, so the boundary moves below its first call
        lower = VerbCall.objects.filter(id__lt=boundary, cycle__calls__id__gte=boundary).aggregate(m=Min("id"))["m"]
        if lower is None:
            return int(boundary)
        boundary = lower


def cycles_prune(*, older_than: datetime, dry_run: bool = False, batch_size: int = 2000) -> PruneResult:
    """Delete the cycles that started before ``older_than``, keeping the chain verifiable.

    The stretch of chain to delete is verified first (a broken one raises ``AuditChainBrokenError`` and
    nothing is deleted), then an ``AuditCheckpoint`` keeps its last link. Holds the chain lock, so ingest
    waits (its records stay in the spool) while a prune runs; the whole days it drops are verified before it takes
    the lock (``days_verify``), so that wait is the drop's, not the verification's.
    """
    began = time.monotonic()
    partitioned = is_partitioned()
    verified = days_verify(older_than=older_than, chunk_size=batch_size) if partitioned else DaysVerified(days={})
    if verified.broken is not None:
        raise AuditChainBrokenError(verified.broken)
    verified_seconds = time.monotonic() - began
    with transaction.atomic():
        # Not chained: they go before the lock is taken, in the same transaction (a dry run keeps them).
        observations_deleted = PlacementObservation.objects.filter(occurred_at__lt=older_than).delete()[0]
        lock_chain()
        locked = time.monotonic()
        removed_calls: DayTallies = {}
        removed: dict[str, NodeCounts] = {}  # the deleted cycles'
        dropped = PartitionsDropped(tables=[])
        if partitioned:
            # Whole days first; then row by row the cycles that started before the oldest day left (the rows stored
            # before migration 0008, a day that had no partition, a late spool's): a day is kept whole until all of
            # it is past the cut-off.
            dropped = partitions_drop(older_than=older_than, tallies=removed, chunk_size=batch_size, verified=verified)
            if dropped.broken is not None:
                raise AuditChainBrokenError(dropped.broken)
            older_than = min(older_than, oldest_day_start() or older_than)
        boundary = _prune_boundary(older_than)
        start_id, start_hash = checkpoint_link()
        walk = ChainWalk(previous=start_hash)
        chain_walk(walk, after_id=start_id, before_id=boundary, chunk_size=batch_size, tallies=removed_calls)
        if walk.broken_id is not None:
            raise AuditChainBrokenError(walk.report(start_after_id=start_id or None, start_hash=start_hash))
        calls_deleted, _ = VerbCall.objects.filter(id__lt=boundary).delete()
        cycles_deleted = 0
        doomed = SchedulingCycle.objects.filter(started_at__lt=older_than, calls__isnull=True)
        while found := list(doomed.values_list("id", "preferred_node", "outcome", "chosen_node")[:batch_size]):
            tally_cycles(removed, ((preferred, outcome, chosen) for _, preferred, outcome, chosen in found))
            ids = [cycle_id for cycle_id, *_ in found]
            cycles_deleted += SchedulingCycle.objects.filter(id__in=ids).delete()[1].get(SchedulingCycle._meta.label, 0)
        if walk.last_id is not None:
            AuditCheckpoint.objects.create(
                last_call_id=walk.last_id,
                chain_hash=walk.previous,
                pruned_before=older_than,
                cycles_deleted=cycles_deleted,
                calls_deleted=calls_deleted,
                created_at=timezone.now(),
            )
        tallies_subtract_calls(removed_calls)
        tallies_subtract(removed)
        parts_deleted = _prune_parts()
        result = PruneResult(
            cycles_deleted=cycles_deleted + dropped.cycles,
            calls_deleted=calls_deleted + dropped.calls,
            parts_deleted=parts_deleted,
            checkpoint_call_id=walk.last_id if walk.last_id is not None else dropped.checkpoint_call_id,
            held_back=SchedulingCycle.objects.filter(started_at__lt=older_than).count(),
            partitions_dropped=tuple(dropped.tables),
            partitions_held_back=dropped.held_back,
            observations_deleted=observations_deleted,
            verified_seconds=verified_seconds,
        )
        if dry_run:
            transaction.set_rollback(True)
    result = replace(result, locked_seconds=time.monotonic() - locked)
    log.info(
        "retention%s: %d cycles and %d calls before %s, partitions %s; verified for %.1f s, chain lock held %.1f s",
        " (dry run)" if dry_run else "",
        result.cycles_deleted,
        result.calls_deleted,
        older_than.isoformat(),
        ", ".join(result.partitions_dropped) or "none",
        result.verified_seconds,
        result.locked_seconds,
    )
    return result
