"""NodeNames lists seen lately, remembered by their exact JSON bytes and by their set of names: looked up once.

kube-scheduler sends a NodeNames list of every node its own filters passed, but in the order its goroutines found
them, from a start index that moves on with every pod: where it sends every node (fewer than 100 nodes, or
``percentageOfNodesToScore: 100``) each pod brings the same nodes in another order, and prioritize's list is one of
a few filter outcomes. So a list is known by its set of names: the first order seen is the entry's, whose nodes
are looked up in the node cache once, and whose per-node columns (each node's traffic in a snapshot, plugin
verdicts, the filter's outcome and answer: :attr:`Candidates.shared`, :func:`scheduler_core.plugins.base.shared_column`)
are worked out once. Another order of the same nodes gets that entry and where each of its names is in it
(:attr:`Seen.order`), for the verbs to answer in the request's order (:mod:`scheduler_core.reorder`). A list sent
again byte for byte is not even decoded or checked again.

The lists handed out are shared between calls and threads: nothing may change them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from scheduler_core.cluster import ClusterView, NodeInfo, node_lookup, nodes_state
from scheduler_core.lru import LRU
from scheduler_core.plugins.base import SharedColumns, new_shared_columns

MAX_LISTS = 16
"""Distinct sets of names remembered, the least recently used dropped first (a churning cluster brings new ones);
as many orders of them (exact bytes) besides.

A steady cluster needs a handful: kube-scheduler's set for filter, and one per filter outcome for prioritize.
Each set keeps at most ``SHARED_COLUMNS`` columns, so the memory held is bounded by sets × columns × nodes."""
MAX_NAMES_BYTES = 4 << 20
"""A list longer than this (about 100,000 names) is decoded every time rather than kept."""


@dataclass(eq=False)
class Candidates:
    names: list[str]
    """Decoded and checked (no empty or repeated name), in the first order seen: the order of the columns. Read-only."""
    resolved: tuple[object, list[NodeInfo]] | None = None
    """(state of the node view, each name's NodeInfo in it): one reference, so never a state with another's nodes."""
    shared: SharedColumns = field(default_factory=new_shared_columns)
    """Per-node columns that depend on the names alone, for :attr:`CycleContext.shared`."""
    positions: dict[str, int] | None = None
    """Each name's position in :attr:`names`, made when another order of them first comes."""


@dataclass(frozen=True, slots=True)
class Seen:
    """One list as sent: its names in the request's order, and the entry of its set."""

    names: list[str]
    entry: Candidates
    order: list[int] | None
    """For each of :attr:`names`, its position in ``entry.names``; None when the orders are the same."""


class CandidatesMemo:
    def __init__(self) -> None:
        self._lists: LRU[bytes, Seen] = LRU(MAX_LISTS)
        self._sets: LRU[frozenset[str], Candidates] = LRU(MAX_LISTS)

    def known(self, raw: bytes) -> list[str] | None:
        """The names of a list seen before with exactly these JSON bytes, else None."""
        found = self._lists.get(raw)
        return None if found is None else found.names

    def candidates(
        self, raw: bytes | None, names: list[str], view: ClusterView
    ) -> tuple[list[NodeInfo], SharedColumns, list[int] | None]:
        """``names`` (whose JSON bytes are ``raw``) as NodeInfo in ``view``, and where to keep columns of them.

        When the third value is not None the nodes and columns are in the order of an earlier list of the same
        names: the i-th of ``names`` is at position ``order[i]`` of them.
        """
        state = nodes_state(view)
        if raw is None or state is None or len(raw) > MAX_NAMES_BYTES:
            return _lookup(names, view), new_shared_columns(), None
        seen = self._lists.get(raw)
        if seen is None:
            seen = self._seen(names)
            self._lists.put(raw, seen)
        entry = seen.entry
        resolved = entry.resolved
        if resolved is not None and resolved[0] is state:
            return resolved[1], entry.shared, seen.order
        # The state is read before the lookups: a change in between is seen by the next call (state differs).
        nodes = _lookup(entry.names, view)
        entry.resolved = (state, nodes)
        return nodes, entry.shared, seen.order

    def _seen(self, names: list[str]) -> Seen:
        key = frozenset(names)
        entry = self._sets.get(key)
        if entry is None:
            entry = Candidates(names)
            self._sets.put(key, entry)
        if entry.names is names or entry.names == names:
            return Seen(names, entry, None)
        positions = entry.positions
        if positions is None:  # two threads may both make it: equal dicts
            positions = entry.positions = dict(zip(entry.names, range(len(entry.names)), strict=True))
        return Seen(names, entry, list(map(positions.__getitem__, names)))


def _lookup(names: Sequence[str], view: ClusterView) -> list[NodeInfo]:
    """Each name's NodeInfo in ``view``, a bare NodeInfo for a name it lacks."""
    found = list(map(node_lookup(view), names))
    if len(list(filter(None, found))) != len(found):  # (``None in found`` would call NodeInfo.__eq__ per node)
        found = [info or NodeInfo(name) for info, name in zip(found, names, strict=True)]
    return found  # type: ignore[return-value]  # no None left
