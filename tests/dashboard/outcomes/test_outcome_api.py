"""Outcomes in the audit API and /metrics, and the balance series (issue 32, items 1 and 2).

Two placements on the series of ``tests.support.outcome_data``: ``web-1`` goes to node-2 (runner-ups node-3 and
node-4), ``web-2`` to node-3 (runner-up node-4). After the binds node-2 receives 10 kB/s, node-3 5 kB/s, node-4
50 kB/s: node-2 did not stay the quietest, node-3 did.
"""

from __future__ import annotations

import csv
import io
import json

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.api_client import token_client
from tests.support.outcome_data import NODE_RATES, POD_RECEIVE_RATE, POD_TRANSMIT_RATE

pytestmark = [pytest.mark.prometheus, pytest.mark.usefixtures("outcome_settings")]


def test_the_api_serves_an_outcome_with_the_figures_its_errors_follow_from(placed, auditor):
    response = token_client(auditor).get(f"/api/v1/cycles/{placed['node-2']}/outcome/")

    assert response.status_code == 200
    body = response.json()
    assert body["estimate"] == {
        "measured_bytes": 1.0e6,
        "assumed_bytes": 0.0,
        "total_bytes": 1.0e6,
        "query_window_seconds": 300,
        "runner_ups": ["node-3", "node-4"],
    }
    minute = next(w for w in body["windows"] if w["seconds"] == 60)
    assert minute["node_estimated_bytes"] == pytest.approx(1.0e6 * 60 / 300)
    assert minute["node_bytes"] == pytest.approx(NODE_RATES["node-2"] * 60)
    assert minute["node_relative_error"] == pytest.approx((NODE_RATES["node-2"] * 60 - 2.0e5) / 2.0e5)
    assert minute["quieter_runner_ups"] == ["node-3"]
    assert minute["stayed_quietest"] is False
    assert minute["pod_estimated_bytes"] == pytest.approx(300e6 * 60 / 300)
    pod = (POD_RECEIVE_RATE + POD_TRANSMIT_RATE) * 60
    assert minute["pod_relative_error"] == pytest.approx((pod - 6.0e7) / 6.0e7)
    assert body["workload"] == {"kind": "Deployment", "name": "web"}


def test_a_cycle_without_an_outcome_is_a_404_saying_why(placed, auditor):
    response = token_client(auditor).get("/api/v1/cycles/999999999/outcome/")
    assert response.status_code == 404
    assert "no outcome" in response.json()["error"]


def test_the_balance_series_shows_the_spread_of_the_nodes_placed_on_and_how_often_the_choice_stayed_quietest(
    placed, auditor
):
    response = token_client(auditor).get("/api/v1/balance/?profile=default")

    assert response.status_code == 200
    body = response.json()
    (sample,) = body["spread"]
    two, three = NODE_RATES["node-2"] * 300, NODE_RATES["node-3"] * 300
    mean = (two + three) / 2
    assert sample["nodes"] == 2
    assert sample["mean_bytes"] == pytest.approx(mean)
    assert sample["cv"] == pytest.approx(abs(two - mean) / mean)
    assert sample["max_over_min"] == pytest.approx(two / three)
    assert body["stayed_quietest"] == [{"profile": "default", "stayed": 1, "known": 2, "share": 0.5}]
    (histogram,) = body["pod_error"]  # web-2 has no series: not in the histogram, not as 0
    assert (histogram["workload_kind"], histogram["count"]) == ("Deployment", 1)


def test_a_bad_balance_query_is_a_400_naming_the_field(auditor, db):
    response = token_client(auditor).get("/api/v1/balance/?hours=soon")
    assert response.status_code == 400
    assert response.json()["field"] == "hours"


def test_metrics_export_the_estimate_error_histogram_by_workload_kind_and_profile_not_by_pod(placed, client, runtime):
    text = client.get("/metrics").content.decode()

    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.startswith("schedlens_herd_estimate_relative_error")
    }
    bucket = "schedlens_herd_estimate_relative_error_bucket"
    # Errors can be negative, so the histogram has no _sum and _count (the text format's rule): +Inf is the count.
    labels = {"profile": "default", "workload_kind": "Deployment"}
    assert samples[(bucket, tuple(sorted({**labels, "le": "+Inf"}.items())))] == 1
    assert samples[(bucket, tuple(sorted({**labels, "le": "-0.9"}.items())))] == 1  # web-1: 3 kB/s against 1 MB/s
    assert not any("pod" in dict(key) for _, key in samples)


def test_the_ndjson_export_carries_each_cycles_placement_outcome(placed, auditor):
    response = token_client(auditor).get("/api/v1/cycles/export.ndjson?include=placement_outcome")

    assert response.status_code == 200
    lines = [json.loads(line) for line in b"".join(response.streaming_content).splitlines()]
    by_id = {line["id"]: line["placement_outcome"] for line in lines}
    assert by_id[placed["node-2"]]["windows"][0]["node_bytes"] == pytest.approx(NODE_RATES["node-2"] * 60)
    assert by_id[placed["node-3"]]["status"] == "unattributable"


def test_the_csv_export_has_the_longest_windows_figures_in_placement_outcome_columns(placed, auditor):
    response = token_client(auditor).get("/api/v1/cycles/export.csv?include=placement_outcome")

    rows = {int(r["id"]): r for r in csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode()))}
    row = rows[placed["node-2"]]
    assert row["placement_outcome.seconds"] == "900"
    assert float(row["placement_outcome.node_bytes"]) == pytest.approx(NODE_RATES["node-2"] * 900)
    assert float(row["placement_outcome.node_estimated_bytes"]) == pytest.approx(1.0e6 * 900 / 300)
    assert row["placement_outcome.quieter_runner_ups"] == "node-3"
    assert row["placement_outcome.workload_kind"] == "Deployment"
    assert rows[placed["node-3"]]["placement_outcome.pod_bytes"] == ""


def test_a_csv_cannot_include_both_the_explanation_and_the_outcome(auditor, db):
    response = token_client(auditor).get("/api/v1/cycles/export.csv?include=explanation,placement_outcome")
    assert response.status_code == 400
    assert response.json()["field"] == "include"
