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

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True, slots=True)
class RecentBinds:
    """Bind times per node, as read once at the start of a verb call."""

    by_node: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    default_decay_seconds: float = 15.0
    """How long a bind raises its node's estimate when the plugin does not say: the traffic refresh interval."""
    note: str = ""
    """Why the list may be incomplete (e.g. the shared log was unreachable), for the record."""


NO_BINDS = RecentBinds()


class BindLog(Protocol):
    def record_bind(self, *, node: str, pod: str, at: float) -> None:
        """Remember that ``pod`` (its UID, or namespace/name) was bound to ``node`` at ``at`` (Unix seconds)."""
        ...

    def recent_binds(self, now: float) -> RecentBinds: ...


class InMemoryBindLog:
    """A :class:`BindLog` in this process only: the in-process mode, and the fallback when Redis is down."""

    def __init__(self, horizon_seconds: float, *, default_decay_seconds: float | None = None) -> None:
        if horizon_seconds <= 0:
            raise ValueError(f"horizon_seconds must be positive, not {horizon_seconds!r}")
        self.horizon_seconds = horizon_seconds
        self.default_decay_seconds = horizon_seconds if default_decay_seconds is None else default_decay_seconds
        self._lock = threading.Lock()
        self._binds: dict[str, tuple[str, float]] = {}
        """pod → (node, bound at); insertion order is roughly time order, so pruning stops early."""

    def record_bind(self, *, node: str, pod: str, at: float) -> None:
        with self._lock:
            previous = self._binds.get(pod)
            if previous is None or previous[0] != node:
                self._binds[pod] = (node, at)
            self._prune(at)

    def recent_binds(self, now: float) -> RecentBinds:
        with self._lock:
            self._prune(now)
            grouped: dict[str, list[float]] = {}
            for node, at in self._binds.values():
                grouped.setdefault(node, []).append(at)
        return RecentBinds(
            {node: tuple(times) for node, times in grouped.items()}, default_decay_seconds=self.default_decay_seconds
        )

    def _prune(self, now: float) -> None:
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

    def weight(self, bound_at: float, now: float) -> float:
        """1.0 for a bind just now (or stamped slightly in the future by another replica's clock), 0 once decayed."""
        if not self.enabled:
            return 0.0
        age = max(0.0, now - bound_at)
        return max(0.0, 1.0 - age / self.decay_seconds)

    def extra_bytes(self, bind_times: Iterable[float], now: float) -> float:
        return sum(self.bytes_per_pod * self.weight(at, now) for at in bind_times)

    def counted(self, bind_times: Iterable[float], now: float) -> int:
        """How many of the binds still weigh on the node."""
        return sum(1 for at in bind_times if self.weight(at, now) > 0)
