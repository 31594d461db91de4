"""Herd reconciliation against a real Prometheus (issue 32, item 3): once a bound pod's own traffic shows in the
node's measurement, the bind counts only ``max(0, assumed − observed)``; a pod without series decays as before.

Three pods of ``shop`` are bound, one per node, each assumed at ``ASSUMED`` bytes over the 5-minute window:
``web-early`` started sending a minute before the anchor (its window holds part of what was assumed), ``web-late``
ten minutes before (its window holds more than assumed), ``web-none`` has no series (host network, not scraped).
The refresh (the Celery task's service, Redis mode) reads them from the bind log and Prometheus; the verbs read them
from the snapshot in Redis, as they read the nodes' bytes.
"""

from __future__ import annotations

import io
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import msgspec
import pytest
from django.core.management import call_command

from dashboard.ingest.cycles import cycles_ingest_events
from dashboard.models import SchedulingCycle
from dashboard.selectors.cycles import cycle_explanation
from dashboard.traffic.clients import keys, verb_client
from dashboard.traffic.services import traffic_refresh
from dashboard.traffic.sources import recent_pods_reader
from dashboard.traffic.view import RedisTrafficView
from scheduler_core.explanation.explain import explain
from scheduler_core.explanation.recompute import recompute_explanation
from scheduler_core.extender.protocol.binding import SimulatedBinder
from scheduler_core.extender.protocol.cluster import StaticCluster
from scheduler_core.extender.protocol.wire import encode
from scheduler_core.extender.record.structs import PluginScores, VerbEvent
from scheduler_core.extender.scoring.herd import InMemoryBindLog
from scheduler_core.extender.scoring.profiles import load_profiles
from scheduler_core.extender.verbs import Extender
from scheduler_core.traffic import TrafficQuery, TrafficSourceError
from scheduler_core.traffic.pods import PodReads
from scheduler_core.traffic.prometheus import PrometheusTrafficSource
from scheduler_core.traffic.store import TrafficStore
from tests.support.profile_versions import store_served_versions
from tests.support.prometheus_data import FUTURE_SECONDS, STEP_SECONDS, counter_samples
from tests.support.prometheus_server import PrometheusServer, Series, start_prometheus

pytestmark = [pytest.mark.prometheus, pytest.mark.django_db]

NODES = ["node-1", "node-2", "node-3"]
NODE_RATE = 50_000.0
POD_RATE = 1_000_000.0
"""Bytes per second each pod with series receives (and as much again sent)."""
ASSUMED = 200_000_000
DECAY = 300
PROFILES = f"""
profiles:
- name: default
  plugins: {{filter: {{disabled: [{{name: "*"}}]}}}}
  pluginConfig:
  - {{name: NetworkTraffic, args: {{assumedBytesPerPod: {ASSUMED}, herdDecaySeconds: {DECAY}, reconcileHerd: true}}}}
"""
PODS = {"web-early": "node-1", "web-late": "node-2", "web-none": "node-3"}


def pod_samples(anchor: int, started: int) -> list[tuple[float, float]]:
    """A pod's counter from 0 at ``started`` seconds before the anchor, ``POD_RATE`` bytes per second."""
    first = anchor - started
    return [(float(ts), POD_RATE * (ts - first)) for ts in range(first, anchor + FUTURE_SECONDS + 1, STEP_SECONDS)]


def series(anchor: int) -> list[Series]:
    found = [
        Series(
            "node_network_receive_bytes_total",
            {"device": "eth0", "instance": f"10.3.0.{i}:9100", "kubernetes_node": node},
            counter_samples(anchor, NODE_RATE),
        )
        for i, node in enumerate(NODES, start=1)
    ]
    for pod, started in (("web-early", 60), ("web-late", 600)):
        labels = {"namespace": "shop", "pod": pod, "interface": "eth0"}
        counter = pod_samples(anchor, started)
        found += [
            Series("container_network_receive_bytes_total", {**labels, "container": "POD"}, counter),
            Series("container_network_transmit_bytes_total", {**labels, "container": ""}, counter),
        ]
    return found


@pytest.fixture(scope="module")
def pods_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    server = start_prometheus(series(int(time.time())), tmp_path_factory.mktemp("reconcile-prometheus"))
    yield server
    server.stop()


@pytest.fixture
def extender(settings, tmp_path: Path, redis_prefix: str, pods_prometheus: PrometheusServer) -> Extender:
    config = tmp_path / "profiles.yaml"
    config.write_text(PROFILES)
    settings.SCHEDLENS_CONFIG = str(config)
    settings.PROMETHEUS_URL = pods_prometheus.url
    settings.SCHEDLENS_TRAFFIC_BACKEND = "redis"
    settings.SCHEDLENS_PROMETHEUS_RETRIES = 0
    inputs = RedisTrafficView(verb_client(timeout=2.0), keys(), refresh_seconds=15.0, herd_horizon_seconds=DECAY)
    return Extender(
        load_profiles(PROFILES),
        cluster=StaticCluster(),
        traffic=TrafficStore(),  # unused: ``inputs`` replaces it
        binder=SimulatedBinder(),
        inputs=inputs,
    )


def bind(ext: Extender, pod: str, node: str) -> None:
    body = encode({"PodName": pod, "PodNamespace": "shop", "PodUID": f"uid-{pod}", "Node": node})
    assert ext.bind("default", body).status == 200


def traffic_of(ext: Extender) -> tuple[PluginScores, VerbEvent]:
    pod = {"metadata": {"name": "web-next", "namespace": "shop", "uid": "uid-next"}, "spec": {}}
    event = ext.prioritize("default", encode({"Pod": pod, "Nodes": None, "NodeNames": NODES})).event
    record = event.prioritize
    assert record is not None
    assert record.nodes == NODES
    (traffic,) = record.plugins
    return traffic, event


def served_from_database(cycle: SchedulingCycle) -> dict[str, Any]:
    return msgspec.json.decode(msgspec.json.encode(cycle_explanation(cycle=cycle)))


def served(record: Any) -> dict[str, Any]:
    """The explanation as the audit API serves it (what ``verify_explanations`` recomputes)."""
    return msgspec.json.decode(msgspec.json.encode(explain(filter_record=None, prioritize_record=record)))


def test_a_bound_pods_assumed_bytes_shrink_as_its_traffic_appears_and_a_pod_without_series_decays(extender) -> None:
    query = TrafficQuery()
    assert traffic_refresh(query=query) is not None  # before the binds: no pod is asked for
    for pod, node in PODS.items():
        bind(extender, pod, node)

    before, _ = traffic_of(extender)
    assert before.herd_reconciled == [], "the snapshot predates the binds: none of their traffic is in it"
    assert before.herd_binds == [1, 1, 1]
    assert all(0 < herd <= ASSUMED for herd in before.herd_bytes)

    assert traffic_refresh(query=query) is not None  # the pods of the recent binds are read with the nodes
    after, event = traffic_of(extender)
    counted = {bind.pod: bind for bind in after.herd_reconciled}
    assert sorted(counted) == ["shop/web-early", "shop/web-late"], "web-none has no series: it is not reconciled"

    early, late = counted["shop/web-early"], counted["shop/web-late"]
    assert (NODES[early.node], NODES[late.node]) == ("node-1", "node-2")
    assert early.assumed == late.assumed == ASSUMED
    assert 0 < early.observed < ASSUMED, "a minute of its traffic is in the window"
    assert early.counted == ASSUMED - early.observed
    assert after.herd_bytes[0] == round(early.counted) < before.herd_bytes[0]
    assert late.observed >= ASSUMED, "the measurement holds all that was assumed"
    assert late.counted == 0.0
    assert after.herd_bytes[1] == 0.0
    # No series: the linear decay, as before reconciliation.
    assert 0 < after.herd_bytes[2] <= before.herd_bytes[2] <= ASSUMED

    explanation = served(event.prioritize)
    assert recompute_explanation(explanation) == []
    node_1 = next(n for n in explanation["nodes"] if n["node"] == "node-1")
    (figures,) = [t["traffic"] for t in node_1["terms"]]
    shown = [
        {
            "pod": "shop/web-early",
            "assumed_bytes": ASSUMED,
            "observed_bytes": early.observed,
            "counted_bytes": early.counted,
        }
    ]
    assert figures["herd_reconciled"] == shown
    figures["herd_reconciled"][0]["counted_bytes"] = ASSUMED  # what the decay alone would have counted
    assert [m.what for m in recompute_explanation(explanation)] == [
        "herd bytes counted for shop/web-early",
        "herd bytes (the reconciled binds' sum)",
    ]

    # Spooled, ingested and stored as production does: verify_explanations recomputes it from the database.
    store_served_versions(extender.profiles, PROFILES)
    cycles_ingest_events(events=[event])
    stored = served_from_database(SchedulingCycle.objects.get(calls__event_id=event.event_id))
    (stored_node_1,) = [n for n in stored["nodes"] if n["node"] == "node-1"]
    assert stored_node_1["terms"][0]["traffic"]["herd_reconciled"] == shown
    out = io.StringIO()
    call_command("verify_explanations", stdout=out, stderr=io.StringIO())
    assert out.getvalue() == "ok: 1 cycles recomputed (1 with a prioritize call): 1 add up\n"


def test_the_in_process_refresh_reads_the_pods_of_recent_binds_with_the_nodes(settings, pods_prometheus) -> None:
    """``make run``/``make serve`` without Redis: the process's own refresher reads them (``dashboard.runtime``)."""
    settings.PROMETHEUS_URL = pods_prometheus.url
    settings.SCHEDLENS_PROMETHEUS_RETRIES = 0
    reader = recent_pods_reader()
    assert reader is not None
    query = TrafficQuery()
    store = TrafficStore()
    binds = InMemoryBindLog(DECAY)
    for pod, node in PODS.items():
        binds.record_bind(node=node, pod=f"uid-{pod}", at=time.time(), name=f"shop/{pod}")
    pods = PodReads(reader, lambda: binds.recent_binds(time.time()).pods, {query})
    store.refresh(PrometheusTrafficSource(pods_prometheus.url, retries=0), [query], pods)
    snapshot = store.latest(query)
    assert snapshot is not None
    assert sorted(snapshot.bytes_by_node) == NODES
    assert sorted(snapshot.bytes_by_pod) == ["shop/web-early", "shop/web-late"], "web-none has no series"


def test_a_failed_pod_read_leaves_the_nodes_snapshot_without_pods(settings, pods_prometheus) -> None:
    def unreachable(query: TrafficQuery, pods: Sequence[str]) -> dict[str, float]:
        raise TrafficSourceError("connection refused")

    query = TrafficQuery()
    store = TrafficStore()
    pods = PodReads(unreachable, lambda: ("shop/web-early",), {query})
    store.refresh(PrometheusTrafficSource(pods_prometheus.url, retries=0), [query], pods)
    snapshot = store.latest(query)
    assert snapshot is not None
    assert sorted(snapshot.bytes_by_node) == NODES, "the nodes' refresh goes on: every bind then decays"
    assert snapshot.bytes_by_pod == {}
