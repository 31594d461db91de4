"""Writes of the traffic prefetch: refresh one query into Redis (leaving a row), prune rows, record binds.

Each is what exactly one Celery task (or the placement watcher) calls; none is called on a verb's path.
"""

from __future__ import annotations

import functools
import logging
import os
import socket
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import redis
from django.conf import settings
from django.db import DatabaseError

from dashboard.selectors.profiles import profile_configuration
from dashboard.traffic.clients import keys, snapshot_store, worker_client
from dashboard.traffic.herd import RedisBindLog
from dashboard.traffic.models import RefreshStatus, TrafficRefresh
from dashboard.traffic.snapshots import SnapshotStore, query_key, query_to_dict
from dashboard.traffic.sources import fetch_deadline_seconds, known_node_names, recent_pods_reader, traffic_source_for
from dashboard.traffic.view import herd_horizon, reconciling_queries
from scheduler_core.traffic import TrafficQuery, TrafficSnapshot, TrafficSource, TrafficSourceError
from scheduler_core.traffic.pods import PodReads

log = logging.getLogger(__name__)

WORKER_ID = f"{socket.gethostname()}:{os.getpid()}"

REFRESH_LOCK_MARGIN_SECONDS = 10.0
"""How long a refresh's lock outlives its fetch's deadline: the snapshot's Redis writes that follow the fetch."""


def refresh_lock_seconds(source: TrafficSource, *, reads_pods: bool = False) -> float:
    """The refresh lock's TTL: what a live run needs, so a run killed holding it (SIGKILL, OOM) blocks the next
    refreshes of its query only that long, not the task's time limit. The lock guards the fetch (and the read of the
    pods of recent binds after it, ``reads_pods``: a second request with the same deadline) and the Redis writes; the
    database row comes after them, so a slow database outliving the lock overlaps nothing."""
    deadline = fetch_deadline_seconds(source) * (2 if reads_pods else 1)
    return min(float(settings.CELERY_TASK_TIME_LIMIT), deadline + REFRESH_LOCK_MARGIN_SECONDS)


def _when(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


def _history_due(key: str, now: float) -> bool:
    """Keep per-node values for one refresh per history interval: enough for a chart, a fraction of the rows."""
    interval = settings.SCHEDLENS_TRAFFIC_HISTORY_INTERVAL_SECONDS
    if interval <= 0:
        return False
    since = _when(now - interval)
    return not TrafficRefresh.objects.filter(query_key=key, started_at__gt=since, bytes_by_node__isnull=False).exists()


def traffic_refresh(*, query: TrafficQuery) -> TrafficRefresh | None:
    """Fetch ``query`` once, store the snapshot in Redis, and leave a :class:`TrafficRefresh` row.

    A failed fetch keeps the last good values in Redis with the error beside them. Returns ``None`` when
    another worker is refreshing the same query right now (beat and a manual run overlapping), or when only
    the database write failed (the snapshot, which is what the verbs need, was stored first).
    """
    store = snapshot_store()
    started = time.time()
    source = traffic_source_for(query)
    pods = _pod_reads(
        settings.SCHEDLENS_CONFIG,
        settings.PROMETHEUS_URL,
        settings.SCHEDLENS_SYNTHETIC_TRAFFIC,
        settings.SCHEDLENS_TRAFFIC_REFRESH_SECONDS,
        keys().binds,
    )
    try:
        reads_pods = pods is not None and query in pods.queries
        token = store.acquire_refresh_lock(query, refresh_lock_seconds(source, reads_pods=reads_pods))
        if token is None:
            log.info("traffic refresh of %s skipped: another one is running", query_key(query))
            return None
        try:
            return _refresh(query, store, source, pods)
        finally:
            store.release_refresh_lock(query, token)
    except redis.RedisError as exc:  # Redis down or refusing writes (maxmemory): the row says so
        log.warning("traffic refresh of %s could not use redis: %s", query_key(query), exc)
        return TrafficRefresh.objects.create(
            query_key=query_key(query),
            query=query_to_dict(query),
            started_at=_when(started),
            finished_at=_when(time.time()),
            duration_ms=round((time.time() - started) * 1000, 3),
            status=RefreshStatus.ERROR,
            error=f"redis: {type(exc).__name__}: {exc}",
            worker=WORKER_ID,
        )


def _refresh(
    query: TrafficQuery, store: SnapshotStore, source: TrafficSource, pods: PodReads | None
) -> TrafficRefresh | None:
    started = time.time()
    perf = time.perf_counter()
    snapshot: TrafficSnapshot | None = None
    error = ""
    try:
        snapshot = source.fetch(query)
        if pods is not None:
            snapshot = pods.add_to(snapshot)
    except TrafficSourceError as exc:
        error = str(exc)
    duration = time.perf_counter() - perf
    finished = time.time()
    if snapshot is not None:
        store.save(snapshot, attempted_at=finished)
    else:
        log.warning("traffic refresh of %s failed: %s", query_key(query), error)
        snapshot = store.record_failure(query, error, at=finished)
    store.record_stats(query, duration_seconds=duration, ok=not error, at=finished)

    key = query_key(query)
    matched = set(snapshot.bytes_by_node) if not error else set()
    known = known_node_names()
    try:
        return TrafficRefresh.objects.create(
            query_key=key,
            query=query_to_dict(query),
            source=snapshot.source,
            started_at=_when(started),
            finished_at=_when(finished),
            duration_ms=round(duration * 1000, 3),
            status=RefreshStatus.ERROR if error else RefreshStatus.OK,
            error=error,
            nodes_matched=len(matched),
            nodes_without_metrics=len(set(known) - matched) if known and not error else None,
            unmatched_series=list(snapshot.unmatched_series) if not error else [],
            bytes_by_node={n: round(v) for n, v in snapshot.bytes_by_node.items()}
            if not error and _history_due(key, started)
            else None,
            worker=WORKER_ID,
        )
    except DatabaseError:
        log.exception("traffic refresh of %s: snapshot stored, but its row could not be written", key)
        return None


@dataclass(frozen=True, slots=True)
class PruneResult:
    deleted: int
    values_dropped: int


def traffic_refreshes_prune(*, now: float | None = None) -> PruneResult:
    """Delete rows past ``SCHEDLENS_TRAFFIC_REFRESH_RETENTION_HOURS``; drop per-node values past the history's."""
    moment = _when(time.time() if now is None else now)
    rows_cutoff = moment - timedelta(hours=settings.SCHEDLENS_TRAFFIC_REFRESH_RETENTION_HOURS)
    values_cutoff = moment - timedelta(hours=settings.SCHEDLENS_TRAFFIC_HISTORY_RETENTION_HOURS)
    deleted, _ = TrafficRefresh.objects.filter(started_at__lt=rows_cutoff).delete()
    dropped = TrafficRefresh.objects.filter(started_at__lt=values_cutoff, bytes_by_node__isnull=False).update(
        bytes_by_node=None
    )
    return PruneResult(deleted=deleted, values_dropped=dropped)


def herd_record_bind(*, node: str, pod: str, at: float | None = None, name: str = "") -> None:
    """Count a bind kube-scheduler made itself (the placement watcher's ``dashboard.placements.herd``); idempotent
    per pod.

    The ``bind`` verb records its own binds on the verb path; recording the same pod again changes nothing.
    Raises ``redis.RedisError`` when Redis is unreachable, so a caller with a queue can retry.
    """
    bind_log = _bind_log(settings.SCHEDLENS_CONFIG, settings.SCHEDLENS_TRAFFIC_REFRESH_SECONDS, keys().binds)
    bind_log.record_bind(node=node, pod=pod, at=time.time() if at is None else at, name=name)


@functools.cache
def _pod_reads(config: str, prometheus: str, synthetic: bool, refresh: float, key: str) -> PodReads | None:
    """What a refresh reads the pods of recent binds with, when a profile reconciles (per configuration and
    Prometheus: read once, and its failure logged once while it lasts); the pods are the shared bind log's."""
    # A configuration that cannot be read reconciles nothing: the nodes' refresh does not depend on it.
    queries = reconciling_queries(profile_configuration().profiles)
    reader = recent_pods_reader() if queries else None
    if reader is None:
        return None
    bind_log = _bind_log(config, refresh, key)

    def pods() -> tuple[str, ...]:
        try:
            return bind_log.recent_binds(time.time()).pods
        except redis.RedisError:  # the nodes' snapshot still goes on (and fails to store, saying why)
            return ()

    return PodReads(reader, pods, queries)


@functools.cache
def _bind_log(config: str, refresh: float, key: str) -> RedisBindLog:
    """Per configuration: the horizon comes from the profiles, read once rather than once per bind."""
    horizon = herd_horizon(profile_configuration().required(), refresh)
    return RedisBindLog(worker_client(), key, horizon_seconds=horizon, default_decay_seconds=refresh)
