"""Per-node counts of an ingest batch's new calls (``node_tallies`` counts and stores them; this counts a batch's
calls a distinct list at a time, as the ingester needs)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import repeat

from dashboard.ingest.new_calls import NewCall
from dashboard.services.node_tallies import NodeCounts, Reasons, count_reasons
from scheduler_core.record import BIND, FILTER


@dataclass
class BatchTallies:
    """Per-node counts of an ingest batch's new calls, as :func:`tally_call` counts them, a distinct list at a time.

    Most filters of a batch list the same candidates (a cluster's nodes, pod after pod), and fail the same nodes for
    the same reasons, so a list (or a filter's failures) is counted once with how many calls had it, and only
    :meth:`counts` walks it. They are told apart by identity, not content: the same candidate list or outcome is one
    object from call to call (the spool's reader and the hand-over from a builder process share them), and a copy
    with the same names only adds another entry that counts the same nodes, so no tuple of every name is built and
    hashed per call.
    """

    considered: Counter[int] = field(default_factory=Counter)
    """Candidate list (by ``id``) → how many filter calls listed it."""
    filtered_out: Counter[int] = field(default_factory=Counter)
    """A filter's failures, {node: {plugin: reason}} (by ``id``) → how many filter calls had them."""
    placements: Counter[str] = field(default_factory=Counter)
    """The change in cycles placed on each node (:meth:`move`)."""
    preferred: Counter[str] = field(default_factory=Counter)
    """The change in cycles preferring each node (:meth:`prefer`)."""
    seen: dict[int | str, datetime] = field(default_factory=dict)
    """Candidate lists (by ``id``) and single bound nodes → the latest time they were seen, in the order last seen."""
    lists: dict[int, Sequence[str]] = field(default_factory=dict)
    """The lists counted, held so that their ids stay theirs."""
    failures: dict[int, Mapping[str, Mapping[str, str]]] = field(default_factory=dict)
    """The failures counted, held likewise."""

    def _key(self, names: Sequence[str]) -> int:
        self.lists[id(names)] = names
        return id(names)

    def add(self, call: NewCall) -> None:
        if call.http_status != 200:
            return
        if call.verb == FILTER and call.summary.has_record:
            nodes = self._key(call.summary.nodes)
            self.considered[nodes] += 1
            if call.failures:
                self.failures[id(call.failures)] = call.failures
                self.filtered_out[id(call.failures)] += 1
            self.seen.pop(nodes, None)
            self.seen[nodes] = call.at  # calls come in time order: the latest wins
        elif call.verb == BIND and not call.error and call.summary.bind_node:
            self.seen.pop(call.summary.bind_node, None)
            self.seen[call.summary.bind_node] = call.at

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

    def counts(self) -> dict[str, NodeCounts]:
        considered: Counter[str] = Counter()
        for key, times in self.considered.items():
            if times == 1:
                considered.update(self.lists[key])
            else:
                for name in self.lists[key]:
                    considered[name] += times
        filtered_out: Counter[str] = Counter()
        reasons: dict[str, Reasons] = {}
        for key, times in self.filtered_out.items():
            for name, verdicts in self.failures[key].items():
                filtered_out[name] += times
                node_reasons = reasons.get(name)
                if node_reasons is None:
                    node_reasons = reasons[name] = {}
                count_reasons(node_reasons, verdicts, times)
        last_seen: dict[str, datetime] = {}
        for seen, at in self.seen.items():  # oldest first: the latest time of each node wins
            names = (seen,) if isinstance(seen, str) else self.lists[seen]
            last_seen.update(zip(names, repeat(at)))
        counts = self._merged(considered, filtered_out, last_seen)
        for name, node_reasons in reasons.items():
            counts[name].reasons = node_reasons
        return counts

    def _merged(
        self, considered: Counter[str], filtered_out: Counter[str], last_seen: dict[str, datetime]
    ) -> dict[str, NodeCounts]:
        preferred = {name: change for name, change in self.preferred.items() if change}
        placements = {name: change for name, change in self.placements.items() if change}
        names = set(considered) | set(filtered_out) | set(placements) | set(preferred)
        return {
            name: NodeCounts(
                considered.get(name, 0),
                filtered_out.get(name, 0),
                placements.get(name, 0),
                last_seen.get(name),
                preferred.get(name, 0),
            )
            for name in names
        }
