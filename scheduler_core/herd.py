"""The herd effect: pods bound since the last traffic refresh are invisible in it, so count their binds.

Between two refreshes every prioritize call sees the same snapshot, so a burst of pods would all prefer the
one quiet node. Each bind therefore raises its node's traffic estimate by ``bytes_per_pod``, decaying linearly
to zero over ``decay_seconds`` (by default one refresh interval: by then a refresh has measured the node
again). Binds are counted, not prioritize calls: kube-scheduler may prioritize a pod and then place it
elsewhere (other extenders, its own scores), but a bind is a pod that will run there.

A pod recorded twice (by the ``bind`` verb and later by a placement watcher that sees kube-scheduler's own
binds) counts once: the log is keyed by pod.

This module is plain Python; the shared, Redis-backed log lives in ``dashboard.traffic``.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
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
    times: tuple[float, ...] = ()
    """Bind time of each entry of ``nodes`` (Unix seconds)."""
    default_decay_seconds: float = 15.0
    """How long a bind raises its node's estimate when the plugin does not say: the traffic refresh interval."""
    note: str = ""
    """Why the list may be incomplete (e.g. the shared log was unreachable), for the record."""

    @property
    def by_node(self) -> dict[str, tuple[float, ...]]:
        """Bind times per node, in recorded order."""
        grouped: dict[str, list[float]] = {}
        for node, at in zip(self.nodes, self.times, strict=True):
            grouped.setdefault(node, []).append(at)
        return {node: tuple(times) for node, times in grouped.items()}


NO_BINDS = RecentBinds()


class BindLog(Protocol):
    def record_bind(self, *, node: str, pod: str, at: float) -> None:
        """Remember that ``pod`` (its UID, or namespace/name) was bound to ``node`` at ``at`` (Unix seconds)."""
        ...

    def recent_binds(self, now: float) -> RecentBinds: ...


PRUNE_SECONDS = 0.25
"""How often the in-process log drops binds past its horizon."""


class InMemoryBindLog:
    """A :class:`BindLog` in this process only: the in-process mode, and the fallback when Redis is down."""

    def __init__(self, horizon_seconds: float, *, default_decay_seconds: float | None = None) -> None:
        if horizon_seconds <= 0:
            raise ValueError(f"horizon_seconds must be positive, not {horizon_seconds!r}")
        self.horizon_seconds = horizon_seconds
        self.default_decay_seconds = horizon_seconds if default_decay_seconds is None else default_decay_seconds
        self._lock = threading.Lock()
        self._binds: dict[str, tuple[str, float]] = {}
        """pod → (node, bound at)."""
        self._pruned_at = -math.inf

    def record_bind(self, *, node: str, pod: str, at: float) -> None:
        with self._lock:
            previous = self._binds.get(pod)
            if previous is None or previous[0] != node:
                self._binds[pod] = (node, at)
            self._prune(at)

    def recent_binds(self, now: float) -> RecentBinds:
        with self._lock:
            self._prune(now)
            entries = list(self._binds.values())
        nodes, times = zip(*entries, strict=True) if entries else ((), ())
        return RecentBinds(nodes, times, default_decay_seconds=self.default_decay_seconds)

    def _prune(self, now: float) -> None:
        # A scan of every bind, so at most every PRUNE_SECONDS of ``now`` (thousands of binds at sustained rates):
        # a bind kept up to that much past the horizon has decayed to nothing already (decay ≤ horizon).
        if 0.0 <= now - self._pruned_at < PRUNE_SECONDS:
            return
        self._pruned_at = now
        cutoff = now - self.horizon_seconds
        expired = [pod for pod, (_, at) in self._binds.items() if at < cutoff]
        for pod in expired:
            del self._binds[pod]


@dataclass(frozen=True, slots=True)
class HerdEstimator:
    """Extra bytes to assume on a node for its recent binds: ``bytes_per_pod``, decaying linearly to zero."""

    bytes_per_pod: float
    decay_seconds: float

    @property
    def enabled(self) -> bool:
        return self.bytes_per_pod > 0 and self.decay_seconds > 0

    def extra_bytes_at(self, positions: NDArray[np.intp], times: NDArray[np.float64], now: float, size: int) -> Floats:
        """Per position 0..size-1, the extra bytes of the binds at that position (``times``: when each was bound).

        Each bind weighs 1 just after it (or when stamped slightly in the future by another replica's clock) and
        0 once ``decay_seconds`` old, linearly in between; the weights times ``bytes_per_pod`` are added up per
        position in the binds' order (``bincount`` adds in input order), so the sums are those of a loop per node.

        In whole bytes (rounded half to even): an estimate has no use for a fraction of a byte, and the record keeps
        these per node for every prioritize, where a decayed sum's 17 significant digits cost ~3 KB per 1000-node
        call more than its 9 to 10.
        """
        if not self.enabled:
            return np.zeros(size)
        weights = np.maximum(0.0, 1.0 - np.maximum(0.0, now - times) / self.decay_seconds)
        summed = np.bincount(positions, weights=self.bytes_per_pod * weights, minlength=size)
        return np.rint(summed).astype(np.float64, copy=False)
