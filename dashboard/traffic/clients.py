"""Redis clients: a fail-fast one for the verbs, a patient one for the workers, both built from settings.

redis-py retries a failed command 10 times by default; on a verb that would turn a dead Redis into a slow
scheduler, so the verb client never retries and gives up after ``SCHEDLENS_REDIS_VERB_TIMEOUT_SECONDS``.
"""

from __future__ import annotations

import functools

import redis
from django.conf import settings
from redis.backoff import ExponentialBackoff, NoBackoff
from redis.retry import Retry

from dashboard.traffic.snapshots import Keys, SnapshotStore


def verb_client(*, timeout: float | None = None) -> redis.Redis:
    """Fail fast: no retries, ``SCHEDLENS_REDIS_VERB_TIMEOUT_SECONDS`` (or ``timeout``) to connect and to answer."""
    return _fail_fast_client(
        settings.REDIS_URL, settings.SCHEDLENS_REDIS_VERB_TIMEOUT_SECONDS if timeout is None else timeout
    )


@functools.cache
def _fail_fast_client(url: str, timeout: float) -> redis.Redis:
    return redis.Redis.from_url(
        url,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 0),
        health_check_interval=0,
    )


@functools.cache
def _worker_client(url: str) -> redis.Redis:
    return redis.Redis.from_url(
        url,
        socket_timeout=5.0,
        socket_connect_timeout=2.0,
        retry=Retry(ExponentialBackoff(cap=1.0, base=0.1), 2),
        health_check_interval=30,
    )


def worker_client() -> redis.Redis:
    """Shared per URL and process; redis-py's pool starts afresh in a forked child by itself."""
    return _worker_client(settings.REDIS_URL)


def keys() -> Keys:
    return Keys(settings.SCHEDLENS_REDIS_PREFIX)


def snapshot_store() -> SnapshotStore:
    return SnapshotStore(worker_client(), keys())
