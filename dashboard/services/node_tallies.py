"""Per-node counts over the retained calls (``NodeTally``), so that listing nodes is one indexed read.

A call adds to the counts when it is chained (``audit_chain``), and the same function takes it off again when it
is pruned (``retention``): the counts always cover exactly the calls the database still holds. Only answered
filters and binds count: a filter's candidates were *considered* and its failed nodes *filtered out*; a
successful bind is a *placement*.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import repeat
from typing import TYPE_CHECKING, Any

from django.db import connection, transaction
from django.db.models import F
from django.db.models.functions import Greatest

from dashboard.models import NodeTally, VerbCall, shared_part_data
from dashboard.services.bulk_upsert import copy_upsert
from dashboard.services.chain_lock import lock_chain
from dashboard.storage.call_body import body_read

if TYPE_CHECKING:
    from dashboard.services.new_calls import NewCall


@dataclass(slots=True)
class NodeCounts:
    considered: int = 0
    filtered_out: int = 0
    placements: int = 0
    last_seen_at: datetime | None = None


def _record_of_row(values: Mapping[str, Any]) -> dict[str, Any]:
    """The record of a row with canonical names (``record``) or the stored columns (``record_json``, ``body``)."""
    if "record" in values:
        return values["record"] or {}
    if values.get("body") is not None:  # a filter's or bind's body refers to no other call
        return body_read(bytes(values["body"]), filter_records=lambda _event_id: None, shared_parts=shared_part_data)[0]
    return values["record_json"] or {}


def tally_call(tallies: dict[str, NodeCounts], values: Mapping[str, Any]) -> None:
    """What one call adds to the per-node counts (the same function undoes it when pruning)."""
    if values["http_status"] != 200:
        return
    record = _record_of_row(values)
    touched: list[str] = []
    if values["verb"] == "filter":
        touched = record.get("nodes", [])
        for node in touched:  # not setdefault: a NodeCounts is made for a node not seen yet, not for every node
            tally = tallies.get(node)
            if tally is None:
                tally = tallies[node] = NodeCounts()
            tally.considered += 1
        for node in record.get("failures", {}):
            tallies.setdefault(node, NodeCounts()).filtered_out += 1
    elif values["verb"] == "bind" and not values["error"] and record.get("node"):
        tallies.setdefault(record["node"], NodeCounts()).placements += 1
        touched = [record["node"]]
    at = values["started_at"]
    for node in touched:
        tally = tallies[node]
        if tally.last_seen_at is None or at > tally.last_seen_at:
            tally.last_seen_at = at


def tallies_merge(into: dict[str, NodeCounts], more: Mapping[str, NodeCounts]) -> None:
    """Add ``more`` to ``into``: the sums of the counts, the later of the two last-seen times."""
    for node, counts in more.items():
        tally = into.get(node)
        if tally is None:
            into[node] = NodeCounts(counts.considered, counts.filtered_out, counts.placements, counts.last_seen_at)
            continue
        tally.considered += counts.considered
        tally.filtered_out += counts.filtered_out
        tally.placements += counts.placements
        seen = counts.last_seen_at
        if seen is not None and (tally.last_seen_at is None or seen > tally.last_seen_at):
            tally.last_seen_at = seen


def tallies_add(tallies: Mapping[str, NodeCounts]) -> None:
    """One upsert of every node's counts (PostgreSQL: through COPY; SQLite: per chunk of nodes)."""
    if not tallies:
        return
    q = connection.ops.quote_name
    table = q(NodeTally._meta.db_table)
    node, seen = q("node"), q("last_seen_at")
    counters = [q(name) for name in ("considered", "filtered_out", "placements")]
    updates = ", ".join(f"{c} = {table}.{c} + excluded.{c}" for c in counters)
    newest = (
        f"{seen} = CASE WHEN {table}.{seen} IS NULL OR excluded.{seen} > {table}.{seen} "
        f"THEN excluded.{seen} ELSE {table}.{seen} END"
    )
    items = sorted(tallies.items())
    if connection.vendor == "postgresql":
        copy_upsert(
            NodeTally._meta.db_table,
            ["node", "considered", "filtered_out", "placements", "last_seen_at"],
            ((n, t.considered, t.filtered_out, t.placements, t.last_seen_at) for n, t in items),
            f"ON CONFLICT ({node}) DO UPDATE SET {updates}, {newest}",
        )
        return
    per_statement = max(1, (connection.features.max_query_params or 999) // 5)
    with connection.cursor() as cursor:
        for start in range(0, len(items), per_statement):
            chunk = items[start : start + per_statement]
            rows = ", ".join(["(%s, %s, %s, %s, %s)"] * len(chunk))
            params: list[Any] = []
            for name, tally in chunk:
                seen_at = connection.ops.adapt_datetimefield_value(tally.last_seen_at)
                params += [name, tally.considered, tally.filtered_out, tally.placements, seen_at]
            # Identifiers come from the model, every value is a parameter.
            sql = (
                f"INSERT INTO {table} ({node}, {', '.join(counters)}, {seen}) VALUES {rows} "  # noqa: S608
                f"ON CONFLICT ({node}) DO UPDATE SET {updates}, {newest}"
            )
            cursor.execute(sql, params)


def tallies_subtract(tallies: Mapping[str, NodeCounts]) -> None:
    """Take pruned calls' counts off (never below zero), and drop the nodes no retained call counts any more."""
    for name, tally in sorted(tallies.items()):
        NodeTally.objects.filter(node=name).update(
            considered=Greatest(F("considered") - tally.considered, 0),
            filtered_out=Greatest(F("filtered_out") - tally.filtered_out, 0),
            placements=Greatest(F("placements") - tally.placements, 0),
        )
    NodeTally.objects.filter(considered=0, filtered_out=0, placements=0).delete()


def node_tallies_rebuild() -> int:
    """Recount every node from the retained calls (after a restore, or if the counts are ever doubted)."""
    tallies: dict[str, NodeCounts] = {}
    fields = ("verb", "http_status", "error", "record_json", "body", "started_at")
    with transaction.atomic():
        lock_chain()
        for values in VerbCall.objects.filter(verb__in=["filter", "bind"]).values(*fields).iterator(2000):
            tally_call(tallies, values)
        NodeTally.objects.all().delete()
        tallies_add(tallies)
    return len(tallies)


@dataclass
class BatchTallies:
    """Per-node counts of an ingest batch's new calls, as :func:`tally_call` counts them, a distinct list at a time.

    Most filters of a batch list the same candidates (a cluster's nodes, pod after pod), so a list is counted once
    with how many calls listed it, and only :meth:`counts` walks its names. Lists are told apart by identity, not
    content: the same candidate list or outcome is one object from call to call (the spool's reader and the
    hand-over from a builder process share them), and a copy with the same names only adds another entry that counts
    the same nodes, so no tuple of every name is built and hashed per call.
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

    def add(self, call: NewCall) -> None:
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
