"""The observability kit's Grafana dashboard, statically: variables, datasources, layout, the metrics it shows.

Its queries are run by a real Prometheus in ``test_observability_scrape.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tests.deploy.observability import DASHBOARD, PANELS, TARGETS, VARIABLES, metric_names

# ----- the dashboard, statically -----


def test_the_dashboard_reads_a_datasource_variable_and_has_a_profile_variable() -> None:
    datasource = VARIABLES["DS_PROMETHEUS"]
    profile = VARIABLES["profile"]

    assert datasource["type"] == "datasource"
    assert datasource["query"] == "prometheus"
    assert profile["type"] == "query"
    assert profile["definition"].startswith("label_values(schedlens_verb_duration_seconds_count")
    assert profile["definition"].endswith(", profile)")
    assert DASHBOARD["id"] is None, "importable: Grafana assigns the id"
    assert DASHBOARD["uid"]
    for found in walk_datasources(DASHBOARD):
        if found.get("type") == "prometheus":
            assert found["uid"] == "${DS_PROMETHEUS}", found
    for panel in PANELS:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}, panel["title"]
        assert panel["targets"], panel["title"]
    verb_panels = [t for _, t in TARGETS if "schedlens_verb_" in t["expr"] or "schedlens_answer_ties" in t["expr"]]
    assert verb_panels
    assert all('profile=~"$profile"' in t["expr"] for t in verb_panels)


def walk_datasources(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        if isinstance(node.get("datasource"), dict):
            yield node["datasource"]
        for child in node.values():
            yield from walk_datasources(child)
    elif isinstance(node, list):
        for child in node:
            yield from walk_datasources(child)


def test_the_dashboard_panels_are_laid_out_and_numbered_once() -> None:
    ids = [p["id"] for p in DASHBOARD["panels"]]

    assert len(set(ids)) == len(ids)
    for panel in DASHBOARD["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        assert grid["h"] > 0
    for panel in PANELS:
        assert len({t["refId"] for t in panel["targets"]}) == len(panel["targets"]), panel["title"]


def test_the_dashboard_shows_every_metric_the_operator_needs() -> None:
    shown = set().union(*(metric_names(t["expr"]) for _, t in TARGETS))

    assert {
        "schedlens_verb_duration_seconds_bucket",
        "schedlens_verb_responses_total",
        "schedlens_answer_ties_total",
        "schedlens_traffic_snapshot_age_seconds",
        "schedlens_traffic_refresh_errors_total",
        "schedlens_traffic_refresh_failing",
        "schedlens_spool_depth",
        "schedlens_traffic_nodes_without_metrics",
        "schedlens_traffic_unmatched_series",
        "schedlens_redis_up",
    } <= shown
    latency = next(t["expr"] for _, t in TARGETS if "histogram_quantile(0.5," in t["expr"])
    assert "by (verb, le)" in latency, "latency per verb"
    assert any("histogram_quantile(0.99," in t["expr"] for _, t in TARGETS)
