"""Per-node counts of an ingest batch's new calls (``node_tallies`` counts and stores them; this gathers a batch's,
as the ingester needs).

A batch's filters list hundreds of candidates each, and kube-scheduler sends no two pods the same list, so whatever
walks the names in Python walks every candidate of every call. Here a call adds only references to its lists
(:meth:`BatchTallies.add`); on PostgreSQL the batch's lists go to the database as a few arrays, concatenated and
JSON-encoded in C, and the database counts them per node in the upsert itself (``record_writes.tallies_upsert``).
SQLite (the demo) counts them here, a node at a time (:meth:`BatchTallies.counts`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from itertools import chain, repeat

from django.db import connection

from dashboard.ingest.new_calls import NewCall
from dashboard.ingest.record_writes import NodeElements, ReasonElements, tallies_upsert
from dashboard.models import REASON_LIMIT, REASON_PLUGIN_LIMIT
from dashboard.services.node_tallies import NodeCounts, Reasons, count_reasons, reason_key, tallies_add
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
            tallies_upsert(self.node_elements(), self.reason_elements(), day=day)
        else:
            tallies_add(self.counts(), day=day)

    # --- PostgreSQL: arrays the database counts ------------------------------------------------------------------

    def node_elements(self) -> NodeElements:
        """One element per candidate, failed node, bound node and moved cycle: the database sums them per node."""
        filters = self.filters
        failed = [list(f.failures) if f.failures else [] for f in filters]
        sizes = [len(f.nodes) for f in filters]
        considered, failures, binds = sum(sizes), sum(map(len, failed)), len(self.binds)
        preferred = {name: change for name, change in self.preferred.items() if change}
        placed = {name: change for name, change in self.placements.items() if change}
        nodes = [*chain.from_iterable(f.nodes for f in filters), *chain.from_iterable(failed)]
        nodes += [name for name, _ in self.binds]
        nodes += [*preferred, *placed]
        seen = [*chain.from_iterable(repeat(_micros(f.at), size) for f, size in zip(filters, sizes, strict=True))]
        seen += repeat(-1, failures)
        seen += [_micros(at) for _, at in self.binds]
        seen += repeat(-1, len(preferred) + len(placed))
        calls = considered + failures + binds
        return NodeElements(
            nodes=nodes,
            considered=[*repeat(1, considered), *repeat(0, len(nodes) - considered)],
            filtered_out=[*repeat(0, considered), *repeat(1, failures), *repeat(0, len(nodes) - considered - failures)],
            preferred=[*repeat(0, calls), *preferred.values(), *repeat(0, len(placed))],
            placements=[*repeat(0, calls + len(preferred)), *placed.values()],
            seen_micros=seen,
            lowered={
                name: (min(preferred.get(name, 0), 0), min(placed.get(name, 0), 0))
                for name in {*preferred, *placed}
                if preferred.get(name, 0) < 0 or placed.get(name, 0) < 0
            },
        )

    def reason_elements(self) -> ReasonElements:
        """One element per failed node and plugin that failed it: the database counts them per node and reason."""
        nodes: list[str] = []
        plugins: list[str] = []
        reasons: list[str] = []
        for f in self.filters:
            if not f.failures:
                continue
            for node, verdicts in f.failures.items():
                nodes += repeat(node, len(verdicts))
                plugins += verdicts
                reasons += verdicts.values()
        if plugins and (max(map(len, plugins)) > REASON_PLUGIN_LIMIT or max(map(len, reasons)) > REASON_LIMIT):
            clipped = [reason_key(p, r) for p, r in zip(plugins, reasons, strict=True)]
            plugins, reasons = [p for p, _ in clipped], [r for _, r in clipped]
        return ReasonElements(nodes=nodes, plugins=plugins, reasons=reasons)

    # --- SQLite: counted here --------------------------------------------------------------------------------------

    def counts(self) -> dict[str, NodeCounts]:
        considered: Counter[str] = Counter()
        filtered_out: Counter[str] = Counter()
        reasons: dict[str, Reasons] = {}
        last_seen: dict[str, datetime] = {}
        seen: list[tuple[datetime, Sequence[str]]] = [(f.at, f.nodes) for f in self.filters]
        seen += [(at, (node,)) for node, at in self.binds]
        for f in self.filters:
            considered.update(f.nodes)
            for name, verdicts in (f.failures or {}).items():
                filtered_out[name] += 1
                count_reasons(reasons.setdefault(name, {}), verdicts, 1)
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
            for name in set(considered) | set(filtered_out) | set(placements) | set(preferred)
        }
        for name, node_reasons in reasons.items():
            counts[name].reasons = node_reasons
        return counts
