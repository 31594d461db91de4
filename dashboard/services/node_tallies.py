"""Per-node counts over the retained record (``NodeTally``, ``NodeReasonTally``), so that listing nodes, and why
they were filtered out, is one indexed read each.

A call adds to the counts when it is chained (``dashboard.audit.chain``), and the same function takes it off again
when it is pruned (``retention``): the counts always cover exactly the calls the database still holds. Only answered
filters count: a filter's candidates were *considered*, its failed nodes *filtered out*, each for the reasons its
plugins gave (one count per node, plugin and reason).

*Preferred* and *placements* count cycles, not calls: a cycle's highest-scored node (``preferred_node``) and the node
it was bound to (``chosen_node`` of a ``bound`` cycle, whether schedlens bound it or the placement watcher saw
kube-scheduler do it) are derived from its calls together, re-derived when a late call joins it, and concluded by the
watcher. The ingester adds each new cycle's and moves each re-derived one's (``batch_tallies``), the watcher
adds the placements it concludes, the pruner takes off the deleted cycles' (:func:`tally_cycles`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import Count, F, Model
from django.db.models.functions import Greatest

from dashboard.audit.lock import lock_chain
from dashboard.ingest.sanitize import clip
from dashboard.models import (
    REASON_LIMIT,
    REASON_PLUGIN_LIMIT,
    NodeDayReasonTally,
    NodeDayTally,
    NodeReasonTally,
    NodeTally,
    Outcome,
    SchedulingCycle,
    VerbCall,
    shared_part_data,
)
from dashboard.storage.call_body_read import body_read
from dashboard.storage.call_record import record_from_json
from scheduler_core.extender.record.structs import BIND, FILTER, CallRecord

Reasons = dict[tuple[str, str], int]
"""(plugin, reason) → how many filter calls failed a node for it (a plain dict: a batch makes one per failed node)."""


@dataclass(slots=True)
class NodeCounts:
    considered: int = 0
    filtered_out: int = 0
    placements: int = 0
    last_seen_at: datetime | None = None
    preferred: int = 0
    """Cycles preferring the node; in a batch's counts, the change (a re-derived cycle may move it: negative)."""
    reasons: Reasons | None = None
    """Why the node was filtered out (None: it never was)."""

    def count_reasons(self, verdicts: Mapping[str, str]) -> None:
        """Count a filter's verdicts on the node, {plugin: reason}."""
        if self.reasons is None:
            self.reasons = {}
        count_reasons(self.reasons, verdicts, 1)

    def add_reasons(self, more: Reasons) -> None:
        reasons = self.reasons
        if reasons is None:
            self.reasons = dict(more)
            return
        for key, count in more.items():
            reasons[key] = reasons.get(key, 0) + count


def reason_key(plugin: str, reason: str) -> tuple[str, str]:
    """A failure's key in ``NodeReasonTally``: cut to the columns' widths, as every writer and the rebuild cut it."""
    return clip(plugin, REASON_PLUGIN_LIMIT), clip(reason, REASON_LIMIT)


def count_reasons(reasons: Reasons, verdicts: Mapping[str, str], times: int) -> None:
    for plugin, reason in verdicts.items():
        key = (plugin, reason)
        if len(plugin) > REASON_PLUGIN_LIMIT or len(reason) > REASON_LIMIT:
            key = reason_key(plugin, reason)
        reasons[key] = reasons.get(key, 0) + times


def _record_of_row(values: Mapping[str, Any]) -> CallRecord:
    """The record of a row with canonical names (``record``, as JSON) or the stored columns (``record_json``,
    ``body``)."""
    verb = values["verb"]
    if "record" in values:
        return record_from_json(verb, values["record"])
    if values.get("body") is not None:  # a filter's or bind's body refers to no other call
        return body_read(bytes(values["body"]), filter_records=lambda _event_id: None, shared_parts=shared_part_data)[0]
    return record_from_json(verb, values["record_json"])


def tally_call(tallies: dict[str, NodeCounts], values: Mapping[str, Any]) -> None:
    """What one call adds to the per-node counts (the same function undoes it when pruning)."""
    verb = values["verb"]
    if values["http_status"] != 200 or verb not in {FILTER, BIND}:
        return  # not decoded: nothing else counts
    record = _record_of_row(values)
    touched: list[str] = []
    if (filtered := record.filter) is not None:
        touched = filtered.nodes
        for node in touched:  # not setdefault: a NodeCounts is made for a node not seen yet, not for every node
            tally = tallies.get(node)
            if tally is None:
                tally = tallies[node] = NodeCounts()
            tally.considered += 1
        for node, verdicts in filtered.failures.items():
            tally = tallies.setdefault(node, NodeCounts())
            tally.filtered_out += 1
            tally.count_reasons(verdicts)
    elif not values["error"] and record.bind is not None and record.bind.node:
        touched = [record.bind.node]
        tallies.setdefault(record.bind.node, NodeCounts())
    at = values["started_at"]
    for node in touched:
        tally = tallies[node]
        if tally.last_seen_at is None or at > tally.last_seen_at:
            tally.last_seen_at = at


def placed_node(outcome: str, chosen_node: str) -> str:
    """The node a cycle counts a placement for ("" none)."""
    return chosen_node if outcome == Outcome.BOUND else ""


def tally_cycles(tallies: dict[str, NodeCounts], cycles: Iterable[tuple[str, str, str]], times: int = 1) -> None:
    """What cycles ((preferred_node, outcome, chosen_node) each, ``times`` over) add to the per-node counts (the
    pruner subtracts it)."""
    for preferred, outcome, chosen in cycles:
        if preferred:
            tallies.setdefault(preferred, NodeCounts()).preferred += times
        if placed := placed_node(outcome, chosen):
            tallies.setdefault(placed, NodeCounts()).placements += times


def tally_placement(node: str) -> None:
    """The placement watcher concluded a cycle bound to ``node`` (kube-scheduler bound the pod)."""
    tallies_add({node: NodeCounts(placements=1)})


def tallies_merge(into: dict[str, NodeCounts], more: Mapping[str, NodeCounts]) -> None:
    """Add ``more`` to ``into``: the sums of the counts, the later of the two last-seen times. The reason counts of a
    node new to ``into`` are taken over, not copied (a batch's, a thousand nodes each): ``more`` is not used after."""
    for node, counts in more.items():
        tally = into.get(node)
        if tally is None:
            into[node] = NodeCounts(
                counts.considered,
                counts.filtered_out,
                counts.placements,
                counts.last_seen_at,
                counts.preferred,
                counts.reasons,
            )
            continue
        tally.considered += counts.considered
        tally.filtered_out += counts.filtered_out
        tally.placements += counts.placements
        tally.preferred += counts.preferred
        if counts.reasons:
            tally.add_reasons(counts.reasons)
        seen = counts.last_seen_at
        if seen is not None and (tally.last_seen_at is None or seen > tally.last_seen_at):
            tally.last_seen_at = seen


def _copy_upsert(table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]], conflict: str) -> None:
    """PostgreSQL: COPY ``rows`` into a temporary table like ``table``, then one ``INSERT … SELECT … ON CONFLICT``.

    COPY streams thousands of values without building (and quoting, client side) a statement that holds them all.
    ``conflict`` is the ``ON CONFLICT`` clause; ``table`` and ``columns`` are identifiers from a model."""
    q = connection.ops.quote_name
    staging = q(f"staging_{table}")
    names = ", ".join(q(c) for c in columns)
    with connection.cursor() as cursor:
        cursor.execute(  # the columns' types, without constraints or defaults; once per connection
            f"CREATE TEMPORARY TABLE IF NOT EXISTS {staging} AS SELECT {names} FROM {q(table)} WITH NO DATA"  # noqa: S608
        )
        with cursor.cursor.copy(f"COPY {staging} ({names}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        cursor.execute(f"INSERT INTO {q(table)} ({names}) SELECT {names} FROM {staging} {conflict}")  # noqa: S608
        cursor.execute(f"TRUNCATE {staging}")


def _upsert(table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], conflict: str) -> None:
    """Insert ``rows`` or update on ``conflict`` (PostgreSQL: through COPY; SQLite: per chunk of rows)."""
    if not rows:
        return
    if connection.vendor == "postgresql":
        _copy_upsert(table, columns, rows, conflict)
        return
    q = connection.ops.quote_name
    per_statement = max(1, (connection.features.max_query_params or 999) // len(columns))
    placeholders = f"({', '.join(['%s'] * len(columns))})"
    with connection.cursor() as cursor:
        for start in range(0, len(rows), per_statement):
            chunk = rows[start : start + per_statement]
            params = [
                connection.ops.adapt_datetimefield_value(v) if isinstance(v, datetime) else v for r in chunk for v in r
            ]
            # Identifiers come from the model, every value is a parameter.
            sql = (
                f"INSERT INTO {q(table)} ({', '.join(q(c) for c in columns)}) "  # noqa: S608
                f"VALUES {', '.join([placeholders] * len(chunk))} {conflict}"
            )
            cursor.execute(sql, params)


def tallies_add(tallies: Mapping[str, NodeCounts], *, day: date | None = None) -> None:
    """One upsert of every node's counts, and one of their reasons (a cycle's preference moved away from a node,
    rare, is one more update); ``day``: the calls counted were stored that day, and their share of the call counts is
    kept for it too (``NodeDayTally``, ``NodeDayReasonTally``)."""
    if not tallies:
        return
    if day is not None:
        _day_tallies_add(tallies, day)
    q = connection.ops.quote_name
    table = q(NodeTally._meta.db_table)
    node, seen = q("node"), q("last_seen_at")
    counters = [q(name) for name in ("considered", "filtered_out", "placements", "preferred")]
    updates = ", ".join(f"{c} = {table}.{c} + excluded.{c}" for c in counters)
    newest = (
        f"{seen} = CASE WHEN {table}.{seen} IS NULL OR excluded.{seen} > {table}.{seen} "
        f"THEN excluded.{seen} ELSE {table}.{seen} END"
    )
    items = sorted(tallies.items())
    _upsert(
        NodeTally._meta.db_table,
        ["node", "considered", "filtered_out", "placements", "preferred", "last_seen_at"],
        [
            (n, t.considered, t.filtered_out, max(t.placements, 0), max(t.preferred, 0), t.last_seen_at)
            for n, t in items
        ],
        f"ON CONFLICT ({node}) DO UPDATE SET {updates}, {newest}",
    )
    # A stored cycle whose preference or placement a late call moved: never below zero, never an insert (the node
    # was counted).
    for name, tally in items:
        if tally.preferred < 0 or tally.placements < 0:
            NodeTally.objects.filter(node=name).update(
                preferred=Greatest(F("preferred") + min(tally.preferred, 0), 0),
                placements=Greatest(F("placements") + min(tally.placements, 0), 0),
            )
    reasons = q(NodeReasonTally._meta.db_table)
    _upsert(
        NodeReasonTally._meta.db_table,
        ["node", "plugin", "reason", "count"],
        [(n, plugin, reason, count) for n, t in items if t.reasons for (plugin, reason), count in t.reasons.items()],
        f"ON CONFLICT ({node}, {q('plugin')}, {q('reason')}) DO UPDATE SET {q('count')} = {reasons}.{q('count')} "
        f"+ excluded.{q('count')}",
    )


def _day_tallies_add(tallies: Mapping[str, NodeCounts], day: date) -> None:
    q = connection.ops.quote_name
    table = q(NodeDayTally._meta.db_table)
    counters = [q(name) for name in ("considered", "filtered_out")]
    items = sorted(tallies.items())
    _upsert(
        NodeDayTally._meta.db_table,
        ["day", "node", "considered", "filtered_out"],
        [(day, n, t.considered, t.filtered_out) for n, t in items if t.considered or t.filtered_out],
        f"ON CONFLICT ({q('day')}, {q('node')}) DO UPDATE SET "
        + ", ".join(f"{c} = {table}.{c} + excluded.{c}" for c in counters),
    )
    reasons = q(NodeDayReasonTally._meta.db_table)
    _upsert(
        NodeDayReasonTally._meta.db_table,
        ["day", "node", "plugin", "reason", "count"],
        [(day, n, p, r, c) for n, t in items if t.reasons for (p, r), c in t.reasons.items()],
        f"ON CONFLICT ({q('day')}, {q('node')}, {q('plugin')}, {q('reason')}) DO UPDATE SET {q('count')} = "
        f"{reasons}.{q('count')} + excluded.{q('count')}",
    )


DayTallies = dict[date, dict[str, NodeCounts]]
"""Per-node counts by the day the calls counted were stored (their ``recorded_at``, UTC)."""


def tallies_subtract_calls(tallies: DayTallies) -> None:
    """Take pruned calls' counts off the totals and off the shares of the days they were stored on."""
    _subtract(
        NodeDayTally,
        ("day", "node"),
        ("considered", "filtered_out"),
        [
            (day, name, t.considered, t.filtered_out)
            for day, counts in sorted(tallies.items())
            for name, t in sorted(counts.items())
            if t.considered or t.filtered_out
        ],
    )
    _subtract(
        NodeDayReasonTally,
        ("day", "node", "plugin", "reason"),
        ("count",),
        [
            (day, name, plugin, reason, count)
            for day, counts in sorted(tallies.items())
            for name, t in sorted(counts.items())
            for (plugin, reason), count in sorted((t.reasons or {}).items())
        ],
    )
    NodeDayTally.objects.filter(considered=0, filtered_out=0).delete()
    NodeDayReasonTally.objects.filter(count=0).delete()
    totals: dict[str, NodeCounts] = {}
    for counts in tallies.values():
        for name, tally in counts.items():
            tallies_merge(totals, {name: replace(tally, reasons=dict(tally.reasons or {}) or None)})
    tallies_subtract(totals)


def tallies_subtract_day(day: date) -> None:
    """PostgreSQL: take off the totals what the calls stored on ``day`` had added (its ``NodeDayTally`` and
    ``NodeDayReasonTally`` rows, then gone), when that day's calls are dropped whole."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {NodeTally._meta.db_table} AS t SET "  # noqa: S608
            "considered = GREATEST(t.considered - d.considered, 0), "
            "filtered_out = GREATEST(t.filtered_out - d.filtered_out, 0) "
            f"FROM {NodeDayTally._meta.db_table} AS d WHERE d.day = %s AND d.node = t.node",
            [day],
        )
        cursor.execute(
            f"UPDATE {NodeReasonTally._meta.db_table} AS t SET count = GREATEST(t.count - d.count, 0) "  # noqa: S608
            f"FROM {NodeDayReasonTally._meta.db_table} AS d "
            "WHERE d.day = %s AND d.node = t.node AND d.plugin = t.plugin AND d.reason = t.reason",
            [day],
        )
    NodeDayTally.objects.filter(day=day).delete()
    NodeDayReasonTally.objects.filter(day=day).delete()
    NodeTally.objects.filter(considered=0, filtered_out=0, placements=0, preferred=0).delete()
    NodeReasonTally.objects.filter(count=0).delete()


def tallies_subtract(tallies: Mapping[str, NodeCounts]) -> None:
    """Take pruned calls' (and cycles') counts off, never below zero, and drop the nodes and reasons no retained
    record counts any more."""
    _subtract(
        NodeTally,
        ("node",),
        ("considered", "filtered_out", "placements", "preferred"),
        [(n, t.considered, t.filtered_out, t.placements, t.preferred) for n, t in sorted(tallies.items())],
    )
    NodeTally.objects.filter(considered=0, filtered_out=0, placements=0, preferred=0).delete()
    _subtract(
        NodeReasonTally,
        ("node", "plugin", "reason"),
        ("count",),
        [(n, p, r, c) for n, t in sorted(tallies.items()) if t.reasons for (p, r), c in sorted(t.reasons.items())],
    )
    NodeReasonTally.objects.filter(count=0).delete()


def _subtract(model: type[Model], keys: tuple[str, ...], amounts: tuple[str, ...], rows: list[tuple[Any, ...]]) -> None:
    """Take each row's amounts off the counts of ``model``'s row matched by its keys (a row is its keys' values,
    then its amounts'), never below zero: one statement on PostgreSQL, one per row elsewhere."""
    if not rows:
        return
    if connection.vendor != "postgresql":
        for row in rows:
            model._default_manager.filter(**dict(zip(keys, row, strict=False))).update(  # (a model given as a type)
                **{a: Greatest(F(a) - n, 0) for a, n in zip(amounts, row[len(keys) :], strict=True)}
            )
        return
    # get_field may also answer a relation, which has no column: these names are the model's own columns.
    column = {name: model._meta.get_field(name).column for name in (*keys, *amounts)}  # type: ignore[union-attr]
    arrays = [f"%s::{model._meta.get_field(k).db_type(connection)}[]" for k in keys] + ["%s::bigint[]"] * len(amounts)
    sets = ", ".join(f"{column[a]} = GREATEST(t.{column[a]} - v.{a}, 0)" for a in amounts)
    match = " AND ".join(f"t.{column[k]} = v.{k}" for k in keys)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {model._meta.db_table} AS t SET {sets} "  # noqa: S608
            f"FROM unnest({', '.join(arrays)}) AS v({', '.join((*keys, *amounts))}) WHERE {match}",
            [list(values) for values in zip(*rows, strict=True)],
        )


def node_tallies_rebuild() -> int:
    """Recount every node from the retained record (after a restore, or if the counts are ever doubted)."""
    tallies: dict[str, NodeCounts] = {}
    by_day: dict[date, dict[str, NodeCounts]] = {}
    fields = ("verb", "http_status", "error", "record_json", "body", "started_at", "recorded_at")
    with transaction.atomic():
        lock_chain()
        for values in VerbCall.objects.filter(verb__in=[FILTER, BIND]).values(*fields).iterator(2000):
            tally_call(by_day.setdefault(values["recorded_at"].astimezone(UTC).date(), {}), values)
        for day_tallies in by_day.values():
            for name, counts in day_tallies.items():
                tallies_merge(tallies, {name: replace(counts, reasons=dict(counts.reasons or {}) or None)})
        for preferred, outcome, chosen, cycles in SchedulingCycle.objects.values_list(
            "preferred_node", "outcome", "chosen_node"
        ).annotate(Count("id")):
            tally_cycles(tallies, [(preferred, outcome, chosen)], cycles)
        NodeTally.objects.all().delete()
        NodeReasonTally.objects.all().delete()
        NodeDayTally.objects.all().delete()
        NodeDayReasonTally.objects.all().delete()
        tallies_add(tallies)
        for day, day_tallies in by_day.items():
            _day_tallies_add(day_tallies, day)
    return len(tallies)
