"""The candidates of a call, as kube-scheduler sends them: decoded, checked and looked up as seldom as possible.

kube-scheduler sends each pod's filter the nodes its own filters passed, from a start that rotates from pod to pod
and in the order its parallel checks found them; above 100 nodes only a share of them (420 of 1000). No two pods
send the same list, so what is kept per list is not met again. Three things are kept instead:

- every node of the node view, per state of the view (:class:`ClusterNodes`): a filter whose plugins judge each node
  alone judges them all once, with its columns kept there, and each window of them takes its share
  (:func:`scheduler_core.extender.scoring.engine.run_filter_window`);
- the names a filter passed, already looked up (:meth:`CandidatesMemo.prime`): kube-scheduler sends the pod's
  prioritize exactly those names, in filter's order;
- any other list by its exact JSON bytes, decoded, checked and looked up once per state of the view, with the
  columns derived from it (each node's traffic in a snapshot, plugin scores: :attr:`Candidates.shared`,
  :func:`scheduler_core.extender.scoring.plugins.base.shared_column`).

The lists handed out are shared between calls and threads: nothing may change them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial

from scheduler_core.extender.lru import LRU
from scheduler_core.extender.protocol.cluster import ClusterView, NodeInfo, node_lookup, nodes_state
from scheduler_core.extender.protocol.wire import encode
from scheduler_core.extender.scoring.plugins.base import SharedColumns, new_shared_columns, seed_candidate_names

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
class ClusterNodes:
    """Every node of the node view in one of its states, for filters that judge each node alone: judged once, then
    each window of them takes its share (:func:`scheduler_core.extender.scoring.engine.run_filter_window`)."""

    state: object
    nodes: list[NodeInfo]
    positions: dict[str, int]
    """Each node's position in ``nodes``, by name."""
    shared: SharedColumns = field(default_factory=new_shared_columns)
    """Columns of ``nodes``: the plugins' verdicts and their outcome, until an input changes."""

    def at(self, names: Sequence[str]) -> list[int] | None:
        """Each name's position in ``nodes``; None when one is not there (judged as the plain path judges it)."""
        found = list(map(self.positions.get, names))
        return None if None in found else found  # type: ignore[return-value]  # no None left


@dataclass(frozen=True, slots=True)
class Window:
    """A call's candidates as positions among every node of the view (:class:`ClusterNodes`)."""

    cluster: ClusterNodes
    names: list[str]
    at: list[int]


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
        self._cluster: ClusterNodes | None = None

    def cluster(self, view: ClusterView) -> ClusterNodes | None:
        """Every node ``view`` holds, in its current state; None when the view cannot list them or tell its state."""
        state = nodes_state(view)
        listed = getattr(view, "node_names", None)
        if state is None or not callable(listed):
            return None
        kept = self._cluster
        if kept is not None and kept.state is state:
            return kept
        # The state is read before the listing: a change in between is seen by the next call (state differs).
        names: list[str] = listed()
        kept = ClusterNodes(state, _lookup(names, view), dict(zip(names, range(len(names)), strict=True)))
        self._cluster = kept
        return kept

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

    def window(self, names: list[str], view: ClusterView) -> Window | None:
        """``names`` as a window of every node ``view`` holds; None when the view cannot list its nodes or one of
        ``names`` is not among them."""
        cluster = self.cluster(view)
        at = None if cluster is None else cluster.at(names)
        return None if cluster is None or at is None else Window(cluster, names, at)

    def prime(self, names: list[str], nodes: list[NodeInfo], state: object | None) -> None:
        """Remember ``names`` (``nodes``, looked up in ``state``: a filter's passing nodes) as a list that comes next
        (the pod's prioritize): already looked up, and with ``names`` itself as its names column, so the prioritize's
        record shares the filter's list (and the spool its compressed frame)."""
        if state is None or not nodes:
            return
        entry = Candidates(names, (state, nodes))
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
