"""Traffic refresh runs and recorded snapshots, read through the audit API."""

from __future__ import annotations

import json

import pytest
import redis
from django.conf import settings as django_settings

from dashboard.traffic.services import traffic_refresh
from scheduler_core.traffic import TrafficQuery
from tests.support.api_client import token_client


@pytest.fixture
def refreshed(settings, tmp_path, db):
    """Two real prefetch refreshes of the synthetic source (Redis snapshot + TrafficRefresh rows)."""
    redis.Redis.from_url(django_settings.REDIS_URL).flushdb()
    cluster = tmp_path / "cluster.json"
    cluster.write_text(json.dumps({"nodes": [{"metadata": {"name": f"node-{i}"}} for i in range(1, 4)]}))
    settings.SCHEDLENS_CLUSTER_FILE = str(cluster)
    settings.SCHEDLENS_TRAFFIC_BACKEND = "redis"
    settings.PROMETHEUS_URL = ""
    settings.SCHEDLENS_SYNTHETIC_TRAFFIC = True  # the demo's source
    rows = [traffic_refresh(query=TrafficQuery()), traffic_refresh(query=TrafficQuery(device_name="lo"))]
    assert all(row is not None for row in rows)
    return rows


def test_refresh_runs_are_listed_newest_first_without_their_per_node_values(api, refreshed):
    response = api.get("/api/v1/traffic/refreshes/")
    assert response.status_code == 200
    results = response.json()["results"]
    assert [r["id"] for r in results] == [refreshed[1].id, refreshed[0].id]
    assert results[0]["status"] == refreshed[1].status
    assert results[0]["nodes_matched"] == 3
    assert "bytes_by_node" not in results[0]


def test_refresh_runs_filter_by_query_key(api, refreshed):
    response = api.get("/api/v1/traffic/refreshes/", {"query_key": refreshed[0].query_key})
    assert [r["id"] for r in response.json()["results"]] == [refreshed[0].id]


def test_a_snapshot_carries_the_bytes_each_node_received(api, refreshed):
    response = api.get(f"/api/v1/traffic/snapshots/{refreshed[0].id}/")
    assert response.status_code == 200
    assert response.json()["bytes_by_node"] == refreshed[0].bytes_by_node
    assert set(response.json()["bytes_by_node"]) == {"node-1", "node-2", "node-3"}


def test_traffic_endpoints_refuse_anonymous_readers_and_every_write(api, refreshed):
    assert token_client(None).get("/api/v1/traffic/refreshes/").status_code == 401
    assert api.post("/api/v1/traffic/snapshots/", {}).status_code == 405
    assert api.delete(f"/api/v1/traffic/refreshes/{refreshed[0].id}/").status_code == 405
