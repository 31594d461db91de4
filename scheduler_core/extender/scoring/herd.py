"""The herd effect: pods bound since the last traffic refresh are invisible in it, so count their binds.

Between two refreshes every prioritize call sees the same snapshot, so a burst of pods would all prefer the
one quiet node. Each bind therefore raises its node's traffic estimate by ``bytes_per_pod``, decaying linearly
to zero over ``decay_seconds`` (by default one refresh interval: by then a refresh has measured the node
again). Binds are counted, not prioritize calls: kube-scheduler may prioritize a pod and then place it
elsewhere (other extenders, its own scores), but a bind is a pod that will run there.

A pod recorded twice (by the ``bind`` verb and later by a placement watcher that sees kube-scheduler's own
binds) counts once: the log is keyed by pod.

Reconciliation (``reconcileHerd``): once a bound pod's own traffic shows in the node's measurement, the bind counts
only what the measurement does not yet hold for it, ``max(0, assumed − observed)``, as koordinator's load-aware
estimator reconciles, instead of the linear decay. ``observed`` is the pod's bytes over the node query's window, read
by the same background refresh as the node's bytes (:attr:`TrafficSnapshot.bytes_by_pod`), so both are like for like.
A bind whose pod has no series in that refresh (host network, not scraped yet, no Prometheus, a refresh from before the
bind) decays as before. Either way a bind's weight ends ``decay_seconds`` after it: reconciliation replaces the ramp
within that horizon, not the horizon (set ``herdDecaySeconds`` to the query window to reconcile over all of it).

This module is plain Python; the shared, Redis-backed log lives in ``dashboard.traffic``.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from itertools import repeat
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

Floats = NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class RecentBinds:
    """Recent binds, one entry per bind (oldest recorded first), as read once at the start of a verb call.

    Flat rather than grouped by node: a verb reads thousands of them at sustained rates, and the herd estimate
    sums them per candidate in one vectorized pass (:meth:`HerdEstimator.extra_bytes_at`).
    """

    nodes: tuple[str, ...] = ()
    times: tuple[float, ...] | Floats = ()
    """Bind time of each entry of ``nodes`` (Unix seconds)."""
    default_decay_seconds: float = 15.0
    """How long a bind raises its node's estimate when the plugin does not say: the traffic refresh interval."""
    note: str = ""
    """Why the list may be incomplete (e.g. the shared log was unreachable), for the record."""
    node_ids: NDArray[np.intp] | None = None
    """Each entry's node as its index in ``id_names``, from a log that numbers node names: a verb then finds the
    candidates' positions of thousands of binds with one array lookup (:func:`positions_by_number`)."""
    id_names: list[str] = field(default_factory=list)
    """Node names by number; the log only appends to it (a new list when it starts numbering over)."""
    bytes: Floats | None = None
    """Each entry's own assumed bytes (its workload's learned traffic, its override:
    ``scheduler_core.extender.scoring.workload_traffic``; NaN: the scoring plugin's constant); None: every entry's is
    the constant."""
    pods: tuple[str, ...] = ()
    """Each entry's pod as ``namespace/name`` (empty: not known), whose own traffic reconciles it; empty when no entry
    has one (a log of an earlier version)."""

    @property
    def by_node(self) -> dict[str, tuple[float, ...]]:
        """Bind times per node, in recorded order."""
        grouped: dict[str, list[float]] = {}
        for node, at in zip(self.nodes, self.times, strict=True):
            grouped.setdefault(node, []).append(float(at))
        return {node: tuple(times) for node, times in grouped.items()}


NO_BINDS = RecentBinds()


class BindLog(Protocol):
    def record_bind(self, *, node: str, pod: str, at: float, bytes: float | None = None, name: str = "") -> None:
        """Remember that ``pod`` (its UID, or namespace/name) was bound to ``node`` at ``at`` (Unix seconds);
        ``bytes``: what the pod is assumed to add, when not the constant (learned, overridden); ``name``: the pod's
        ``namespace/name``, by which its own traffic is read (empty: not known)."""
        ...

    def recent_binds(self, now: float) -> RecentBinds: ...


PRUNE_SECONDS = 0.25
"""How often the in-process log drops binds past its horizon."""


class InMemoryBindLog:
    """A :class:`BindLog` in this process only: the in-process mode, and the fallback when Redis is down.

    Every verb call reads the recent binds (thousands at sustained rates: 200 pods/s over 15 s is 3000), so the log
    keeps them ready as one immutable :class:`RecentBinds`, its node names numbered: a new bind appends to it (a copy
    of two arrays and a tuple) and a call takes it as it is, instead of building it from the binds and finding
    their candidate positions by name on every call.
    """

    def __init__(self, horizon_seconds: float, *, default_decay_seconds: float | None = None) -> None:
        if horizon_seconds <= 0:
            raise ValueError(f"horizon_seconds must be positive, not {horizon_seconds!r}")
        self.horizon_seconds = horizon_seconds
        self.default_decay_seconds = horizon_seconds if default_decay_seconds is None else default_decay_seconds
        self._lock = threading.Lock()
        self._binds: dict[str, tuple[str, float, float, str]] = {}
        """pod → (node, bound at, its assumed bytes or NaN: the constant, its namespace/name or "")."""
        self._pruned_at = -math.inf
        self._recent: RecentBinds | None = None
        """``_binds`` as handed to verbs; None: to be built again from them."""
        self._ids: dict[str, int] = {}
        self._names: list[str] = []

    def record_bind(self, *, node: str, pod: str, at: float, bytes: float | None = None, name: str = "") -> None:
        own = math.nan if bytes is None else bytes
        with self._lock:
            previous = self._binds.get(pod)
            if previous is None:
                self._binds[pod] = (node, at, own, name)
                self._append(node, at, own, name)
            elif previous[0] != node:  # rebound elsewhere: it keeps its place in the order, so build again
                self._binds[pod] = (node, at, own, name)
                self._recent = None
            elif name and not previous[3]:  # the same bind, now with the name its traffic is read by
                self._binds[pod] = (previous[0], previous[1], previous[2], name)
                self._recent = None
            self._prune(at)

    def recent_binds(self, now: float) -> RecentBinds:
        with self._lock:
            self._prune(now)
            if self._recent is None:
                self._recent = self._build()
            return self._recent

    def _number(self, node: str) -> int:
        found = self._ids.get(node)
        if found is None:
            found = self._ids[node] = len(self._names)
            self._names.append(node)
        return found

    def _append(self, node: str, at: float, own: float, name: str) -> None:
        recent = self._recent
        if recent is None or recent.node_ids is None:
            return  # built on the next read
        bytes_ = recent.bytes
        if bytes_ is not None or not math.isnan(own):
            bytes_ = np.append(np.full(len(recent.nodes), math.nan) if bytes_ is None else bytes_, own)
        pods = recent.pods
        if pods or name:
            pods = (*(pods or ("",) * len(recent.nodes)), name)
        self._recent = RecentBinds(
            (*recent.nodes, node),
            np.append(recent.times, at),
            self.default_decay_seconds,
            node_ids=np.append(recent.node_ids, self._number(node)),
            id_names=self._names,
            bytes=bytes_,
            pods=pods,
        )

    def _build(self) -> RecentBinds:
        entries = list(self._binds.values())
        if len(self._names) > 2 * len(entries) + 4096:  # node names churned: number them over
            self._ids, self._names = {}, []
        nodes = tuple(node for node, _, _, _ in entries)
        own = np.fromiter((b for _, _, b, _ in entries), np.float64, len(entries))
        pods = tuple(name for _, _, _, name in entries)
        return RecentBinds(
            nodes,
            np.fromiter((at for _, at, _, _ in entries), np.float64, len(entries)),
            self.default_decay_seconds,
            node_ids=np.fromiter(map(self._number, nodes), np.intp, len(nodes)),
            id_names=self._names,
            bytes=None if np.isnan(own).all() else own,
            pods=pods if any(pods) else (),
        )

    def _prune(self, now: float) -> None:
        # A scan of every bind, so at most every PRUNE_SECONDS of ``now`` (thousands of binds at sustained rates):
        # a bind kept up to that much past the horizon has decayed to nothing already (decay ≤ horizon).
        if 0.0 <= now - self._pruned_at < PRUNE_SECONDS:
            return
        self._pruned_at = now
        cutoff = now - self.horizon_seconds
        expired = [pod for pod, (_, at, _, _) in self._binds.items() if at < cutoff]
        for pod in expired:
            del self._binds[pod]
        if expired:
            self._recent = None


def positions_by_number(
    names: list[str], positions: dict[str, int], known: NDArray[np.intp] | None
) -> NDArray[np.intp]:
    """Candidate position (-1: not a candidate) by node number, for every name of ``names`` (a log's
    :attr:`RecentBinds.id_names`) numbered so far. ``known``: what this returned before for the same candidates and
    names: the log only appends to them, so only the names numbered since are looked up."""
    count = len(names)  # the log may number more meanwhile: those are not in this call's binds
    start = 0 if known is None else len(known)
    if start >= count and known is not None:
        return known
    added = np.fromiter(map(positions.get, names[start:count], repeat(-1)), np.intp, count - start)
    return added if known is None else np.concatenate((known, added))


@dataclass(frozen=True, slots=True)
class HerdEstimator:
    """Extra bytes to assume on a node for its recent binds: ``bytes_per_pod``, decaying linearly to zero."""

    bytes_per_pod: float
    decay_seconds: float

    @property
    def enabled(self) -> bool:
        return self.bytes_per_pod > 0 and self.decay_seconds > 0

    def assumed(self, own_bytes: Floats | None, count: int) -> Floats:
        """Each bind's assumed bytes: its own, or ``bytes_per_pod`` where it has none (NaN)."""
        if own_bytes is None:
            return np.full(count, self.bytes_per_pod)
        return np.where(np.isnan(own_bytes), self.bytes_per_pod, own_bytes)

    def counted(self, assumed: Floats, observed: Floats | None, times: NDArray[np.float64], now: float) -> Floats:
        """Each bind's bytes as counted now: ``max(0, assumed − observed)`` where its pod's traffic was observed
        (``observed`` not NaN), else ``assumed`` decayed linearly; 0 once ``decay_seconds`` old either way."""
        ages = np.maximum(0.0, now - times)
        decayed = assumed * np.maximum(0.0, 1.0 - ages / self.decay_seconds)
        if observed is None:
            return decayed
        # Weighing while younger than the decay, as :meth:`binds_at` counts them (a ratio a rounding short of 1 too).
        reconciled = np.where(ages < self.decay_seconds, np.maximum(0.0, assumed - observed), 0.0)
        return np.where(np.isnan(observed), decayed, reconciled)

    def extra_bytes_at(
        self,
        positions: NDArray[np.intp],
        times: NDArray[np.float64],
        now: float,
        size: int,
        own_bytes: Floats | None = None,
        observed: Floats | None = None,
    ) -> Floats:
        """Per position 0..size-1, the extra bytes of the binds at that position (``times``: when each was bound;
        ``own_bytes``: each bind's own assumed bytes, NaN or None for ``bytes_per_pod``; ``observed``: each bind's
        pod's own bytes in the node's measurement, NaN or None where not observed: see :meth:`counted`).

        Each bind weighs 1 just after it (or when stamped slightly in the future by another replica's clock) and
        0 once ``decay_seconds`` old, linearly in between; the weights times ``bytes_per_pod`` are added up per
        position in the binds' order (``bincount`` adds in input order), so the sums are those of a loop per node.

        In whole bytes (rounded half to even): an estimate has no use for a fraction of a byte, and the record keeps
        these per node for every prioritize, where a decayed sum's 17 significant digits would cost bytes per node
        that tell nobody anything.
        """
        if not self.enabled:
            return np.zeros(size)
        counted = self.counted(self.assumed(own_bytes, len(times)), observed, times, now)
        summed = np.bincount(positions, weights=counted, minlength=size)
        return np.rint(summed).astype(np.float64, copy=False)

    def binds_at(
        self, positions: NDArray[np.intp], times: NDArray[np.float64], now: float, size: int
    ) -> tuple[NDArray[np.int64], list[int | None]]:
        """Per position 0..size-1, how many binds still weigh on it (younger than ``decay_seconds``) and the age of
        the newest of them in whole milliseconds (None: none): what an explanation says the extra bytes come from."""
        ages = np.maximum(0.0, now - times)
        weighing = ages < self.decay_seconds
        at = positions[weighing]
        counts = np.bincount(at, minlength=size).astype(np.int64, copy=False)
        newest = np.zeros(size)  # positions without a bind: None below
        newest[at] = np.inf
        np.minimum.at(newest, at, ages[weighing])
        newest_ages: list[int | None] = np.rint(newest * 1000).astype(np.int64).tolist()
        for position in np.flatnonzero(counts == 0).tolist():  # few: most candidates of a busy cluster have binds
            newest_ages[position] = None
        return counts, newest_ages
