"""Prometheus frozen or stopped, Redis killed: verbs keep answering at their normal speed and say why.

The verbs here go through the real Django views of a redis-mode runtime (or, for the Redis kill, an Extender
reading a private ``redis-server`` that the test kills and restarts: the suite's shared Redis stays up).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from dashboard import runtime as runtime_module
from dashboard.tasks import prefetch_traffic
from dashboard.traffic.models import RefreshStatus, TrafficRefresh
from dashboard.traffic.snapshots import Keys, query_key, query_to_dict
from dashboard.traffic.view import HERD_LOCAL_ONLY, REDIS_UNAVAILABLE, RedisTrafficView
from scheduler_core.extender.protocol.binding import SimulatedBinder
from scheduler_core.extender.protocol.cluster import StaticCluster
from scheduler_core.extender.protocol.wire import encode
from scheduler_core.extender.record.spool_codec import decode_event
from scheduler_core.extender.record.structs import VerbEvent
from scheduler_core.extender.scoring.profiles import load_profiles
from scheduler_core.extender.verbs import Extender
from scheduler_core.traffic import TrafficQuery
from tests.support.paths import REPO
from tests.support.processes import free_port, wait_for
from tests.support.prometheus_data import NODE_A_ETH0_RATE, NODE_B_ETH0_RATE
from tests.support.prometheus_server import PrometheusServer

pytestmark = [pytest.mark.prometheus, pytest.mark.django_db(transaction=True)]

JSON = "application/json"
NODES = ["node-a", "node-b", "node-c"]
POD = {"metadata": {"name": "web-1", "namespace": "shop", "uid": "uid-1"}, "spec": {"containers": []}}
BODY = encode({"Pod": POD, "Nodes": None, "NodeNames": NODES})
PROFILE = """
profiles:
- name: default
  pluginConfig:
  - {name: NetworkTraffic, args: {address: "ADDRESS", deviceName: eth0, assumedBytesPerPod: 300000}}
  - {name: TrafficThreshold, args: {address: "ADDRESS", deviceName: eth0}}
"""
NORMAL_LATENCY = 0.2
"""Seconds: a verb answers in milliseconds; this bound only has to be far below any Prometheus timeout."""


def write_profile(tmp_path: Path, address: str) -> Path:
    path = tmp_path / "profiles.yaml"
    path.write_text(PROFILE.replace("ADDRESS", address))
    return path


@pytest.fixture
def redis_runtime(settings, tmp_path, monkeypatch, redis_prefix, own_prometheus: PrometheusServer):
    """The web side in redis mode, reading snapshots the worker refreshes from ``own_prometheus``."""
    settings.SCHEDLENS_CONFIG = str(write_profile(tmp_path, own_prometheus.url))
    settings.SCHEDLENS_SPOOL_DIR = tmp_path / "spool"
    settings.SCHEDLENS_INGEST_IN_PROCESS = False
    settings.SCHEDLENS_BIND_MODE = "simulated"
    settings.SCHEDLENS_CLUSTER_FILE = ""
    settings.SCHEDLENS_TRAFFIC_BACKEND = "redis"
    settings.SCHEDLENS_PROMETHEUS_RETRIES = 0
    settings.SCHEDLENS_PROMETHEUS_TIMEOUT_SECONDS = 1.0
    runtime = runtime_module.Runtime()
    monkeypatch.setattr(runtime_module, "_runtime", runtime)
    yield runtime
    runtime.spool.close()


def prioritize(client, runtime) -> tuple[float, VerbEvent]:
    started = time.perf_counter()
    response = client.post("/extender/default/prioritize", data=BODY, content_type=JSON)
    elapsed = time.perf_counter() - started
    assert response.status_code == 200
    assert [h["Host"] for h in json.loads(response.content)] == NODES
    events = [decode_event(data) for _, data in runtime.spool.read_batch(100_000)]
    return elapsed, [e for e in events if e.verb == "prioritize"][-1]


def refresh(query: TrafficQuery, count: int) -> TrafficRefresh:
    def rows() -> list[TrafficRefresh]:
        found = list(TrafficRefresh.objects.filter(query_key=query_key(query)).order_by("started_at", "id"))
        return found if len(found) >= count else []

    prefetch_traffic.delay(query_to_dict(query))
    return wait_for(rows, what=f"refresh #{count}")[-1]


def test_verbs_keep_answering_from_the_last_snapshot_while_prometheus_hangs_then_stops(
    celery_worker, client, redis_runtime, own_prometheus: PrometheusServer
) -> None:
    query = TrafficQuery(address=own_prometheus.url, device_name="eth0")
    assert refresh(query, 1).status == RefreshStatus.OK
    _, event = prioritize(client, redis_runtime)
    (traffic,) = event.prioritize.plugins
    measured = [NODE_A_ETH0_RATE * 300, NODE_B_ETH0_RATE * 300, None]
    assert traffic.raw == pytest.approx(measured)
    assert traffic.note == ""

    # Frozen (SIGSTOP): the worker's query hangs until its timeout; verbs during that time do not wait.
    own_prometheus.pause()
    try:
        prefetch_traffic.delay(query_to_dict(query))
        latencies: list[float] = []
        while not TrafficRefresh.objects.filter(status=RefreshStatus.ERROR).exists():
            elapsed, event = prioritize(client, redis_runtime)
            latencies.append(elapsed)
            assert len(latencies) < 5000, "the frozen refresh never ended"
    finally:
        own_prometheus.resume()
    hung = TrafficRefresh.objects.get(status=RefreshStatus.ERROR)
    assert "no answer within 1s" in hung.error
    assert len(latencies) > 3, "verbs were called while the refresh hung"
    assert max(latencies) < NORMAL_LATENCY, latencies
    _, event = prioritize(client, redis_runtime)
    (traffic,) = event.prioritize.plugins
    assert traffic.raw == pytest.approx(measured), "the last good values are still used"
    assert "no answer within 1s" in traffic.note

    # Stopped: connections are refused; same story, with that reason.
    own_prometheus.stop()
    assert "connection refused" in refresh(query, 3).error
    elapsed, event = prioritize(client, redis_runtime)
    (traffic,) = event.prioritize.plugins
    assert elapsed < NORMAL_LATENCY
    assert traffic.raw == pytest.approx(measured)
    assert "connection refused" in traffic.note

    # Minutes later the values are too old to use: neutral scores, "metrics stale", the age in the record.
    redis_runtime.extender.clock = lambda: time.time() + 200
    _, event = prioritize(client, redis_runtime)
    (traffic,) = event.prioritize.plugins
    assert traffic.scores == [50.0, 50.0, 50.0]
    assert traffic.note.startswith("metrics stale; ")
    assert "connection refused" in traffic.note
    assert traffic.metric_age_seconds > 200


# --- Redis killed and restarted ------------------------------------------------------------------------------


class PrivateRedis:
    """A ``redis-server`` of the test's own on a free port, without persistence, to kill and restart."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        log = (self.workdir / "redis.log").open("ab")
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            cwd=self.workdir,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        client = redis.Redis.from_url(self.url, socket_connect_timeout=0.2)

        def answers() -> bool:
            try:
                return bool(client.ping())
            except redis.RedisError:
                return False

        wait_for(answers, what=f"redis-server on port {self.port}", timeout=10.0)
        client.close()

    def kill(self) -> None:
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=10)


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    server = PrivateRedis(tmp_path)
    server.start()
    yield server
    server.kill()


def _database_url(settings) -> str:
    db = settings.DATABASES["default"]
    if "postgresql" not in db["ENGINE"]:
        return ""  # an in-memory test database cannot be shared; the worker's rows then fail and are logged
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.fixture
def worker_with_beat(
    transactional_db, settings, tmp_path: Path, private_redis: PrivateRedis, prometheus_url: str, redis_prefix: str
) -> Iterator[subprocess.Popen[bytes]]:
    """``celery worker -B`` in a subprocess, broker and snapshots on the private Redis, refreshing every second."""
    config = write_profile(tmp_path, prometheus_url)
    env = {
        **os.environ,
        "REDIS_URL": private_redis.url,
        "SCHEDLENS_CONFIG": str(config),
        "SCHEDLENS_REDIS_PREFIX": redis_prefix,
        "SCHEDLENS_TRAFFIC_REFRESH_SECONDS": "1",
        "SCHEDLENS_PROMETHEUS_RETRIES": "0",
        "DATABASE_URL": _database_url(settings) or f"sqlite:///{tmp_path / 'worker.sqlite3'}",
    }
    celery = Path(sys.executable).with_name("celery")
    log = (tmp_path / "worker.log").open("ab")
    command = [str(celery), "-A", "config", "worker", "-B", "--pool=solo", "--loglevel=INFO"]
    command += ["--without-heartbeat", "--without-mingle", "--without-gossip", "-s", str(tmp_path / "beat-schedule")]
    process = subprocess.Popen(
        command,
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    yield process
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def test_redis_killed_verbs_answer_from_process_memory_and_snapshots_resume_after_restart(
    worker_with_beat, private_redis: PrivateRedis, prometheus_url: str, redis_prefix: str, tmp_path: Path
) -> None:
    profiles = load_profiles(PROFILE.replace("ADDRESS", prometheus_url))
    client = redis.Redis.from_url(
        private_redis.url, socket_timeout=0.05, socket_connect_timeout=0.05, retry=Retry(NoBackoff(), 0)
    )
    view = RedisTrafficView(
        client,
        Keys(redis_prefix),
        refresh_seconds=1.0,
        herd_horizon_seconds=60.0,
        retry_after_seconds=0.2,
    )
    extender = Extender(profiles, cluster=StaticCluster(), traffic=view, binder=SimulatedBinder(), inputs=view)
    query = next(iter(profiles["default"].traffic_queries()))

    def prioritized() -> tuple[float, VerbEvent]:
        started = time.perf_counter()
        result = extender.prioritize("default", BODY)
        assert result.status == 200
        return time.perf_counter() - started, result.event

    def fresh_from_redis(after: float) -> VerbEvent | None:
        _, event = prioritized()
        (traffic,) = event.prioritize.plugins
        snapshot = view.last_good.get(query)
        ok = snapshot is not None and snapshot.fetched_at > after and traffic.note == "" and traffic.raw
        return event if ok else None

    started = time.time()
    wait_for(lambda: fresh_from_redis(started), what="the worker's first snapshot (beat every 1 s)", timeout=60)

    private_redis.kill()
    killed_at = time.time()
    bind = encode({"PodName": "p", "PodNamespace": "shop", "PodUID": "uid-9", "Node": "node-a"})
    assert extender.bind("default", bind).status == 200
    for _ in range(20):
        elapsed, event = prioritized()
        (traffic,) = event.prioritize.plugins
        assert elapsed < NORMAL_LATENCY
        assert traffic.raw[:2] == pytest.approx([NODE_A_ETH0_RATE * 300, NODE_B_ETH0_RATE * 300])
        assert traffic.note == f"{REDIS_UNAVAILABLE}; {HERD_LOCAL_ONLY}"
        assert traffic.herd_bytes[0] > 0, "this process's own bind still counts while Redis is away"

    private_redis.start()
    wait_for(
        lambda: fresh_from_redis(killed_at),
        what="a snapshot refreshed after the restart (worker and beat reconnected)",
        timeout=90,
    )
    client.close()
