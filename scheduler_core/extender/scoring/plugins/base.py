"""What a plugin is: a name, the extension points it implements, typed args, and pure functions of a cycle."""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter, is_
from typing import Any, ClassVar, Protocol, TypeVar, overload

import msgspec
import numpy as np
from numpy.typing import NDArray

from scheduler_core.extender.lru import LRU
from scheduler_core.extender.protocol.cluster import ClusterView, NodeInfo, PodInfo
from scheduler_core.extender.record.structs import AssumedBytes, ReconciledBind
from scheduler_core.extender.scoring.herd import NO_BINDS, RecentBinds
from scheduler_core.extender.scoring.workload_traffic import NOTHING_LEARNED, LearnedTraffic
from scheduler_core.traffic import TrafficQuery, TrafficSnapshot

NEUTRAL_SCORE = 50.0
"""The score of a node a plugin knows nothing about: the middle, so missing data neither helps nor hurts."""


class PluginArgs(msgspec.Struct, rename="camel", forbid_unknown_fields=True, kw_only=True):
    """Base of every plugin's args: camelCase keys like KubeSchedulerConfiguration, unknown keys refused."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """One filter plugin's judgement of one node. An empty ``reason`` means the node passes."""

    reason: str = ""
    """Counted in kube-scheduler's "0/N nodes are available" message: no node names or per-node numbers."""
    unresolvable: bool = False
    """True when preempting pods on the node cannot help (FailedAndUnresolvableNodes)."""
    detail: str = ""
    """Node-specific figures for the record and the dashboard."""

    @property
    def passed(self) -> bool:
        return not self.reason


PASS = Verdict()


@dataclass(frozen=True, slots=True)
class NodeScore:
    score: float
    """0..100, higher is better."""
    raw: float | None = None
    """The plugin's raw input for this node (bytes for traffic), when it has one."""
    detail: str = ""
    herd_bytes: float = 0.0
    """Bytes assumed on top of ``raw`` for pods bound since the snapshot (see
    ``scheduler_core.extender.scoring.herd``)."""


class ScoreColumns(Sequence[NodeScore]):
    """A score plugin's per-node answer kept as columns, which is what the engine reads.

    At 1000+ nodes, one ``NodeScore`` object per node is most of a plugin's cost; the columns cost one list
    each. Indexing still gives a ``NodeScore`` (built on demand) so callers that want objects get them.
    """

    __slots__ = ("details", "herd_binds", "herd_bytes", "herd_newest_age_ms", "raws", "unmeasured", "values")

    def __init__(
        self,
        values: list[float] | NDArray[np.float64],
        raws: Sequence[float | None] | None = None,
        details: Sequence[str] | None = None,
        herd_bytes: Sequence[float] = (),
        unmeasured: int | None = None,
        herd_binds: Sequence[int] = (),
        herd_newest_age_ms: Sequence[int | None] = (),
    ) -> None:
        self.values = values
        """0..100 per node (an array from a plugin that computes in numpy: the engine reads it as one)."""
        self.raws = raws
        """The plugin's raw input per node; None: no node has one."""
        self.details = details
        """Why a node scored what it did, per node; None: no node needs a word."""
        self.herd_bytes = herd_bytes
        """Bytes assumed per node for its recent binds; empty: no node has any."""
        self.unmeasured = unmeasured
        self.herd_binds = herd_binds
        """How many recent binds ``herd_bytes`` come from, per node; empty: no node has any."""
        self.herd_newest_age_ms = herd_newest_age_ms
        """Milliseconds since each node's newest recent bind (None: none); empty: no node has any."""
        """How many ``raws`` are None, when the plugin knows (None: the engine counts them). Finding a None among
        the floats compares each with it on every call: a plugin keeping raws per candidate list counts once."""

    def __len__(self) -> int:
        return len(self.values)

    @overload
    def __getitem__(self, index: int) -> NodeScore: ...

    @overload
    def __getitem__(self, index: slice) -> list[NodeScore]: ...

    def __getitem__(self, index: int | slice) -> NodeScore | list[NodeScore]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self.values)))]
        i = range(len(self.values))[index]
        return NodeScore(
            float(self.values[i]),
            self.raws[i] if self.raws is not None else None,
            self.details[i] if self.details is not None else "",
            self.herd_bytes[i] if self.herd_bytes else 0.0,
        )


@dataclass(frozen=True, slots=True)
class ScoreResult:
    """A score plugin's answer for all candidate nodes, in the order given."""

    scores: Sequence[NodeScore]
    applicable: bool = True
    """False when the plugin cannot tell nodes apart for this pod (it then carries no weight)."""
    note: str = ""
    metric_age_seconds: float | None = None
    requested: Sequence[str] = ()
    """What the pod asks of the plugin (its extended resources, its images), for the record."""
    inputs: Mapping[str, Sequence[float | None]] = field(default_factory=dict)
    """Per-node figures the scores are computed from, by name (aligned with the nodes), for the record."""
    missing_score: float | None = None
    """The score of a node the plugin has no figure for (its policy), for the record."""
    pod_assumed: AssumedBytes | None = None
    """What the herd estimate will assume the pod adds to its node once bound, and why (``NetworkTraffic``)."""


class TrafficView(Protocol):
    def latest(self, query: TrafficQuery) -> TrafficSnapshot | None: ...


SHARED_COLUMNS = 32
"""Columns kept per candidate list, the least recently used dropped first: the candidates' names and traffic are
read by every call and stay, while columns of one pod's images or resource set come and go."""
SharedColumns = LRU[Hashable, tuple[tuple[object, ...], Any]]
"""Where :func:`shared_column` keeps columns: key → (the sources they were made of, the column)."""


def new_shared_columns() -> SharedColumns:
    return LRU(SHARED_COLUMNS)


@dataclass
class CycleContext:
    """Everything a plugin may read during one verb call."""

    pod: PodInfo
    cluster: ClusterView
    traffic: TrafficView
    now: float = field(default_factory=time.time)
    binds: RecentBinds = NO_BINDS
    """Recent binds per node, read once per verb call, for the herd-effect estimate."""
    learned: LearnedTraffic = NOTHING_LEARNED
    """Traffic learned per workload in the background, as it stood when the call started."""
    shared: SharedColumns = field(default_factory=new_shared_columns)
    """Per-node columns that depend only on the candidates' names (each node's traffic in a snapshot), made once
    and never mutated: shared by this call's plugins, and by later calls with the same candidate list."""
    herd_reconciled: dict[str, list[ReconciledBind]] = field(default_factory=dict)
    """Per score plugin name, the recent binds it reconciled with their pods' own traffic, for this call's record:
    the engine's columns are per node, so the verb moves them into the plugin's ``PluginScores``."""


_T = TypeVar("_T")


def shared_column(shared: SharedColumns, key: Hashable, sources: tuple[object, ...], make: Callable[[], _T]) -> _T:
    """``make()``, kept in ``shared`` (a :attr:`CycleContext.shared`) under ``key`` while asked for with the very
    same ``sources``.

    ``sources`` are what the column is a function of (the candidate list, a snapshot, a memoized table), compared
    by identity and held, so an id is never reused while the column is kept. One column per key: made of other
    sources, it replaces the one kept (a new snapshot's traffic supersedes the last). Where several are alive at once
    (one filter outcome per combination of verdict lists), the key names the sources' ids. Never mutated.
    """
    found = shared.get(key)
    if found is not None:
        held, value = found
        if len(held) == len(sources) and all(map(is_, held, sources)):
            return value  # type: ignore[no-any-return]
    value = make()
    shared.put(key, (sources, value))
    return value


_NAMES = "names"
"""Where :func:`candidate_names` keeps its column, and :func:`seed_candidate_names` puts one."""


def candidate_names(ctx: CycleContext, nodes: Sequence[NodeInfo]) -> list[str]:
    """The candidates' names, in order: once per candidate list (shared with the records: never mutated)."""
    return shared_column(ctx.shared, _NAMES, (nodes,), lambda: list(map(attrgetter("name"), nodes)))


def seed_candidate_names(shared: SharedColumns, nodes: Sequence[NodeInfo], names: list[str]) -> None:
    """Make ``names`` (``nodes``' names, in order, never mutated) what :func:`candidate_names` answers for ``nodes``."""
    shared.put(_NAMES, ((nodes,), names))


def candidate_positions(ctx: CycleContext, nodes: Sequence[NodeInfo]) -> dict[str, int]:
    """Each candidate's position by name: once per candidate list, to visit only the few nodes a map names."""
    names = candidate_names(ctx, nodes)
    return shared_column(ctx.shared, "positions", (nodes,), lambda: dict(zip(names, range(len(names)), strict=True)))


class FilterPlugin(Protocol):
    """Judges each candidate; a plugin whose verdict on a node never depends on the other candidates says so with
    ``judges_nodes_alone = True``, and is then asked once about every node of the cluster and its verdicts reused
    for each window of it (:func:`scheduler_core.extender.scoring.engine.run_filter_window`)."""

    name: ClassVar[str]

    def filter(self, ctx: CycleContext, nodes: Sequence[NodeInfo]) -> Sequence[Verdict]: ...


class ScorePlugin(Protocol):
    name: ClassVar[str]

    def score(self, ctx: CycleContext, nodes: Sequence[NodeInfo]) -> ScoreResult: ...
