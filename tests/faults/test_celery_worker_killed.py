"""Celery workers SIGKILLed mid-task: the message is redelivered and the second run is harmless; a message that
kills its worker every time is parked in a dead-letter list instead of being redelivered forever.

Real ``celery worker`` processes on a private ``redis-server`` (the broker and the snapshots); the tasks are the
real ``schedlens.prefetch_traffic`` against a real, frozen Prometheus, and two test-only tasks
(``tests/faults/poison_tasks.py``) for the worker-killing message and a task that waits for the test.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from celery import Celery

from config.celery import dead_letter_key
from dashboard.traffic.models import RefreshStatus, TrafficRefresh
from dashboard.traffic.snapshots import Keys, SnapshotStore, query_to_dict
from scheduler_core.traffic import TrafficQuery
from tests.support.processes import PrivateRedis, celery_worker, children, database_url, wait_for
from tests.support.prometheus_server import PrometheusServer

pytestmark = [pytest.mark.prometheus, pytest.mark.django_db(transaction=True)]

QUEUE = "schedlens-faults"
PREFIX = "schedlens-faults:"
MAX_DELIVERIES = 3


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[PrivateRedis]:
    server = PrivateRedis(tmp_path).start()
    yield server
    server.kill()


@pytest.fixture
def sender(broker: PrivateRedis) -> Iterator[Celery]:
    app = Celery("faults-sender", broker=broker.url)
    yield app
    app.close()


def worker_env(settings, broker: PrivateRedis, **extra: str) -> dict[str, str]:
    return {
        "REDIS_URL": broker.url,
        "SCHEDLENS_REDIS_PREFIX": PREFIX,
        "SCHEDLENS_CELERY_QUEUE": QUEUE,
        "SCHEDLENS_CELERY_MAX_DELIVERIES": str(MAX_DELIVERIES),
        "DATABASE_URL": database_url(settings.DATABASES["default"]),
        "SCHEDLENS_CONFIG": "",
        **extra,
    }


def prefork(env: dict[str, str], log: Path):
    return celery_worker(
        ["--pool=prefork", "--concurrency=1", "-I", "tests.faults.poison_tasks", "-Q", QUEUE], env, log
    )


def test_a_message_that_kills_its_worker_every_time_is_parked_after_a_few_deliveries(
    settings, tmp_path: Path, broker: PrivateRedis, sender: Celery
) -> None:
    client = broker.client()
    worker = prefork(worker_env(settings, broker), tmp_path / "worker.log")
    try:
        sender.send_task("schedlens.test.kill_own_worker", args=["runs"], queue=QUEUE, task_id="poison-1")
        # MAX_DELIVERIES + 1 deliveries, each given back only once the prefork pool has noticed its worker's death on
        # its own timer: the deadline leaves room for a loaded machine, it measures nothing.
        parked = wait_for(
            lambda: client.lrange(dead_letter_key_for(PREFIX), 0, -1), what="the poison message parked", timeout=60
        )

        sender.send_task("schedlens.test.note", args=["notes", "still working"], queue=QUEUE)
        wait_for(lambda: client.lrange("notes", 0, -1), what="the worker to run the next task")
        assert worker.alive()
    finally:
        worker.stop()
    runs = client.lrange("runs", 0, -1)
    assert len(runs) == MAX_DELIVERIES, "delivered (and killed its pool process) exactly that many times"
    assert len(set(runs)) == MAX_DELIVERIES, "each time in a fresh pool process"
    (entry,) = [json.loads(raw) for raw in parked]
    assert entry["task"] == "schedlens.test.kill_own_worker"
    assert entry["id"] == "poison-1"
    assert entry["args"] == ["runs"]
    assert entry["deliveries"] == MAX_DELIVERIES + 1
    assert "parked in schedlens-faults:celery:dead-letter" in worker.output()
    assert client.llen(QUEUE) == 0, "nothing left to redeliver"


def dead_letter_key_for(prefix: str) -> str:
    return f"{prefix}celery:dead-letter"


def test_the_dead_letter_key_follows_the_redis_prefix(settings) -> None:
    settings.SCHEDLENS_REDIS_PREFIX = PREFIX
    assert dead_letter_key() == dead_letter_key_for(PREFIX)


def test_a_prefetch_killed_mid_query_is_redelivered_and_the_second_run_does_no_harm(
    settings, tmp_path: Path, broker: PrivateRedis, sender: Celery, own_prometheus: PrometheusServer
) -> None:
    profiles = tmp_path / "profiles.yaml"
    profiles.write_text(
        "profiles:\n- name: default\n  pluginConfig:\n"
        f"  - {{name: NetworkTraffic, args: {{address: {own_prometheus.url!r}, deviceName: eth0}}}}\n"
    )
    query = TrafficQuery(address=own_prometheus.url, device_name="eth0")
    env = worker_env(
        settings,
        broker,
        SCHEDLENS_CONFIG=str(profiles),
        SCHEDLENS_PROMETHEUS_TIMEOUT_SECONDS="30",
        SCHEDLENS_PROMETHEUS_RETRIES="0",
    )
    client = broker.client()
    store = SnapshotStore(client, Keys(PREFIX))
    worker = prefork(env, tmp_path / "worker.log")
    try:
        sender.send_task("schedlens.prefetch_traffic", args=[query_to_dict(query)], queue=QUEUE)
        first = wait_for(lambda: TrafficRefresh.objects.first(), what="a first refresh", timeout=30)
        assert first.status == RefreshStatus.OK
        before = store.load(query)

        own_prometheus.pause()  # the next query hangs: the task is stuck in it, mid-task
        sender.send_task("schedlens.prefetch_traffic", args=[query_to_dict(query)], queue=QUEUE, task_id="stuck-1")
        deliveries = f"{PREFIX}celery:deliveries:stuck-1"
        wait_for(lambda: client.get(deliveries) == b"1", what="the task to start")
        (pool_process,) = children(worker.pid)
        os.kill(pool_process, signal.SIGKILL)
        own_prometheus.resume()

        wait_for(lambda: b"stuck-1" in worker.output().encode() and client.get(deliveries) is None, what="redelivery")
    finally:
        worker.stop()
    assert "WorkerLostError" in worker.output() or "Worker exited prematurely" in worker.output()
    assert worker.output().count("Task schedlens.prefetch_traffic[stuck-1] received") >= 1
    assert "skipped: another one is running" in worker.output(), (
        "the redelivered run found the killed run's lock and left the snapshot alone"
    )
    assert list(TrafficRefresh.objects.values_list("status", flat=True)) == [RefreshStatus.OK]
    after = store.load(query)
    assert after is not None
    assert before is not None
    assert after.bytes_by_node == before.bytes_by_node
    lock_ttl = client.pttl(Keys(PREFIX).lock(query)) / 1000
    assert 0 < lock_ttl <= settings.CELERY_TASK_TIME_LIMIT, "the dead run's lock expires by itself"


def test_a_whole_worker_killed_mid_task_has_its_message_run_by_the_next_worker(
    settings, tmp_path: Path, broker: PrivateRedis, sender: Celery
) -> None:
    env = worker_env(settings, broker, SCHEDLENS_CELERY_VISIBILITY_TIMEOUT_SECONDS="2")
    command = ["--pool=solo", "-I", "tests.faults.poison_tasks", "-Q", QUEUE]
    client = broker.client()
    first = celery_worker(command, env, tmp_path / "first.log")
    try:
        sender.send_task("schedlens.test.wait_then_note", args=["steps", "gate"], queue=QUEUE)
        wait_for(lambda: client.lrange("steps", 0, -1) == [b"started"], what="the task to start")
        first.kill(signal.SIGKILL)  # the whole worker, not a pool process: nobody is left to give the message back
    finally:
        first.stop()
    client.rpush("gate", "open")
    second = celery_worker(command, env, tmp_path / "second.log")
    try:
        wait_for(lambda: client.lrange("steps", 0, -1)[-1:] == [b"done"], what="the next worker to run it", timeout=30)
    finally:
        second.stop()
    assert client.lrange("steps", 0, -1) == [b"started", b"started", b"done"]
