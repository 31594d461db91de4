"""Redis refusing writes (``maxmemory`` reached with ``noeviction``): verbs keep answering at their normal speed from
the snapshots Redis still serves, and both the verbs' records and the refresh rows say what happened.

A private ``redis-server --maxmemory 1mb --maxmemory-policy noeviction``, filled until it answers OOM; the real
Prometheus of the traffic tests; the real refresh service and the real Redis-backed verb inputs.
(Redis killed and restarted empty is ``tests/dashboard/traffic/test_failures.py``.)
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from dashboard.traffic.models import RefreshStatus, TrafficRefresh
from dashboard.traffic.services import traffic_refresh
from dashboard.traffic.snapshots import Keys
from dashboard.traffic.view import REDIS_UNAVAILABLE, RedisTrafficView
from scheduler_core.extender.protocol.binding import SimulatedBinder
from scheduler_core.extender.protocol.cluster import StaticCluster
from scheduler_core.extender.protocol.wire import encode
from scheduler_core.extender.scoring.profiles import load_profiles
from scheduler_core.extender.verbs import Extender
from scheduler_core.traffic import TrafficQuery
from tests.support.processes import PrivateRedis
from tests.support.prometheus_data import NODE_A_ETH0_RATE

pytestmark = [pytest.mark.prometheus, pytest.mark.django_db]

PREFIX = "schedlens-oom:"
NODES = ["node-a", "node-b"]
POD = {"metadata": {"name": "web-1", "namespace": "shop", "uid": "uid-1"}}
PRIORITIZE = encode({"Pod": POD, "Nodes": None, "NodeNames": NODES})
VERB_BUDGET_SECONDS = 0.2


@pytest.fixture
def full_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    server = PrivateRedis(tmp_path, "--maxmemory", "1mb", "--maxmemory-policy", "noeviction").start()
    yield server
    server.kill()


def fill(client: redis.Redis) -> str:
    """Write until Redis refuses; returns its refusal."""
    for index in range(10_000):
        try:
            client.set(f"filler:{index}", b"x" * 10_000)
        except redis.ResponseError as exc:
            return str(exc)
    raise AssertionError("redis never refused a write")


def test_verbs_answer_from_redis_while_it_refuses_writes_and_the_refresh_records_why(
    settings, full_redis: PrivateRedis, prometheus_url: str
) -> None:
    settings.REDIS_URL = full_redis.url
    settings.SCHEDLENS_REDIS_PREFIX = PREFIX
    profiles = load_profiles(
        f"profiles:\n- name: default\n  pluginConfig:\n"
        f"  - {{name: NetworkTraffic, args: {{address: {prometheus_url!r}, deviceName: eth0}}}}\n"
    )
    query = TrafficQuery(address=prometheus_url, device_name="eth0")
    client = full_redis.client(socket_timeout=0.05, socket_connect_timeout=0.05)
    view = RedisTrafficView(client, Keys(PREFIX), refresh_seconds=15.0, herd_horizon_seconds=60.0)
    extender = Extender(profiles, cluster=StaticCluster(), traffic=view, binder=SimulatedBinder(), inputs=view)

    assert traffic_refresh(query=query).status == RefreshStatus.OK
    refusal = fill(full_redis.client())
    assert "maxmemory" in refusal

    started = time.perf_counter()
    scored = extender.prioritize("default", PRIORITIZE)
    assert time.perf_counter() - started < VERB_BUDGET_SECONDS
    (traffic,) = scored.event.prioritize.plugins
    assert traffic.raw[0] == pytest.approx(NODE_A_ETH0_RATE * 300), "reads still work: the snapshot is used"
    assert traffic.note == ""

    bind = encode({"PodName": "web-1", "PodNamespace": "shop", "PodUID": "uid-1", "Node": "node-a"})
    started = time.perf_counter()
    bound = extender.bind("default", bind)
    assert time.perf_counter() - started < VERB_BUDGET_SECONDS
    assert bound.status == 200
    assert bound.event.error == "", "the pod is bound; only the shared herd hint could not be written"
    assert "maxmemory" in view.last_error
    (traffic,) = extender.prioritize("default", PRIORITIZE).event.prioritize.plugins
    assert traffic.note.startswith(REDIS_UNAVAILABLE), "the record says Redis could not be used"
    assert traffic.raw[0] == pytest.approx(NODE_A_ETH0_RATE * 300)
    assert traffic.herd_bytes[0] > 0, "this process's own bind still counts"

    refresh = traffic_refresh(query=query)
    assert refresh is not None
    assert refresh.status == RefreshStatus.ERROR
    assert "maxmemory" in refresh.error
    assert TrafficRefresh.objects.filter(status=RefreshStatus.ERROR).count() == 1
