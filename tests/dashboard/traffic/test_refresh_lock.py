"""A traffic refresh SIGKILLed while it holds its query's Redis lock blocks the next refreshes only as long as a
live run could need the lock (its fetch's deadline plus the Redis writes), not the task's 60 s time limit.

The refresh runs in a real process against real Redis; its Prometheus is a socket that accepts and never
answers, so the process is inside its fetch, holding the lock, when the test kills it.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest
import redis

from dashboard.traffic.services import REFRESH_LOCK_MARGIN_SECONDS, refresh_lock_seconds
from dashboard.traffic.snapshots import Keys
from dashboard.traffic.sources import fetch_deadline_seconds, traffic_source_for
from scheduler_core.traffic import TrafficQuery
from tests.support.paths import REPO
from tests.support.processes import wait_for

CHILD = """
import django
django.setup()
from dashboard.traffic.services import traffic_refresh
from scheduler_core.traffic import TrafficQuery
traffic_refresh(query=TrafficQuery())
"""


class SilentServer:
    """Accepts connections and never answers: every Prometheus attempt runs into its timeout."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.connections: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:  # closed
                return
            self.connections.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.connections:
            conn.close()


@pytest.fixture
def silent_prometheus() -> Iterator[SilentServer]:
    server = SilentServer()
    yield server
    server.close()


def test_a_refresh_killed_holding_its_lock_blocks_the_next_one_for_its_fetch_deadline_not_the_task_limit(
    settings, redis_prefix: str, silent_prometheus: SilentServer
) -> None:
    settings.PROMETHEUS_URL = silent_prometheus.url
    settings.SCHEDLENS_PROMETHEUS_TIMEOUT_SECONDS = 2.0
    settings.SCHEDLENS_PROMETHEUS_RETRIES = 1
    source = traffic_source_for(TrafficQuery())
    deadline = fetch_deadline_seconds(source)
    assert deadline == pytest.approx(2.0 * 2 + 0.2), "two attempts of 2 s and one 0.2 s pause"
    ttl = refresh_lock_seconds(source)
    assert ttl == pytest.approx(deadline + REFRESH_LOCK_MARGIN_SECONDS), "a live run keeps its lock past its fetch"
    assert ttl < settings.CELERY_TASK_TIME_LIMIT
    # A refresh that reads the pods of recent binds too (reconcileHerd) makes a second request of the same deadline.
    assert refresh_lock_seconds(source, reads_pods=True) == pytest.approx(2 * deadline + REFRESH_LOCK_MARGIN_SECONDS)

    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "REDIS_URL": settings.REDIS_URL,
        "SCHEDLENS_REDIS_PREFIX": redis_prefix,
        "PROMETHEUS_URL": silent_prometheus.url,
        "SCHEDLENS_PROMETHEUS_TIMEOUT_SECONDS": "2",
        "SCHEDLENS_PROMETHEUS_RETRIES": "1",
        "SCHEDLENS_CONFIG": "",
        "SCHEDLENS_CLUSTER_FILE": "",
    }
    client = redis.Redis.from_url(settings.REDIS_URL)
    lock = Keys(redis_prefix).lock(TrafficQuery())
    child = subprocess.Popen([sys.executable, "-c", CHILD], cwd=REPO, env=env, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: silent_prometheus.connections, what="the refresh to be inside its fetch")
        assert client.exists(lock), "the refresh holds its query's lock while it fetches"
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=10) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        if child.stderr is not None:
            child.stderr.close()

    remaining = client.pttl(lock) / 1000
    assert 0 < remaining <= ttl, f"the dead run's lock lingers {remaining:.1f}s (the task limit would be 60 s)"
