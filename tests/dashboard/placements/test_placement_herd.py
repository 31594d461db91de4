"""Binds kube-scheduler makes itself raise the herd estimate the next prioritize sees, once per pod.

Against the Kubernetes-shaped fake API through the real client: in redis mode through ``watch_placements``' own
wiring (the placement watcher, its pump and the herd feed) into the bind log every replica reads; in inprocess mode
through the web process's runtime, whose own watch of the bound pods feeds the verbs' in-memory log.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec
import pytest
import redis

from dashboard import runtime as runtime_module
from dashboard.placements.herd import HerdFeed, watcher_sink
from dashboard.placements.pump import PlacementPump
from dashboard.traffic.clients import keys, worker_client
from dashboard.traffic.snapshots import SnapshotStore
from dashboard.traffic.view import build_inputs
from scheduler_core.extender.protocol.cluster import NodeInfo, StaticCluster
from scheduler_core.extender.scoring.herd import InMemoryBindLog
from scheduler_core.extender.scoring.profiles import load_profiles
from scheduler_core.extender.verbs import Extender
from scheduler_core.kube.api import KubernetesBinder
from scheduler_core.kube.placement_watch import PlacementWatcher
from scheduler_core.kube.watch import Backoff
from scheduler_core.traffic import TrafficSnapshot
from scheduler_core.traffic.store import TrafficStore
from tests.support.fake_kube_api import FakeKubeAPI, api_client_for, write_kubeconfig

OURS = "schedlens-scheduler"
NODES = ["node-1", "node-2", "node-3", "node-4"]
TRAFFIC = {"node-1": 1.0e6, "node-2": 2.0e6, "node-3": 3.0e6, "node-4": 4.0e6}
WAIT = 10.0


def wait_until(condition: Callable[[], object], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)  # polled against the deadline above


def pod_json(name: str, uid: str) -> dict[str, object]:
    return {
        "metadata": {"name": name, "namespace": "shop", "uid": uid, "resourceVersion": "1"},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.25.4"}], "schedulerName": OURS},
    }


def herd_binds(extender: Extender, name: str) -> dict[str, int]:
    """A prioritize of a new pod over every node, as kube-scheduler sends it: the binds its estimate counts, by node."""
    body = msgspec.json.encode({"Pod": pod_json(name, f"uid-{name}"), "Nodes": None, "NodeNames": NODES})
    result = extender.prioritize("default", body)
    assert result.status == 200
    record = result.event.prioritize
    assert record is not None
    [traffic] = [p for p in record.plugins if p.name == "NetworkTraffic"]
    counts = traffic.herd_binds or [0] * len(record.nodes)
    return {node: count for node, count in zip(record.nodes, counts, strict=True) if count}


def bind_verb(extender: Extender, name: str, node: str) -> None:
    """kube-scheduler with a bindVerb: schedlens binds the pod through the API server."""
    binding = {"PodName": name, "PodNamespace": "shop", "PodUID": f"uid-{name}", "Node": node}
    result = extender.bind("default", msgspec.json.encode(binding))
    assert msgspec.json.decode(result.body)["Error"] == ""


@pytest.fixture
def api() -> Iterator[FakeKubeAPI]:
    with FakeKubeAPI() as server:
        for node in NODES:
            server.put_node(node)
        yield server


@pytest.fixture
def redis_mode(settings) -> Iterator[str]:
    prefix = f"schedlens-test:{uuid.uuid4().hex[:12]}:"
    settings.SCHEDLENS_TRAFFIC_BACKEND = "redis"
    settings.SCHEDLENS_REDIS_PREFIX = prefix
    settings.SCHEDLENS_CONFIG = ""
    yield prefix
    client = redis.Redis.from_url(settings.REDIS_URL)
    found = list(client.scan_iter(match=f"{prefix}*"))
    if found:
        client.delete(*found)


def test_redis_mode_the_watcher_counts_kube_schedulers_binds_once_and_schedlens_binds_not_twice(
    api: FakeKubeAPI, redis_mode: str
) -> None:
    profiles = load_profiles(None)
    [query] = profiles["default"].traffic_queries()
    SnapshotStore(worker_client(), keys()).save(TrafficSnapshot(query, TRAFFIC, time.time(), "test"))
    cluster = StaticCluster([NodeInfo(n) for n in NODES])
    extender = Extender(profiles, cluster=cluster, traffic=TrafficStore(), binder=KubernetesBinder(api_client_for(api)))
    extender.inputs = build_inputs(profiles, local_traffic=TrafficStore)  # the verbs' RedisTrafficView

    # watch_placements, as its command wires it
    feed = HerdFeed.from_settings()
    assert feed is not None
    pump = PlacementPump()
    backoff = lambda: Backoff(initial=0.01, maximum=0.05)  # noqa: E731
    sink = watcher_sink(pump, feed.start())
    watcher = PlacementWatcher.from_api_client(api_client_for(api), scheduler_names=[OURS], sink=sink, backoff=backoff)
    again = PlacementWatcher.from_api_client(api_client_for(api), scheduler_names=[OURS], sink=sink, backoff=backoff)
    try:
        watcher.start()
        assert watcher.wait_synced(WAIT)
        assert herd_binds(extender, "first") == {}

        api.add_pod("web-a", "shop", uid="uid-web-a", scheduler_name=OURS)
        api.set_pod_node("web-a", "node-1", "shop")  # kube-scheduler's default binder: no bind verb
        wait_until(lambda: feed.recorded >= 1, "the watcher to append web-a's bind")
        assert herd_binds(extender, "second") == {"node-1": 1}

        again.start()  # a second watcher (a restart, a rollout) lists web-a bound again: still one bind
        assert again.wait_synced(WAIT)
        wait_until(lambda: feed.recorded >= 2, "the second watcher to append web-a's bind")
        assert herd_binds(extender, "third") == {"node-1": 1}

        api.add_pod("web-b", "shop", uid="uid-web-b", scheduler_name=OURS)
        bind_verb(extender, "web-b", "node-2")  # the verb counts it; both watchers see it bound too
        wait_until(lambda: feed.recorded >= 4, "the watchers to append web-b's bind")
        assert feed.join(WAIT)
        assert herd_binds(extender, "fourth") == {"node-1": 1, "node-2": 1}
    finally:
        watcher.stop()
        again.stop()
        feed.stop()


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every pod recorded into an in-process bind log, by whoever recorded it."""
    pods: list[str] = []
    original = InMemoryBindLog.record_bind

    def record_bind(
        self: InMemoryBindLog, *, node: str, pod: str, at: float, bytes: float | None = None, name: str = ""
    ) -> None:
        pods.append(pod)
        original(self, node=node, pod=pod, at=at, bytes=bytes, name=name)

    monkeypatch.setattr(InMemoryBindLog, "record_bind", record_bind)
    return pods


@pytest.fixture
def web_runtime(
    api: FakeKubeAPI, settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[runtime_module.Runtime]:
    """A web process's runtime in inprocess mode for the fake cluster (``make serve``), its threads left unstarted."""
    monkeypatch.setenv("KUBECONFIG", str(write_kubeconfig(api, tmp_path / "kubeconfig")))
    settings.SCHEDLENS_TRAFFIC_BACKEND = "inprocess"
    settings.SCHEDLENS_CLUSTER_SOURCE = "kubernetes"
    settings.SCHEDLENS_CLUSTER_FILE = ""
    settings.SCHEDLENS_BIND_MODE = "kubernetes"
    settings.SCHEDLENS_SPOOL_DIR = tmp_path / "spool"
    settings.SCHEDLENS_CONFIG = ""
    runtime = runtime_module.Runtime()
    try:
        yield runtime
    finally:
        if runtime.bind_watch is not None:
            runtime.bind_watch.stop()
        runtime.cluster.stop()  # type: ignore[attr-defined]


def test_inprocess_mode_the_web_process_counts_kube_schedulers_binds_once_and_its_own_not_twice(
    api: FakeKubeAPI, counted: list[str], web_runtime: runtime_module.Runtime
) -> None:
    runtime = web_runtime
    for query in runtime.profiles["default"].traffic_queries():
        runtime.traffic.put(TrafficSnapshot(query, TRAFFIC, time.time(), "test"))
    assert runtime.cluster.wait_synced(WAIT)  # type: ignore[attr-defined]
    assert runtime.bind_watch is not None, "a web process in inprocess mode watches the bound pods itself"
    runtime.bind_watch.start()
    assert runtime.bind_watch.wait_synced(WAIT)
    assert herd_binds(runtime.extender, "first") == {}

    api.add_pod("web-a", "shop", uid="uid-web-a", scheduler_name=OURS)
    api.set_pod_node("web-a", "node-1", "shop")  # kube-scheduler's default binder: no bind verb
    wait_until(lambda: "uid-web-a" in counted, "the web process to see web-a bound")
    assert herd_binds(runtime.extender, "second") == {"node-1": 1}

    api.expire("pods")  # the watch relists and finds web-a bound again
    wait_until(lambda: runtime.bind_watch.status()[0]["lists"] >= 2, "the relist")  # type: ignore[union-attr]
    api.add_pod("web-b", "shop", uid="uid-web-b", scheduler_name=OURS)
    bind_verb(runtime.extender, "web-b", "node-2")
    wait_until(lambda: counted.count("uid-web-b") == 2, "the verb's count and the watch's sighting of web-b")
    assert herd_binds(runtime.extender, "third") == {"node-1": 1, "node-2": 1}
