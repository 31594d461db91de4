"""A burst of pods through the simulator: spread over the quiet nodes with the herd mitigation, piled without.

Two schedlens replicas (two gunicorn servers, redis mode) answer in turn, like pods behind a Service: a pod's
filter, prioritize and bind reach different replicas, so the bind counts that spread the burst must be shared
through Redis, not kept in one process.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dashboard.spool import Spool
from dashboard.tasks import prefetch_traffic
from dashboard.traffic.services import herd_record_bind
from dashboard.traffic.snapshots import Keys, SnapshotStore, query_to_dict
from dashboard.traffic.view import RedisTrafficView
from scheduler_core.cli.simulator import ExtenderClient, KubeSchedulerSimulator, SimulationStats, make_cluster
from scheduler_core.extender.record.spool_codec import decode_event
from scheduler_core.traffic import TrafficQuery
from tests.support.live_server import LiveServer
from tests.support.processes import wait_for
from tests.support.prometheus_data import HERD_RATES, QUIET
from tests.support.prometheus_server import PrometheusServer

pytestmark = [pytest.mark.prometheus, pytest.mark.django_db(transaction=True)]

PODS = 24
ASSUMED = 30_000_000
"""Bytes per pod over the 5-minute window: 100 kB/s, the gap between the quietest node and the next ones."""
PROFILES = f"""
profiles:
- name: herd-on
  plugins: {{filter: {{disabled: [{{name: "*"}}]}}}}
  pluginConfig:
  - {{name: NetworkTraffic, args: {{address: "ADDRESS", assumedBytesPerPod: {ASSUMED}, herdDecaySeconds: 300}}}}
- name: herd-off
  plugins: {{filter: {{disabled: [{{name: "*"}}]}}}}
  pluginConfig:
  - {{name: NetworkTraffic, args: {{address: "ADDRESS", assumedBytesPerPod: 0}}}}
"""


class RoundRobinClient:
    """kube-scheduler calling a Service in front of several replicas: each call may reach another one."""

    def __init__(self, urls: list[str]) -> None:
        self.clients = [ExtenderClient(url) for url in urls]
        self.calls = 0

    def call(self, verb: str, body: bytes) -> Any:
        client = self.clients[self.calls % len(self.clients)]
        self.calls += 1
        return client.call(verb, body)

    def close(self) -> None:
        for client in self.clients:
            client.close()


def simulate(servers: list[LiveServer], profile: str, seed: int) -> SimulationStats:
    client = RoundRobinClient([f"{server.url}/extender/{profile}" for server in servers])
    cluster = make_cluster(len(HERD_RATES))
    simulator = KubeSchedulerSimulator(client, cluster, node_cache_capable=True, seed=seed)  # type: ignore[arg-type]
    try:
        return simulator.run(PODS)
    finally:
        client.close()


def test_a_burst_spreads_over_the_quiet_nodes_with_the_herd_mitigation_and_piles_up_without_it(
    celery_worker,
    herd_prometheus: PrometheusServer,
    snapshot_store: SnapshotStore,
    redis_prefix: str,
    tmp_path: Path,
    settings,
) -> None:
    query = TrafficQuery(address=herd_prometheus.url)
    prefetch_traffic.delay(query_to_dict(query))
    snapshot = wait_for(lambda: snapshot_store.load(query), what="the herd cluster's snapshot")
    assert dict(snapshot.bytes_by_node) == pytest.approx({n: r * 300 for n, r in HERD_RATES.items()}, rel=1e-9)
    config = tmp_path / "profiles.yaml"
    config.write_text(PROFILES.replace("ADDRESS", herd_prometheus.url))
    env = {
        "SCHEDLENS_TRAFFIC_BACKEND": "redis",
        "REDIS_URL": settings.REDIS_URL,
        "SCHEDLENS_REDIS_PREFIX": redis_prefix,
        "SCHEDLENS_CONFIG": str(config),
        "SCHEDLENS_SPOOL_DIR": str(tmp_path / "spool"),
        "SCHEDLENS_INGEST_IN_PROCESS": "false",
        "SCHEDLENS_BIND_MODE": "simulated",
        "SCHEDLENS_CLUSTER_FILE": "",
    }
    servers = [LiveServer(env)]
    try:
        servers.append(LiveServer(env))
        with_herd = simulate(servers, "herd-on", seed=5)
        without_herd = simulate(servers, "herd-off", seed=6)  # other pods: binds are counted once per pod
    finally:
        for server in servers:
            server.stop()

    assert without_herd.placements == {"node-001": PODS}, "every pod sees the same snapshot: all on the quietest"
    assert with_herd.bound == PODS
    assert set(with_herd.placements) <= set(QUIET), "the busy nodes stay out of it"
    assert len(with_herd.placements) >= 3, with_herd.placements
    assert max(with_herd.placements.values()) <= PODS // 2, with_herd.placements

    binds = snapshot_store.client.zcard(Keys(redis_prefix).binds)
    assert binds == 2 * PODS, "every bind of both runs, from both replicas, is in the shared log"

    events = [decode_event(data) for _, data in Spool(tmp_path / "spool").read_batch(10_000)]
    herd_on = [e.prioritize.plugins[0] for e in events if e.verb == "prioritize" and e.profile == "herd-on"]
    assert herd_on[0].herd_bytes == [], "nothing bound yet when the first pod was scored"
    assert any(p.herd_bytes and max(p.herd_bytes) >= ASSUMED * 0.9 for p in herd_on[1:])
    assert len({e.server for e in events if e.verb == "bind"}) == 2, "both replicas bound pods"


def test_a_bind_recorded_by_the_verb_and_again_by_the_placement_watcher_counts_once(
    redis_prefix: str, snapshot_store: SnapshotStore
) -> None:
    view = RedisTrafficView(snapshot_store.client, Keys(redis_prefix), refresh_seconds=15.0, herd_horizon_seconds=15.0)
    view.record_bind(node="node-001", pod="uid-1", at=1000.0)
    herd_record_bind(node="node-001", pod="uid-1", at=1000.5)
    herd_record_bind(node="node-002", pod="uid-2", at=1001.0)

    assert view.binds.recent_binds(1002.0).by_node == {"node-001": (1000.0,), "node-002": (1001.0,)}
