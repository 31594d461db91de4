"""Per-node counts of an ingest batch's new calls (``node_tallies`` counts and stores them; this gathers a batch's,
as the ingester needs).

A batch's filters list hundreds of candidates each, and kube-scheduler sends no two pods the same list, so the counts
walk every candidate of every call. They are summed here, per node, with ``Counter.update`` and ``dict.update``
walking each list in C (:meth:`BatchTallies.counts`), so that the database receives one element per node and per
node's reason, whatever the batch's size: on PostgreSQL as a few arrays it upserts in two statements
(``record_writes.tallies_upsert``), elsewhere as rows (``node_tallies.tallies_add``). Summing in the database instead,
an element per candidate, cost PostgreSQL more CPU than the whole ingest's Python (``benchmarks.cost.ingest_parts``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from itertools import repeat

from django.db import connection

from dashboard.ingest.new_calls import NewCall
from dashboard.ingest.record_writes import NodeElements, ReasonElements, tallies_upsert
from dashboard.services.node_tallies import NodeCounts, count_reasons, tallies_add
from scheduler_core.extender.record.structs import BIND, FILTER

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _micros(at: datetime) -> int:
    """``at`` as whole microseconds since the epoch: exact, as the database takes it back (``tallies_upsert``)."""
    return (at - _EPOCH) // datetime.resolution


@dataclass(slots=True)
class _Filter:
    nodes: Sequence[str]
    failures: Mapping[str, Mapping[str, str]] | None
    at: datetime


@dataclass
class BatchTallies:
    """Per-node counts of an ingest batch's new calls, as :func:`node_tallies.tally_call` counts them: the answered
    filters' candidates *considered* and failed nodes *filtered out* (with their reasons), the nodes' latest time
    seen (a filter's candidates, a bind's node), and the cycles' preferred and placed nodes (:meth:`move`)."""

    filters: list[_Filter] = field(default_factory=list)
    binds: list[tuple[str, datetime]] = field(default_factory=list)
    placements: Counter[str] = field(default_factory=Counter)
    """The change in cycles placed on each node (:meth:`move`)."""
    preferred: Counter[str] = field(default_factory=Counter)
    """The change in cycles preferring each node (:meth:`prefer`)."""

    def add(self, call: NewCall) -> None:
        if call.http_status != 200:
            return
        if call.verb == FILTER and call.summary.has_record:
            self.filters.append(_Filter(call.summary.nodes, call.failures, call.at))
        elif call.verb == BIND and not call.error and call.summary.bind_node:
            self.binds.append((call.summary.bind_node, call.at))

    def move(self, before: tuple[str, str], after: tuple[str, str]) -> None:
        """A cycle of the batch preferred and was placed on ``before`` (nodes, "" none, or a new cycle's) and now
        on ``after``."""
        self.prefer(before[0], after[0])
        if before[1] != after[1]:
            if before[1]:
                self.placements[before[1]] -= 1
            if after[1]:
                self.placements[after[1]] += 1

    def prefer(self, before: str, after: str) -> None:
        """A cycle of the batch preferred ``before`` ("" none, or a new cycle) and now prefers ``after``."""
        if before != after:
            if before:
                self.preferred[before] -= 1
            if after:
                self.preferred[after] += 1

    def write(self, *, day: date) -> None:
        """Add the counts to the stored ones, and to ``day``'s share (the day the batch's calls are stored on)."""
        if connection.vendor == "postgresql":
            node_elements, reason_elements = _elements(self.counts())
            tallies_upsert(node_elements, reason_elements, day=day)
        else:
            tallies_add(self.counts(), day=day)

    def counts(self) -> dict[str, NodeCounts]:
        """The batch's counts per node: its changes to each stored count, and the latest time it saw the node."""
        considered: Counter[str] = Counter()
        filtered_out: Counter[str] = Counter()
        reasons: Counter[tuple[str, str, str]] = Counter()
        last_seen: dict[str, datetime] = {}
        seen: list[tuple[datetime, Sequence[str]]] = [(f.at, f.nodes) for f in self.filters]
        seen += [(at, (node,)) for node, at in self.binds]
        for f in self.filters:
            considered.update(f.nodes)
            if f.failures:
                filtered_out.update(f.failures.keys())  # (the keys: a mapping would add its values)
                reasons.update(
                    (name, plugin, reason)
                    for name, verdicts in f.failures.items()
                    for plugin, reason in verdicts.items()
                )
        for at, names in sorted(seen, key=lambda item: item[0]):  # oldest first: the latest time of each node wins
            last_seen.update(zip(names, repeat(at)))
        preferred = {name: change for name, change in self.preferred.items() if change}
        placements = {name: change for name, change in self.placements.items() if change}
        counts = {
            name: NodeCounts(
                considered.get(name, 0),
                filtered_out.get(name, 0),
                placements.get(name, 0),
                last_seen.get(name),
                preferred.get(name, 0),
            )
            for name in considered.keys()
            | filtered_out.keys()
            | placements.keys()
            | preferred.keys()
            | last_seen.keys()
        }
        for (name, plugin, reason), times in reasons.items():
            node = counts[name]
            if node.reasons is None:
                node.reasons = {}
            count_reasons(node.reasons, {plugin: reason}, times)  # cut to the columns' widths, as every writer cuts
        return counts


def _elements(counts: Mapping[str, NodeCounts]) -> tuple[NodeElements, ReasonElements]:
    """The batch's counts as ``tallies_upsert``'s arrays: one element per node, one per node's reason."""
    items = sorted(counts.items())
    reasons = [(name, key, times) for name, c in items if c.reasons for key, times in c.reasons.items()]
    return (
        NodeElements(
            nodes=[name for name, _ in items],
            considered=[c.considered for _, c in items],
            filtered_out=[c.filtered_out for _, c in items],
            preferred=[c.preferred for _, c in items],
            placements=[c.placements for _, c in items],
            seen_micros=[-1 if c.last_seen_at is None else _micros(c.last_seen_at) for _, c in items],
            lowered={
                name: (min(c.preferred, 0), min(c.placements, 0))
                for name, c in items
                if c.preferred < 0 or c.placements < 0
            },
        ),
        ReasonElements(
            nodes=[name for name, _, _ in reasons],
            plugins=[plugin for _, (plugin, _), _ in reasons],
            reasons=[reason for _, (_, reason), _ in reasons],
            counts=[times for _, _, times in reasons],
        ),
    )
