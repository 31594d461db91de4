"""Dashboard view-test fixtures: the demo profiles, a recorder of real cycles, a signed-in operator, a refresh."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dashboard.traffic.services import traffic_refresh
from scheduler_core.traffic import TrafficQuery
from tests.support.recording import Recorder, use_demo_profiles


@pytest.fixture
def dashboard_settings(settings, tmp_path: Path):
    use_demo_profiles(settings, tmp_path / "spool")
    return settings


@pytest.fixture
def recorder(dashboard_settings) -> Recorder:
    return Recorder()


@pytest.fixture
def operator(django_user_model):
    return django_user_model.objects.create_user(username="olga", password="correct horse battery staple")


@pytest.fixture
def signed_in(client, operator):
    client.force_login(operator)
    return client


@pytest.fixture
def refreshed_traffic(dashboard_settings, tmp_path):
    """One real prefetch refresh (synthetic source, Redis snapshot, a TrafficRefresh row) for node-1..node-5."""
    cluster = tmp_path / "cluster.json"
    cluster.write_text(json.dumps({"nodes": [{"metadata": {"name": f"node-{i}"}} for i in range(1, 6)]}))
    dashboard_settings.SCHEDLENS_CLUSTER_FILE = str(cluster)
    dashboard_settings.SCHEDLENS_TRAFFIC_BACKEND = "redis"
    dashboard_settings.PROMETHEUS_URL = ""
    dashboard_settings.SCHEDLENS_SYNTHETIC_TRAFFIC = True  # the demo's source
    row = traffic_refresh(query=TrafficQuery())
    assert row is not None
    assert row.bytes_by_node
    return row
