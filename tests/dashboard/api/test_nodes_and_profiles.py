"""Nodes as counted from the record, and profiles as the extender runs them, with secrets masked."""

from __future__ import annotations

from datetime import timedelta

import pytest

from dashboard.selectors.profiles import redact
from dashboard.services.node_tallies import node_tallies_rebuild
from tests.support.kube_scheduler import NODES, T0

MINUTE = timedelta(minutes=1)


@pytest.fixture
def history(kube_scheduler) -> None:
    kube_scheduler.schedule(at=T0, name="web-1")  # all five: node-5 filtered out, bound to node-2
    kube_scheduler.schedule(at=T0 + MINUTE, name="web-2", nodes=["node-1", "node-3"])  # bound to node-3
    kube_scheduler.schedule(at=T0 + 2 * MINUTE, name="web-3", gpu=True, nodes=["node-2", "node-4"])  # both out
    kube_scheduler.schedule(at=T0 + 3 * MINUTE, name="web-4", nodes=["node-4"], bind=False)


def by_node(api, params: dict | None = None) -> dict[str, dict]:
    response = api.get("/api/v1/nodes/", params or {})
    assert response.status_code == 200, response.content
    return {row["node"]: row for row in response.json()["results"]}


@pytest.mark.django_db
def test_nodes_count_considerations_exclusions_and_placements(api, history):
    nodes = by_node(api)
    assert list(nodes) == sorted(NODES)
    counts = {name: (n["considered"], n["filtered_out"], n["placements"]) for name, n in nodes.items()}
    assert counts == {
        "node-1": (2, 0, 0),
        "node-2": (2, 1, 1),
        "node-3": (2, 0, 1),
        "node-4": (3, 1, 0),
        "node-5": (1, 1, 0),
    }
    assert nodes["node-4"]["last_seen_at"] == (T0 + 3 * MINUTE).isoformat().replace("+00:00", "Z")
    assert nodes["node-2"]["cycles"].endswith("/api/v1/cycles/?node_considered=node-2")


@pytest.mark.django_db
def test_nodes_say_why_they_were_filtered_out_and_how_often_they_were_preferred(
    api, history, django_assert_max_num_queries
):
    with django_assert_max_num_queries(6):  # auth, the page, its count, the page's reasons: not one per node
        nodes = by_node(api)
    assert nodes["node-5"]["reasons"] == [
        {"plugin": "TrafficThreshold", "reason": "receive rate above 125.0 MB/s", "count": 1}
    ]
    assert nodes["node-4"]["reasons"] == [
        {"plugin": "NodeResourceFitByCR", "reason": "node does not enable example.com/gpu", "count": 1}
    ]
    assert nodes["node-1"]["reasons"] == []
    assert {name: n["preferred"] for name, n in nodes.items()} == {
        "node-1": 0,
        "node-2": 1,
        "node-3": 1,
        "node-4": 1,  # web-4's only candidate
        "node-5": 0,
    }
    assert api.get("/api/v1/nodes/node-4/").json()["reasons"] == nodes["node-4"]["reasons"]
    assert set(by_node(api, {"min_preferred": 1})) == {"node-2", "node-3", "node-4"}


@pytest.mark.django_db
def test_node_counts_match_a_full_recount(api, history):
    before = by_node(api)
    assert node_tallies_rebuild() == len(NODES)
    assert by_node(api) == before


@pytest.mark.django_db
def test_nodes_order_by_a_count_with_the_name_breaking_ties(api, history):
    response = api.get("/api/v1/nodes/", {"ordering": "-filtered_out"}).json()
    assert [n["node"] for n in response["results"]] == ["node-2", "node-4", "node-5", "node-1", "node-3"]


@pytest.mark.django_db
def test_nodes_filter_by_name_and_minimum_counts(api, history):
    assert set(by_node(api, {"min_placements": 1})) == {"node-2", "node-3"}
    assert set(by_node(api, {"node": "-5"})) == {"node-5"}
    assert set(by_node(api, {"seen_after": (T0 + 2 * MINUTE).isoformat()})) == {"node-2", "node-4"}


@pytest.mark.django_db
def test_one_node_is_read_by_its_name_even_with_dots(api, kube_scheduler):
    kube_scheduler.schedule(at=T0, name="web-1", nodes=["ip-10-0-0-7.ec2.internal"])
    response = api.get("/api/v1/nodes/ip-10-0-0-7.ec2.internal/")
    assert response.status_code == 200
    assert response.json()["filtered_out"] == 1, "no NodeResources object for it"
    assert api.get("/api/v1/nodes/unknown-node/").status_code == 404


@pytest.mark.django_db
def test_nodes_are_paginated(api, history):
    body = api.get("/api/v1/nodes/", {"page_size": 2}).json()
    assert body["count"] == len(NODES)
    assert [n["node"] for n in body["results"]] == ["node-1", "node-2"]
    assert "page=2" in body["next"]


# --- profiles ---------------------------------------------------------------------------------------

WITH_SECRETS = """
profiles:
- name: default
  plugins:
    score: {enabled: [{name: NetworkTraffic, weight: 2}]}
  pluginConfig:
  - name: NetworkTraffic
    args: {address: "http://scheduler:s3cr3t@prometheus.monitoring:9090/prom?token=abc&step=30", deviceName: ens5}
  - name: TrafficThreshold
    args: {address: "https://prometheus.monitoring:9090", maxBytesPerSecond: 50000000}
"""


@pytest.mark.django_db
def test_profiles_show_the_effective_configuration(api):
    response = api.get("/api/v1/profiles/")
    assert response.status_code == 200
    profiles = {p["name"]: p for p in response.json()}
    assert set(profiles) == {"default", "gpu-aware"}
    gpu = profiles["gpu-aware"]
    assert gpu["filter"] == ["NodeResourceFitByCR"]
    assert gpu["score"] == [{"name": "NodeResourceFitByCR", "weight": 4}, {"name": "NetworkTraffic", "weight": 1}]
    assert gpu["pluginConfig"]["NetworkTraffic"]["timeRangeInMinutes"] == 5, "defaults are shown too"
    assert api.get("/api/v1/profiles/gpu-aware/").json() == gpu
    assert api.get("/api/v1/profiles/nope/").status_code == 404


@pytest.mark.django_db
def test_profiles_mask_credentials_in_prometheus_addresses(api, settings, tmp_path):
    config = tmp_path / "secret.yaml"
    config.write_text(WITH_SECRETS, encoding="utf-8")
    settings.SCHEDLENS_CONFIG = str(config)
    args = api.get("/api/v1/profiles/default/").json()["pluginConfig"]
    assert args["NetworkTraffic"]["address"] == "http://scheduler:***@prometheus.monitoring:9090/prom?token=***&step=30"
    assert args["TrafficThreshold"]["address"] == "https://prometheus.monitoring:9090"
    assert args["NetworkTraffic"]["deviceName"] == "ens5"


@pytest.mark.parametrize(
    ("value", "masked"),
    [
        ({"address": "http://user:pass@host:9090"}, {"address": "http://user:***@host:9090"}),
        ({"address": "http://token@host"}, {"address": "http://***@host"}),
        (
            {"bearerToken": "abc", "password": "", "apiKey": "k"},
            {"bearerToken": "***", "password": "", "apiKey": "***"},
        ),
        ({"urls": ["https://a:b@x", "plain"]}, {"urls": ["https://a:***@x", "plain"]}),
        ({"weight": 3, "nested": {"clientSecret": "s"}}, {"weight": 3, "nested": {"clientSecret": "***"}}),
    ],
)
def test_redaction_masks_secret_looking_values(value, masked):
    assert redact(value) == masked


@pytest.mark.django_db
def test_an_unreadable_profiles_file_is_a_503_not_a_500(api, settings, tmp_path):
    settings.SCHEDLENS_CONFIG = str(tmp_path / "missing.yaml")
    response = api.get("/api/v1/profiles/")
    assert response.status_code == 503
    assert "profiles configuration" in response.json()["error"]
