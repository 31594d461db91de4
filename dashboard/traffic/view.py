"""What the verbs read traffic and recent binds from: Redis (shared by replicas) or this process only.

Both implement :class:`scheduler_core.extender.verbs.CycleInputs`. :class:`RedisTrafficView` reads, once per verb call
and in ONE round trip (a non-transactional pipeline): an ``MGET`` of the snapshots of every query the profile
uses, and the recent binds. It never makes a verb wait on Redis for long:

- the client has a short socket timeout (``SCHEDLENS_REDIS_VERB_TIMEOUT_SECONDS``, 50 ms) and no retries;
- after a failure it does not try Redis again for ``retry_after_seconds`` (1 s), so a dead or frozen Redis
  costs one timeout per second per process, not one per call;
- meanwhile it answers from the last good snapshot it saw, and says so in the record
  (``redis unavailable; using in-process snapshot``), and counts the binds this process made.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import msgspec
import redis

from dashboard.traffic.clients import keys, verb_client
from dashboard.traffic.herd import RedisBindLog
from dashboard.traffic.snapshots import Keys, decode_snapshot
from dashboard.traffic.sources import traffic_source_for
from scheduler_core.extender.scoring.herd import InMemoryBindLog, RecentBinds
from scheduler_core.extender.scoring.plugins.base import TrafficView
from scheduler_core.extender.scoring.plugins.traffic import (
    DEFAULT_MAX_STALENESS_SECONDS,
    NetworkTrafficArgs,
    TrafficArgs,
)
from scheduler_core.extender.scoring.profiles import Profile
from scheduler_core.traffic import TrafficQuery, TrafficSnapshot, TrafficSource, TrafficSourceError

log = logging.getLogger(__name__)

REDIS_UNAVAILABLE = "redis unavailable; using in-process snapshot"
NOT_IN_REDIS = "no snapshot in redis; using in-process snapshot"
HERD_LOCAL_ONLY = "redis unavailable; herd estimate counts this process's binds only"


class SnapshotMap:
    """A :class:`TrafficView` over the snapshots read for one verb call."""

    def __init__(self, snapshots: Mapping[TrafficQuery, TrafficSnapshot]) -> None:
        self._snapshots = snapshots

    def latest(self, query: TrafficQuery) -> TrafficSnapshot | None:
        return self._snapshots.get(query)


def _with_note(snapshot: TrafficSnapshot, note: str) -> TrafficSnapshot:
    error = "; ".join(part for part in (note, snapshot.error) if part)
    return replace(snapshot, error=error)


def _plugin_args(profile: Profile) -> list[Any]:
    plugins: list[object] = [*profile.filters, *(s.plugin for s in profile.scorers)]
    return [getattr(p, "args", None) for p in plugins]


def herd_horizon(profiles: Mapping[str, Profile], refresh_seconds: float) -> float:
    """How far back binds matter: the longest herd decay any profile uses (0 means one refresh interval)."""
    decays = [
        args.herd_decay_seconds or refresh_seconds
        for profile in profiles.values()
        for args in _plugin_args(profile)
        if isinstance(args, NetworkTrafficArgs)
    ]
    return max([refresh_seconds, *decays])


def reconciling_queries(profiles: Mapping[str, Profile]) -> set[TrafficQuery]:
    """The queries of the ``NetworkTraffic`` plugins that reconcile recent binds with their pods' own traffic: the
    refresh of these reads the pods of recent binds too (``scheduler_core.traffic.pods``)."""
    return {
        args.query()
        for profile in profiles.values()
        for args in _plugin_args(profile)
        if isinstance(args, NetworkTrafficArgs) and args.reconcile_herd
    }


def staleness_limits(profiles: Mapping[str, Profile]) -> dict[TrafficQuery, float]:
    """The strictest ``maxStalenessSeconds`` of the plugins reading each query."""
    limits: dict[TrafficQuery, float] = {}
    for profile in profiles.values():
        for args in _plugin_args(profile):
            if isinstance(args, TrafficArgs):
                query = args.query()
                limits[query] = min(limits.get(query, args.max_staleness_seconds), args.max_staleness_seconds)
    return limits


class InlineFallback:
    """Ask the source on the verb itself when no usable snapshot exists (off unless configured).

    At most one attempt per query per ``min_interval_seconds`` in a process, each bounded by the source's own
    deadline, so a dead Prometheus costs one short wait now and then, never one per call.
    """

    def __init__(
        self,
        source_for: Callable[[TrafficQuery], TrafficSource],
        *,
        max_age_seconds: Mapping[TrafficQuery, float],
        min_interval_seconds: float,
    ) -> None:
        self.source_for = source_for
        self.max_age_seconds = max_age_seconds
        self.min_interval_seconds = min_interval_seconds
        self._tried: dict[TrafficQuery, float] = {}

    def fetch_if_needed(
        self, query: TrafficQuery, current: TrafficSnapshot | None, now: float
    ) -> TrafficSnapshot | None:
        limit = self.max_age_seconds.get(query, DEFAULT_MAX_STALENESS_SECONDS)
        if current is not None and current.fetched_at > 0 and current.age_seconds(now) <= limit:
            return None
        tick = time.monotonic()
        if tick - self._tried.get(query, float("-inf")) < self.min_interval_seconds:
            return None
        self._tried[query] = tick
        try:
            fetched = self.source_for(query).fetch(query)
        except TrafficSourceError as exc:
            log.info("inline traffic fetch failed: %s", exc)
            return None
        return _with_note(fetched, "fetched inline on the verb (no fresh snapshot)")


class RedisTrafficView:
    """:class:`~scheduler_core.extender.verbs.CycleInputs` backed by Redis snapshots and the shared bind log."""

    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        *,
        refresh_seconds: float,
        herd_horizon_seconds: float,
        retry_after_seconds: float = 1.0,
        inline: InlineFallback | None = None,
    ) -> None:
        self.client = client
        self.keys = keys
        self.retry_after_seconds = retry_after_seconds
        self.inline = inline
        self.binds = RedisBindLog(
            client, keys.binds, horizon_seconds=herd_horizon_seconds, default_decay_seconds=refresh_seconds
        )
        self.local_binds = InMemoryBindLog(herd_horizon_seconds, default_decay_seconds=refresh_seconds)
        self.last_good: dict[TrafficQuery, TrafficSnapshot] = {}
        """Per query, the newest snapshot with values this process has read: the fallback when Redis is down."""
        self.last_error = ""
        self._skip_until = 0.0
        self._plans: dict[str, tuple[tuple[TrafficQuery, ...], list[str]]] = {}
        self._decoded: dict[TrafficQuery, tuple[bytes, TrafficSnapshot]] = {}
        """Per query, the last snapshot bytes read from Redis and what they decoded to."""
        self._lock = threading.Lock()

    # --- CycleInputs -------------------------------------------------------------------------------------

    def for_call(self, profile: Profile, now: float) -> tuple[TrafficView, RecentBinds]:
        queries, keys = self._plan(profile)
        if time.monotonic() < self._skip_until:
            return self._fallback(queries, now)
        try:
            pipe = self.client.pipeline(transaction=False)
            if keys:
                pipe.mget(keys)
            self.binds.queue_read(pipe, now)
            results = pipe.execute()
        except redis.RedisError as exc:
            self._unavailable(exc)
            return self._fallback(queries, now)
        values: list[Any] = results[0] if keys else []
        snapshots: dict[TrafficQuery, TrafficSnapshot] = {}
        for query, raw in zip(queries, values, strict=True):
            snapshot = self._decode(query, raw)
            if snapshot is not None and snapshot.fetched_at > 0:
                self._remember(snapshot)
            else:
                last = self.last_good.get(query)
                if last is not None:
                    why = snapshot.error if snapshot is not None else ""
                    snapshot = _with_note(last, "; ".join(part for part in (NOT_IN_REDIS, why) if part))
            snapshot = self._inline(query, snapshot, now)
            if snapshot is not None:
                snapshots[query] = snapshot
        return SnapshotMap(snapshots), self.binds.parse(results[-1], now)

    def record_bind(self, *, node: str, pod: str, at: float, bytes: float | None = None, name: str = "") -> None:
        self.local_binds.record_bind(node=node, pod=pod, at=at, bytes=bytes, name=name)
        if time.monotonic() < self._skip_until:
            return
        try:
            self.binds.record_bind(node=node, pod=pod, at=at, bytes=bytes, name=name)
        except redis.RedisError as exc:
            self._unavailable(exc)

    # --- helpers ---------------------------------------------------------------------------------------

    def _plan(self, profile: Profile) -> tuple[tuple[TrafficQuery, ...], list[str]]:
        plan = self._plans.get(profile.name)
        if plan is None:
            queries = tuple(sorted(profile.traffic_queries(), key=self.keys.snapshot))
            plan = (queries, [self.keys.snapshot(q) for q in queries])
            self._plans[profile.name] = plan
        return plan

    def _decode(self, query: TrafficQuery, raw: Any) -> TrafficSnapshot | None:
        if raw is None:
            return None
        data = raw if isinstance(raw, bytes) else str(raw).encode()
        # The same snapshot is read by every call until the next refresh: decoded once (a 5000-node snapshot is
        # a large value), and the same object each time, so per-node columns of it are kept with the candidate list.
        last = self._decoded.get(query)
        if last is not None and last[0] == data:
            return last[1]
        try:
            snapshot = decode_snapshot(data, query)
        except msgspec.DecodeError as exc:  # ValidationError is a subclass
            log.warning("undecodable traffic snapshot for %s: %s", query, exc)
            return None
        self._decoded[query] = (data, snapshot)
        return snapshot

    def _remember(self, snapshot: TrafficSnapshot) -> None:
        with self._lock:
            last = self.last_good.get(snapshot.query)
            if last is None or snapshot.fetched_at >= last.fetched_at:
                self.last_good[snapshot.query] = snapshot

    def _inline(self, query: TrafficQuery, snapshot: TrafficSnapshot | None, now: float) -> TrafficSnapshot | None:
        if self.inline is None:
            return snapshot
        fetched = self.inline.fetch_if_needed(query, snapshot, now)
        if fetched is None:
            return snapshot
        self._remember(fetched)
        return fetched

    def _unavailable(self, exc: Exception) -> None:
        self._skip_until = time.monotonic() + self.retry_after_seconds
        message = f"{type(exc).__name__}: {exc}"
        if message != self.last_error:
            log.warning("redis unavailable for traffic snapshots (%s); answering from process memory", message)
        self.last_error = message

    def _fallback(self, queries: tuple[TrafficQuery, ...], now: float) -> tuple[TrafficView, RecentBinds]:
        snapshots: dict[TrafficQuery, TrafficSnapshot] = {}
        for query in queries:
            last = self.last_good.get(query)
            snapshot = None if last is None else _with_note(last, REDIS_UNAVAILABLE)
            snapshot = self._inline(query, snapshot, now)
            if snapshot is not None:
                snapshots[query] = snapshot
        binds = self.local_binds.recent_binds(now)
        return SnapshotMap(snapshots), replace(binds, note=HERD_LOCAL_ONLY)


class LocalInputs:
    """In-process mode (``make run``): the process's own traffic store and bind log; nothing shared."""

    def __init__(self, traffic: Callable[[], TrafficView], binds: InMemoryBindLog) -> None:
        self._traffic = traffic
        self.binds = binds

    def for_call(self, profile: Profile, now: float) -> tuple[TrafficView, RecentBinds]:
        return self._traffic(), self.binds.recent_binds(now)

    def record_bind(self, *, node: str, pod: str, at: float, bytes: float | None = None, name: str = "") -> None:
        self.binds.record_bind(node=node, pod=pod, at=at, bytes=bytes, name=name)


def build_inputs(
    profiles: Mapping[str, Profile], *, local_traffic: Callable[[], TrafficView]
) -> RedisTrafficView | LocalInputs:
    """The verbs' inputs for ``SCHEDLENS_TRAFFIC_BACKEND``, from settings."""
    from django.conf import settings

    refresh = settings.SCHEDLENS_TRAFFIC_REFRESH_SECONDS
    horizon = herd_horizon(profiles, refresh)
    if settings.SCHEDLENS_TRAFFIC_BACKEND != "redis":
        return LocalInputs(local_traffic, InMemoryBindLog(horizon, default_decay_seconds=refresh))
    inline = None
    deadline = settings.SCHEDLENS_TRAFFIC_INLINE_FALLBACK_SECONDS
    if deadline > 0:
        inline = InlineFallback(
            lambda query: traffic_source_for(query, timeout_seconds=deadline, retries=0),
            max_age_seconds=staleness_limits(profiles),
            min_interval_seconds=refresh,
        )
    return RedisTrafficView(verb_client(), keys(), refresh_seconds=refresh, herd_horizon_seconds=horizon, inline=inline)
