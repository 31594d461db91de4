"""``GET /metrics``: verb latency per verb and profile, and traffic and spool state read at scrape time."""

from __future__ import annotations

import http.client
import urllib.request
import uuid

import msgspec
import pytest
from prometheus_client.parser import text_string_to_metric_families

from dashboard import runtime as runtime_module
from dashboard.tasks import prefetch_traffic
from dashboard.traffic.models import TrafficRefresh
from dashboard.traffic.snapshots import query_key, query_to_dict
from scheduler_core.traffic import TrafficQuery
from tests.support.inputs import traffic_store
from tests.support.live_server import LiveServer
from tests.support.processes import wait_for

JSON = "application/json"
POD = {"metadata": {"name": "web-1", "namespace": "shop", "uid": str(uuid.uuid4())}, "spec": {"containers": []}}
BODY = msgspec.json.encode({"Pod": POD, "Nodes": None, "NodeNames": ["node-1", "node-2"]})


def sample(text: str, name: str, **labels: str) -> float | None:
    for family in text_string_to_metric_families(text):
        for one in family.samples:
            if one.name == name and all(one.labels.get(k) == v for k, v in labels.items()):
                return one.value
    return None


def scrape(client) -> str:
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    return response.content.decode()


def configure(settings, tmp_path, backend: str) -> None:
    settings.SCHEDLENS_SPOOL_DIR = tmp_path / "spool"
    settings.SCHEDLENS_INGEST_IN_PROCESS = False
    settings.SCHEDLENS_BIND_MODE = "simulated"
    settings.SCHEDLENS_CONFIG = ""
    settings.SCHEDLENS_CLUSTER_FILE = ""
    settings.SCHEDLENS_TRAFFIC_BACKEND = backend


@pytest.fixture
def inprocess_runtime(settings, tmp_path, monkeypatch):
    configure(settings, tmp_path, "inprocess")
    runtime = runtime_module.Runtime()
    query = next(iter(runtime.profiles["default"].traffic_queries()))
    runtime.traffic.put(traffic_store({"node-1": 1.0e6}, age=30.0, query=query).latest(query))
    monkeypatch.setattr(runtime_module, "_runtime", runtime)
    yield runtime
    runtime.spool.close()


def test_verb_latency_is_counted_per_verb_and_profile_and_unknown_profiles_share_one_label(
    client, inprocess_runtime, settings
) -> None:
    settings.SCHEDLENS_SYNTHETIC_TRAFFIC = True  # the demo's source: its snapshots are labelled so
    before = scrape(client)
    base = sample(before, "schedlens_verb_duration_seconds_count", verb="prioritize", profile="default") or 0.0

    client.post("/extender/default/prioritize", data=BODY, content_type=JSON)
    client.post("/extender/default/filter", data=BODY, content_type=JSON)
    client.post("/extender/no-such-profile/filter", data=BODY, content_type=JSON)
    text = scrape(client)

    assert sample(text, "schedlens_verb_duration_seconds_count", verb="prioritize", profile="default") == base + 1
    assert sample(text, "schedlens_verb_duration_seconds_bucket", verb="filter", profile="default", le="+Inf")
    assert sample(text, "schedlens_verb_responses_total", verb="filter", profile="unknown", status="404")
    assert "no-such-profile" not in text, "a caller-chosen path must not become a label value"
    assert sample(text, "schedlens_spool_depth") == 3.0
    age = sample(text, "schedlens_traffic_snapshot_age_seconds", source="synthetic", device="eth0")
    assert age == pytest.approx(30.0, abs=5.0)
    assert sample(text, "schedlens_traffic_snapshot_nodes", source="synthetic") == 1.0


def test_each_served_profile_reports_its_version_so_a_rollout_is_visible(client, inprocess_runtime) -> None:
    text = scrape(client)

    for name, profile in inprocess_runtime.profiles.items():
        assert sample(text, "schedlens_profile_version_info", profile=name, version=profile.version()) == 1.0
    versions = [line for line in text.splitlines() if line.startswith("schedlens_profile_version_info{")]
    assert len(versions) == len(inprocess_runtime.profiles), "one version per profile this replica serves"


@pytest.mark.prometheus
@pytest.mark.django_db(transaction=True)
def test_in_redis_mode_the_workers_refresh_duration_errors_and_snapshot_state_are_exposed(
    celery_worker, client, settings, tmp_path, monkeypatch, redis_prefix, prometheus_url
) -> None:
    configure(settings, tmp_path, "redis")
    settings.PROMETHEUS_URL = prometheus_url
    runtime = runtime_module.Runtime()
    monkeypatch.setattr(runtime_module, "_runtime", runtime)
    query = TrafficQuery()
    prefetch_traffic.delay(query_to_dict(query))
    wait_for(lambda: TrafficRefresh.objects.exists(), what="the refresh")

    text = scrape(client)

    key = query_key(query)
    assert sample(text, "schedlens_traffic_refresh_duration_seconds_count", query=key, source=prometheus_url) == 1.0
    assert sample(text, "schedlens_traffic_refresh_duration_seconds_sum", query=key) > 0
    assert sample(text, "schedlens_traffic_refresh_errors_total", query=key) == 0.0
    assert sample(text, "schedlens_traffic_snapshot_age_seconds", query=key) < 60
    assert sample(text, "schedlens_traffic_snapshot_nodes", query=key) == 2.0
    assert sample(text, "schedlens_traffic_unmatched_series", query=key) == 1.0
    assert sample(text, "schedlens_traffic_refresh_failing", query=key) == 0.0
    assert sample(text, "schedlens_redis_up") == 1.0


def test_under_gunicorn_metrics_add_up_every_worker_process(tmp_path, settings) -> None:
    (tmp_path / "metrics").mkdir()
    server = LiveServer(
        {
            "SCHEDLENS_SPOOL_DIR": str(tmp_path / "spool"),
            "SCHEDLENS_INGEST_IN_PROCESS": "false",
            "SCHEDLENS_BIND_MODE": "simulated",
            "SCHEDLENS_CONFIG": "",
            "SCHEDLENS_CLUSTER_FILE": "",
            "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "metrics"),
        },
        workers=2,
    )
    answered_by: set[str] = set()
    calls = 0
    try:
        # A fresh connection per call lets either worker accept it; stop once both have answered.
        while len(answered_by) < 2:
            assert calls < 500, "only one gunicorn worker ever answered"
            connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
            connection.request("POST", "/extender/default/filter", body=BODY, headers={"Content-Type": JSON})
            response = connection.getresponse()
            assert response.status == 200
            response.read()
            connection.close()
            calls += 1
            answered_by.update(path.name for path in (tmp_path / "metrics").glob("histogram_*.db"))
        with urllib.request.urlopen(f"{server.url}/metrics", timeout=5) as response:
            text = response.read().decode()
    finally:
        server.stop()

    assert sample(text, "schedlens_verb_duration_seconds_count", verb="filter", profile="default") == calls


def test_without_prometheus_outside_the_demo_the_traffic_source_is_labelled_none(
    client, inprocess_runtime, settings
) -> None:
    settings.SCHEDLENS_SYNTHETIC_TRAFFIC = False
    text = scrape(client)
    assert sample(text, "schedlens_traffic_snapshot_age_seconds", source="none", device="eth0") is not None
    assert sample(text, "schedlens_traffic_snapshot_age_seconds", source="synthetic", device="eth0") is None
