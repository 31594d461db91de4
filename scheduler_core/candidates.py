"""NodeNames lists seen lately, remembered by their exact JSON bytes: decoded, checked and looked up once.

kube-scheduler sends the same NodeNames list (every node its own filters passed, in its cache's order) for most
pods of a steady cluster, and prioritize's list is one of a few filter outcomes. Decoding 5000 names, checking
them for empties and repeats, and looking each one up in the node cache cost about a fifth of a 5000-node call;
an identical list (same bytes) skips all three. Columns derived from the list (each node's traffic in a snapshot,
plugin verdicts, the filter's outcome and answer) are kept with it too (:attr:`Candidates.shared`,
:func:`scheduler_core.plugins.base.shared_column`).

kube-scheduler never sends two filters the same list at 1000 nodes (a new window of its node list for every pod),
but it sends prioritize exactly the names filter passed, in filter's order: a filter therefore leaves its answer's
list here already looked up (:meth:`CandidatesMemo.prime`), so the pod's prioritize finds it.

The lists handed out are shared between calls and threads: nothing may change them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial

from scheduler_core.cluster import ClusterView, NodeInfo, node_lookup, nodes_state
from scheduler_core.lru import LRU
from scheduler_core.plugins.base import SharedColumns, new_shared_columns, seed_candidate_names
from scheduler_core.wire import encode

MAX_LISTS = 16
"""Distinct lists remembered, the least recently used dropped first (a churning cluster brings new ones).

A steady cluster needs a handful: kube-scheduler's list for filter, and one per filter outcome for prioritize.
Each list keeps at most ``SHARED_COLUMNS`` columns, so the memory held is bounded by lists × columns × nodes."""
MAX_NAMES_BYTES = 4 << 20
"""A list longer than this (about 100,000 names) is decoded every time rather than kept."""


@dataclass(frozen=True, slots=True)
class Resolved:
    """A call's candidates as NodeInfo, where to keep columns of them, and the node view's state they were looked
    up in (None: not remembered, e.g. full Nodes or a view that cannot tell)."""

    nodes: list[NodeInfo]
    shared: SharedColumns
    state: object | None = None


@dataclass(eq=False)
class Candidates:
    names: list[str]
    """Decoded and checked (no empty or repeated name). Read-only."""
    resolved: tuple[object, list[NodeInfo]] | None = None
    """(state of the node view, each name's NodeInfo in it): one reference, so never a state with another's nodes."""
    shared: SharedColumns = field(default_factory=new_shared_columns)
    """Per-node columns that depend on the names alone, for :attr:`CycleContext.shared`."""


class CandidatesMemo:
    def __init__(self) -> None:
        self._lists: LRU[bytes, Candidates] = LRU(MAX_LISTS)

    def known(self, raw: bytes) -> list[str] | None:
        """The names of a list seen before with exactly these JSON bytes, else None."""
        found = self._lists.get(raw)
        return None if found is None else found.names

    def candidates(self, raw: bytes | None, names: list[str], view: ClusterView) -> Resolved:
        """``names`` (whose JSON bytes are ``raw``) as NodeInfo in ``view``, and where to keep columns of them."""
        state = nodes_state(view)
        if raw is None or state is None or len(raw) > MAX_NAMES_BYTES:
            return Resolved(_lookup(names, view), new_shared_columns())
        entry = self._lists.get_or_make(raw, partial(Candidates, names))
        resolved = entry.resolved
        if resolved is not None and resolved[0] is state:
            return Resolved(resolved[1], entry.shared, state)
        # The state is read before the lookups: a change in between is seen by the next call (state differs).
        nodes = _lookup(entry.names, view)
        entry.resolved = (state, nodes)
        return Resolved(nodes, entry.shared, state)

    def prime(self, names: list[str], among: Resolved, positions: Sequence[int]) -> None:
        """Remember ``names``, the nodes at ``positions`` of ``among`` (a filter's passing nodes), as a list that
        comes next (the pod's prioritize): already looked up in the same state, and with ``names`` itself as its
        names column, so the prioritize's record shares the filter's list (and the spool its compressed frame)."""
        if among.state is None or not positions:
            return
        nodes = list(map(among.nodes.__getitem__, positions))
        entry = Candidates(names, (among.state, nodes))
        seed_candidate_names(entry.shared, nodes, names)
        raw = encode(names)
        if len(raw) <= MAX_NAMES_BYTES:
            self._lists.put(raw, entry)


def _lookup(names: Sequence[str], view: ClusterView) -> list[NodeInfo]:
    """Each name's NodeInfo in ``view``, a bare NodeInfo for a name it lacks."""
    found = list(map(node_lookup(view), names))
    if len(list(filter(None, found))) != len(found):  # (``None in found`` would call NodeInfo.__eq__ per node)
        found = [info or NodeInfo(name) for info, name in zip(found, names, strict=True)]
    return found  # type: ignore[return-value]  # no None left
