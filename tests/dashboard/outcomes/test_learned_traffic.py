"""Traffic learned per workload from the placement outcomes of a real Prometheus, reaching the verbs through the
table the outcome job publishes (issue 32, item 3): the constant until the workload has its minimum sample count,
the learned figure after, the pod's annotation over both.

Prometheus holds six pods of the Deployment ``shop/api`` (kube-state-metrics: ReplicaSet ``api-6b5c9``), each
receiving 4 kB/s and sending 2 kB/s from 20 minutes before the anchor: 6 kB/s per pod past its first window.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import msgspec
import pytest

from dashboard.outcomes.learned_table import learned_key, read_published
from dashboard.outcomes.services import outcomes_refresh
from dashboard.traffic.clients import worker_client
from scheduler_core.extender.protocol.binding import SimulatedBinder
from scheduler_core.extender.protocol.cluster import StaticCluster
from scheduler_core.extender.scoring.profiles import load_profiles
from scheduler_core.extender.scoring.workload_traffic import MIN_SAMPLES, LearnedTrafficStore
from scheduler_core.extender.verbs import Extender
from tests.dashboard.outcomes.conftest import at
from tests.support.inputs import traffic_store
from tests.support.outcome_data import deployment_series
from tests.support.prometheus_server import PrometheusServer, Series, start_prometheus

pytestmark = [pytest.mark.prometheus]

PODS = [f"api-6b5c9-{i}" for i in range(MIN_SAMPLES + 1)]
RECEIVE, TRANSMIT = 4_000.0, 2_000.0
QUERY_WINDOW = 300
SERVING = """
profiles:
- name: default
  pluginConfig:
  - {name: NetworkTraffic, args: {assumedBytesPerPod: 100000000, learnWorkloadTraffic: true}}
"""


def api_series(anchor: int) -> tuple[Series, ...]:
    return deployment_series(anchor, PODS, receive=RECEIVE, transmit=TRANSMIT)


@pytest.fixture(scope="module")
def anchor() -> int:
    return int(time.time())


@pytest.fixture(scope="module")
def api_prometheus(anchor: int, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    server = start_prometheus(api_series(anchor), tmp_path_factory.mktemp("learned-prometheus"))
    yield server
    server.stop()


@pytest.fixture
def learning_settings(settings, api_prometheus: PrometheusServer) -> None:
    settings.PROMETHEUS_URL = api_prometheus.url
    settings.SCHEDLENS_OUTCOME_WINDOWS_MINUTES = [1, 5, 15]
    settings.SCHEDLENS_OUTCOME_GRACE_SECONDS = 30.0
    settings.SCHEDLENS_PROMETHEUS_RETRIES = 0
    worker_client().delete(learned_key())


def serving_extender(store: LearnedTrafficStore) -> Extender:
    return Extender(
        load_profiles(SERVING),
        cluster=StaticCluster(),
        traffic=traffic_store({"node-1": 1e6, "node-2": 2e6}),
        binder=SimulatedBinder(),
        learned=store,
    )


def new_api_pod(annotations: dict[str, str] | None = None) -> bytes:
    meta: dict[str, object] = {
        "name": "api-6b5c9-new",
        "namespace": "shop",
        "uid": "uid-api-new",
        "ownerReferences": [{"kind": "ReplicaSet", "name": "api-6b5c9", "controller": True}],
        "annotations": annotations or {},
    }
    return msgspec.json.encode(
        {"Pod": {"metadata": meta, "spec": {}}, "Nodes": None, "NodeNames": ["node-1", "node-2"]}
    )


def assumed(ext: Extender, body: bytes):  # type: ignore[no-untyped-def]
    record = ext.prioritize("default", body).event.prioritize
    assert record is not None
    (traffic,) = record.plugins
    return traffic.pod_assumed


@pytest.mark.usefixtures("learning_settings")
def test_the_workloads_learned_estimate_replaces_the_constant_after_its_minimum_sample_count(
    db, kube_scheduler, anchor
):
    for minute, name in enumerate(PODS[: MIN_SAMPLES - 1]):
        kube_scheduler.schedule(at=at(anchor - 19 * 60 + minute), name=name, nodes=["node-2", "node-3"])
    assert outcomes_refresh(now=anchor).updated == MIN_SAMPLES - 1

    store = LearnedTrafficStore()  # a serving process's: filled from redis by its follower thread
    ext = serving_extender(store)
    assert read_published(store)
    before = assumed(ext, new_api_pod())
    assert (before.source, before.bytes) == ("constant", 100e6), "one pod short of the minimum"

    kube_scheduler.schedule(at=at(anchor - 18 * 60), name=PODS[MIN_SAMPLES - 1], nodes=["node-2", "node-3"])
    assert outcomes_refresh(now=anchor).updated == 1
    assert read_published(store)
    after = assumed(ext, new_api_pod())
    assert after.source == "learned"
    assert after.pods == MIN_SAMPLES
    assert after.bytes_per_second == pytest.approx(RECEIVE + TRANSMIT)
    assert after.bytes == round(after.bytes_per_second * QUERY_WINDOW)
    assert after.text() == f"learned from {MIN_SAMPLES} pods of deployment shop/api, p90 over the last 7 days"

    override = assumed(ext, new_api_pod({"schedlens.io/assumed-bytes": "5000"}))
    assert (override.source, override.bytes) == ("override", 5000.0), "the pod's annotation wins"
