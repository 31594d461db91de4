"""Day partitions of the record on PostgreSQL (migration 0008): created ahead, dropped whole by retention.

Cycles are partitioned by ``started_at``, calls by ``recorded_at`` (when the ingester stored them, by the database's
clock under the chain lock), one partition per UTC day named ``<table>_pYYYYMMDD``; a DEFAULT partition holds what
no day partition covers (the rows stored before migration 0008, and any day that had none when its rows came).
Node postings are partitioned by block (``POSTING_BLOCKS`` blocks of cycle slots each, ``<table>_b<first block>``),
created two ranges ahead of the cycles' sequence and dropped once no retained cycle has a slot in the range.

Dropping a day of calls drops a stretch of the audit chain. It is done only when that stretch is a prefix of what
remains (no call stored before it is left anywhere), after verifying it from the last checkpoint, and it leaves a
checkpoint at its last call, from which ``audit_chain_verify`` resumes: the chain stays verifiable across the cut.
A day of cycles is dropped once it is wholly older than the cut-off, and not before its day of calls. SQLite (the
demo) has no partitions: every function here is a no-op there, and retention deletes rows
(``dashboard.services.retention``).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

from django.db import DatabaseError, connection, transaction
from django.db.models import Model
from django.utils import timezone

from dashboard.audit.chain import ChainReport, ChainWalk, chain_walk, checkpoint_link
from dashboard.ingest.record_writes import POSTING_BITS
from dashboard.models import AuditCheckpoint, NodePosting, SchedulingCycle, VerbCall
from dashboard.placements.models import PlacementObservation
from dashboard.services.node_tallies import NodeCounts, tallies_subtract_day, tally_cycles

log = logging.getLogger(__name__)

PARTITIONED: tuple[tuple[type[Model], str], ...] = ((SchedulingCycle, "started_at"), (VerbCall, "recorded_at"))
"""The models partitioned by day and their partition keys (migration 0008's ``TABLES``)."""

DAYS_AHEAD = 3
"""Day partitions kept ready beyond today: the periodic task may miss a few runs without rows landing in DEFAULT."""


@dataclass(frozen=True, slots=True)
class DayPartition:
    table: str
    day: date

    @property
    def start(self) -> datetime:
        return datetime.combine(self.day, time(), tzinfo=UTC)

    @property
    def end(self) -> datetime:
        return self.start + timedelta(days=1)


def _partition_name(parent: str, day: date) -> str:
    return f"{parent}_p{day:%Y%m%d}"


def is_partitioned(model: type[Model] = VerbCall) -> bool:
    """The model's table is partitioned (PostgreSQL after migration 0008); by default, the calls'."""
    if connection.vendor != "postgresql":
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)", [model._meta.db_table])
        row = cursor.fetchone()
    return row is not None and row[0] == "p"


def day_partitions(model: type[Model]) -> list[DayPartition]:
    """The model's day partitions, oldest first."""
    parent = model._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = %s::regclass AND c.relname LIKE %s",
            [parent, f"{parent}\\_p%"],
        )
        names = [row[0] for row in cursor.fetchall()]
    found = []
    for name in names:
        try:
            found.append(DayPartition(name, datetime.strptime(name[len(parent) + 2 :], "%Y%m%d").date()))
        except ValueError:
            continue  # not one of ours
    return sorted(found, key=lambda p: p.day)


POSTING_BLOCKS = 4096
"""``NodePosting`` blocks per partition of postings (256 cycle slots a block): a range is dropped once no retained
cycle has a slot in it."""
_POSTING_BOUND = re.compile(r"FROM \('?(-?\d+)'?\) TO \('?(-?\d+)'?\)")


@dataclass(frozen=True, slots=True)
class BlockRange:
    table: str
    start: int
    end: int


def posting_ranges() -> list[BlockRange]:
    """The partitions of ``NodePosting`` by block range, lowest first."""
    parent = NodePosting._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i "
            "JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = %s::regclass",
            [parent],
        )
        rows = cursor.fetchall()
    found = []
    for name, bound in rows:
        if (match := _POSTING_BOUND.search(bound or "")) is not None:
            found.append(BlockRange(name, int(match[1]), int(match[2])))
    return sorted(found, key=lambda r: r.start)


def _last_cycle_id() -> int:
    """The last id the cycles' sequence gave (candidate slots come from it too): 0 before the first."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(pg_sequence_last_value(pg_get_serial_sequence(%s, 'id')::regclass), 0)",
            [SchedulingCycle._meta.db_table],
        )
        return int(cursor.fetchone()[0])


def _posting_ranges_ensure() -> list[str]:
    """The range of postings the next cycles write to, and the one after it."""
    if not is_partitioned(NodePosting):
        return []
    parent = NodePosting._meta.db_table
    block = _last_cycle_id() // POSTING_BITS
    have = {r.start for r in posting_ranges()}
    created = []
    for k in range(2):
        start = (block // POSTING_BLOCKS + k) * POSTING_BLOCKS
        name = f"{parent}_b{start}"
        if start not in have and _partition_create(parent, name, "block", start, start + POSTING_BLOCKS):
            created.append(name)
    return created


def _posting_ranges_drop() -> list[str]:
    """Drop the ranges of postings below every retained cycle's slot (below the next cycle's, when none is left)."""
    if not is_partitioned(NodePosting):
        return []
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT min(candidate_slot) FROM {SchedulingCycle._meta.db_table}")  # noqa: S608
        lowest = cursor.fetchone()[0]
    if lowest is None:
        lowest = _last_cycle_id() + 1
    dropped = []
    for posting_range in posting_ranges():
        if posting_range.end * POSTING_BITS > lowest:
            break
        _drop(posting_range.table, NodePosting._meta.db_table)
        dropped.append(posting_range.table)
    with connection.cursor() as cursor:  # the postings stored before migration 0008: once, row by row
        cursor.execute(
            f"DELETE FROM {NodePosting._meta.db_table}_default WHERE block < %s",  # noqa: S608
            [lowest // POSTING_BITS],
        )
    return dropped


def _partition_create(parent: str, name: str, key: str, low: int | datetime, high: int | datetime) -> bool:
    """Create partition ``name`` of ``parent`` for ``key`` in [low, high); False when rows of that range already
    landed in the DEFAULT partition (a partition cannot be created over them: they stay there, retention deletes
    them row by row)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT 1 FROM {parent}_default WHERE {key} >= %s AND {key} < %s LIMIT 1",  # noqa: S608
            [low, high],
        )
        if cursor.fetchone() is not None:
            return False
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                f"CREATE TABLE IF NOT EXISTS {name} PARTITION OF {parent} FOR VALUES FROM (%s) TO (%s)",
                [low, high],
            )
    except DatabaseError as exc:  # a row of that range arrived meanwhile
        log.warning("partition %s not created: %s", name, exc)
        return False
    return True


def partitions_ensure(*, today: date | None = None, days_ahead: int = DAYS_AHEAD) -> list[str]:
    """Create the day partitions of today and the next ``days_ahead`` days that are missing; the names created.

    A day whose rows already landed in the DEFAULT partition is left there (:func:`_partition_create`). Creating a
    partition scans the DEFAULT partition once, under a lock that holds writers to it: it is small except right
    after migration 0008.
    """
    if not is_partitioned():
        return []
    today = today or timezone.now().astimezone(UTC).date()
    created = []
    for model, key in PARTITIONED:
        parent = model._meta.db_table
        have = {p.day for p in day_partitions(model)}
        for offset in range(days_ahead + 1):
            day = today + timedelta(days=offset)
            partition = DayPartition(_partition_name(parent, day), day)
            if day not in have and _partition_create(parent, partition.table, key, partition.start, partition.end):
                created.append(partition.table)
    return [*created, *_posting_ranges_ensure()]


@dataclass(slots=True)
class PartitionsDropped:
    tables: list[str]
    cycles: int = 0
    calls: int = 0
    checkpoint_call_id: int | None = None
    broken: ChainReport | None = None
    """The verification of a day of calls that failed: retention raises ``AuditChainBrokenError`` with it."""
    held_back: str = ""
    """Why a day of calls older than the cut-off stayed ("" none): calls stored before it remain (the rows stored
    before migration 0008, pruned row by row first)."""


def _drop(table: str, parent: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE {parent} DETACH PARTITION {table}")
        cursor.execute(f"DROP TABLE {table}")


def _call_stretch(table: str) -> tuple[int | None, int]:
    """The last call of a day of calls (None: none) and how many there are."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT max(id), count(*) FROM {table}")  # noqa: S608
        high, count = cursor.fetchone()
    return high, count


def _stored_before_elsewhere(table: str, high: int) -> bool:
    """A call with an id up to ``high`` outside ``table``: dropping ``table`` would not cut a prefix of the chain."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT 1 FROM {VerbCall._meta.db_table} WHERE id <= %s AND tableoid <> %s::regclass LIMIT 1",  # noqa: S608
            [high, table],
        )
        return cursor.fetchone() is not None


@dataclass(frozen=True, slots=True)
class VerifiedDay:
    """A day of calls whose stretch of chain held, from ``after_id`` (excluded) to its last call ``last_id``."""

    after_id: int
    last_id: int
    chain_hash: str
    """The link of ``last_id`` as verified."""


@dataclass(slots=True)
class DaysVerified:
    days: dict[str, VerifiedDay]
    """By the table of the day's calls."""
    broken: ChainReport | None = None
    """The first day whose stretch did not verify; the days after it were not read."""


def days_verify(*, older_than: datetime, chunk_size: int) -> DaysVerified:
    """Verify the days of calls that ``partitions_drop(older_than=…)`` would drop, from the last checkpoint, without
    the chain lock: the ingester goes on storing calls meanwhile (they are newer than any day verified here), so the
    lock is held only for the drop itself.

    ``partitions_drop`` takes a day verified here without reading it again when nothing it depends on moved: the
    checkpoint it starts from, the day's last call and that call's stored link.
    """
    verified = DaysVerified(days={})
    start_id, start_hash = checkpoint_link()
    for partition in day_partitions(VerbCall):
        if partition.end > older_than:
            break
        high, _ = _call_stretch(partition.table)
        if high is None:
            continue
        link, verified.broken = _stretch_verified(start_id, start_hash, high, chunk_size)
        if link is None:
            break
        verified.days[partition.table] = VerifiedDay(start_id, high, link)
        start_id, start_hash = high, link
    return verified


def _stretch_verified(
    start_id: int, start_hash: str, high: int, chunk_size: int
) -> tuple[str, None] | tuple[None, ChainReport]:
    """The link of call ``high`` recomputed from ``start_hash`` (the link of ``start_id``), or why it does not hold."""
    walk = ChainWalk(previous=start_hash)
    chain_walk(walk, after_id=start_id, before_id=high + 1, chunk_size=chunk_size)
    if walk.broken_id is not None or walk.last_id != high:
        return None, walk.report(start_after_id=start_id or None, start_hash=start_hash)
    return walk.previous, None


def _verified_link(day: VerifiedDay | None, *, after_id: int, last_id: int) -> str | None:
    """The link ``days_verify`` found at the end of the day, if that stretch is still the one to drop and its last
    call still carries the link (None: verify it again)."""
    if day is None or day.after_id != after_id or day.last_id != last_id:
        return None
    stored = VerbCall.objects.filter(id=last_id).values_list("chain_hash", flat=True).first()
    return day.chain_hash if stored == day.chain_hash else None


def partitions_drop(
    *,
    older_than: datetime,
    tallies: dict[str, NodeCounts],
    chunk_size: int,
    verified: DaysVerified | None = None,
) -> PartitionsDropped:
    """Drop the days of calls and cycles wholly older than ``older_than``; the caller holds the chain lock in its
    transaction. The per-node counts lose what the dropped calls had added (kept per day: ``tallies_subtract_day``);
    what the dropped cycles had added (preferred and placed nodes) is added to ``tallies`` for the caller to take off.

    A day of calls is verified from the last checkpoint before it is dropped, here or, before the lock was taken, by
    ``days_verify`` (``verified``). Stops at a day that does not verify (``broken``): nothing of it, nor any cycle,
    is dropped.
    """
    dropped = PartitionsDropped(tables=[])
    days = verified.days if verified is not None else {}
    start_id, start_hash = checkpoint_link()
    for partition in day_partitions(VerbCall):
        if partition.end > older_than:
            break
        high, count = _call_stretch(partition.table)
        if high is not None:
            if _stored_before_elsewhere(partition.table, high):
                dropped.held_back = f"{partition.table}: calls stored before it remain, pruned row by row first"
                older_than = partition.start  # its cycles stay with it
                break
            link = _verified_link(days.get(partition.table), after_id=start_id, last_id=high)
            if link is None:
                link, dropped.broken = _stretch_verified(start_id, start_hash, high, chunk_size)
                if link is None:
                    return dropped
            AuditCheckpoint.objects.create(
                last_call_id=high,
                chain_hash=link,
                pruned_before=partition.end,
                cycles_deleted=0,
                calls_deleted=count,
                created_at=timezone.now(),
            )
            start_id, start_hash = high, link
            dropped.checkpoint_call_id = high
        tallies_subtract_day(partition.day)  # what the day's calls had added, kept per day: none read again
        _drop(partition.table, VerbCall._meta.db_table)
        dropped.tables.append(partition.table)
        dropped.calls += count
    for partition in day_partitions(SchedulingCycle):
        if partition.end > older_than:
            break
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT preferred_node, outcome, chosen_node, count(*) FROM {partition.table} "  # noqa: S608
                "GROUP BY preferred_node, outcome, chosen_node"
            )
            for preferred, outcome, chosen, cycles in cursor.fetchall():
                dropped.cycles += cycles
                tally_cycles(tallies, [(preferred, outcome, chosen)], cycles)
            cursor.execute(
                f"UPDATE {PlacementObservation._meta.db_table} SET cycle_id = NULL "  # noqa: S608
                f"WHERE cycle_id IN (SELECT id FROM {partition.table})"
            )
        _drop(partition.table, SchedulingCycle._meta.db_table)
        dropped.tables.append(partition.table)
    dropped.tables += _posting_ranges_drop()
    return dropped


def oldest_day_start() -> datetime | None:
    """The start of the oldest day partition of cycles: the cycles before it are in DEFAULT, pruned row by row
    (None: no day partition)."""
    partitions = day_partitions(SchedulingCycle)
    return partitions[0].start if partitions else None
