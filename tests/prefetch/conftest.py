"""Fixtures for the prefetch tests: real Redis, a real Celery worker, real Prometheus servers.

- Redis is the suite's (``REDIS_URL``, db 15 under ``make test``). Each test gets its own key prefix and
  deletes everything under it at start and end: that is this suite's "flush", and unlike ``FLUSHDB`` it
  leaves alone the Celery broker queue living in the same database and any other suite running beside us.
- The Celery worker is a real one (``celery.contrib.testing.worker.start_worker``: the worker machinery in a
  thread, consuming from Redis), on a queue of its own; never eager mode. Tests wait for its effects by
  polling with a deadline.
- Prometheus fixtures come from ``tests/traffic/conftest.py``; ``herd_prometheus`` serves a cluster with a few
  quiet and a few busy nodes named like the simulator's.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
import redis
from celery.contrib.testing.worker import start_worker
from celery.signals import task_postrun
from django.db import connections

from dashboard.traffic.snapshots import Keys, SnapshotStore
from tests.prometheus_server import PrometheusServer, Series, start_prometheus
from tests.traffic.conftest import (  # noqa: F401  (fixtures, re-exported for this directory)
    METRIC,
    closed_port_url,
    counter_samples,
    own_prometheus,
    prometheus_url,
    traffic_data,
)

T = TypeVar("T")

HERD_RATES = {
    "node-001": 10_000.0,
    "node-002": 100_000.0,
    "node-003": 150_000.0,
    "node-004": 200_000.0,
    "node-005": 1_000_000.0,
    "node-006": 1_000_000.0,
    "node-007": 1_000_000.0,
    "node-008": 1_000_000.0,
}
"""Bytes/s on eth0: four quiet nodes (one clearly the quietest) and four busy ones."""
QUIET = ("node-001", "node-002", "node-003", "node-004")


def wait_for(predicate: Callable[[], T | None], *, what: str, timeout: float = 20.0) -> T:
    """Poll ``predicate`` until it returns something truthy; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(0.02)  # poll interval, bounded by the deadline above


def delete_prefix(client: redis.Redis, prefix: str) -> None:
    keys = list(client.scan_iter(match=f"{prefix}*", count=500))
    if keys:
        client.delete(*keys)


@pytest.fixture
def redis_prefix(settings) -> Iterator[str]:
    """A key prefix of this test's own, empty at start and deleted at the end."""
    prefix = f"schedlens-test:{uuid.uuid4().hex[:12]}:"
    settings.SCHEDLENS_REDIS_PREFIX = prefix
    client = redis.Redis.from_url(settings.REDIS_URL)
    delete_prefix(client, prefix)
    yield prefix
    delete_prefix(client, prefix)
    client.close()


@pytest.fixture
def redis_client(settings) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(settings.REDIS_URL)
    yield client
    client.close()


@pytest.fixture
def snapshot_store(redis_client: redis.Redis, redis_prefix: str) -> SnapshotStore:
    return SnapshotStore(redis_client, Keys(redis_prefix))


def _close_connections(**kwargs: object) -> None:
    # The worker thread's database connections would otherwise outlive the test database.
    connections.close_all()


@pytest.fixture(scope="session")
def celery_worker() -> Iterator[object]:
    """A real Celery worker consuming from Redis, in a thread of this process, on a queue of its own."""
    from config.celery import app

    app.conf.task_default_queue = f"schedlens-test-{uuid.uuid4().hex[:12]}"
    task_postrun.connect(_close_connections, weak=False)
    try:
        with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=30.0, loglevel="WARNING"):
            yield app
    finally:
        task_postrun.disconnect(_close_connections)


def _herd_series(anchor: int) -> tuple[Series, ...]:
    return tuple(
        Series(METRIC, {"device": "eth0", "instance": f"10.1.0.{i}:9100", "kubernetes_node": node}, samples)
        for i, (node, rate) in enumerate(HERD_RATES.items(), start=1)
        for samples in [counter_samples(anchor, rate)]
    )


@pytest.fixture(scope="session")
def herd_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    server = start_prometheus(_herd_series(int(time.time())), Path(tmp_path_factory.mktemp("herd-prometheus")))
    yield server
    server.stop()
