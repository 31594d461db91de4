"""Fixtures for the prefetch tests: real Redis, a real Celery worker, real Prometheus servers.

Redis key prefixes and the Celery worker come from ``tests/dashboard/conftest.py``, the Prometheus of the traffic
tests from ``tests/conftest.py``; ``herd_prometheus`` serves a cluster with a few quiet and a few busy nodes named
like the simulator's (``tests.support.prometheus_data.herd_series``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from dashboard.traffic.snapshots import Keys, SnapshotStore
from tests.support.prometheus_data import herd_series
from tests.support.prometheus_server import PrometheusServer, start_prometheus


@pytest.fixture
def redis_client(settings) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(settings.REDIS_URL)
    yield client
    client.close()


@pytest.fixture
def snapshot_store(redis_client: redis.Redis, redis_prefix: str) -> SnapshotStore:
    return SnapshotStore(redis_client, Keys(redis_prefix))


@pytest.fixture(scope="session")
def herd_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    server = start_prometheus(herd_series(int(time.time())), Path(tmp_path_factory.mktemp("herd-prometheus")))
    yield server
    server.stop()
