"""The "why" endpoint and the cycle detail: a pod's latest cycle, explained node by node."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.support.kube_scheduler import NODES, T0

MINUTE = timedelta(minutes=1)


@pytest.mark.django_db
def test_why_explains_a_pods_latest_cycle_by_namespace_and_name(api, kube_scheduler):
    kube_scheduler.schedule(at=T0, name="web-1", nodes=["node-9"])  # an earlier attempt of the same pod
    latest = kube_scheduler.schedule(at=T0 + MINUTE, name="web-1")

    response = api.get("/api/v1/why/", {"namespace": "shop", "name": "web-1"})
    assert response.status_code == 200
    body = response.json()
    assert body["cycle"]["id"] == latest.id
    explanation = body["explanation"]
    assert explanation["chosen_node"] == "node-2"
    assert explanation["summary"] == (
        "Placed on node-2: lowest traffic (1.0 MB in 5 min), 5.0 points ahead of node-3 (answers 10 against 9 on the"
        " 0..10 scale). "
        "1 node excluded: node-5: receive rate above 125.0 MB/s (130.0 MB/s over the last 5 min)."
    )
    nodes = {n["node"]: n for n in explanation["nodes"]}
    assert set(nodes) == set(NODES)
    winner = nodes["node-2"]
    assert (winner["rank"], winner["final_score"], winner["extender_score"]) == (1, 75.0, 10)
    [term] = winner["terms"]
    assert {key: term[key] for key in ("plugin", "weight", "applicable", "normalized", "weighted", "contribution")} == {
        "plugin": "NetworkTraffic",
        "weight": 1,
        "applicable": True,
        "normalized": 75.0,
        "weighted": 75.0,
        "contribution": 75.0,
    }
    assert (term["raw"], term["note"], term["resources"], term["images"]) == (1.0e6, "", None, None)
    assert term["traffic"] == {
        "measured_bytes": 1.0e6,
        "herd_bytes": 0.0,
        "herd_binds": 0,
        "herd_newest_bind_age_seconds": None,
        "estimate_bytes": 1.0e6,
        "max_estimate_bytes": 4.0e6,
        "max_estimate_node": "node-1",
        "metric_age_seconds": term["traffic"]["metric_age_seconds"],
        "missing_reason": "",
        "missing_score": 50.0,
        "herd_reconciled": [],
    }
    assert term["arithmetic"] == "100 − 1,000,000 × 100 / 4,000,000 (node-1) = 75"
    assert winner["final_arithmetic"] == "75 × 1 / 1 = 75"
    assert winner["answer_arithmetic"] == "10 × (75 − 0) / (75 − 0) = 10 → 10"
    assert (explanation["answer_scale"], explanation["spread_min"], explanation["spread_max"]) == ("spread", 0.0, 75.0)
    assert nodes["node-5"]["verdicts"] == [
        {
            "plugin": "TrafficThreshold",
            "reason": "receive rate above 125.0 MB/s",
            "detail": "130.0 MB/s over the last 5 min",
        }
    ]
    assert nodes["node-5"]["passed"] is False
    assert nodes["node-5"]["traffic_bytes"] == 130e6 * 300


@pytest.mark.django_db
def test_why_finds_a_pod_by_uid(api, kube_scheduler):
    cycle = kube_scheduler.schedule(at=T0, name="gpu-1", gpu=True, profile="gpu-aware", nodes=[*NODES, "node-6"])
    body = api.get("/api/v1/why/", {"pod_uid": cycle.pod_uid}).json()
    assert body["cycle"]["id"] == cycle.id
    assert body["explanation"]["summary"].startswith("Placed on node-1: highest NodeResourceFitByCR score (90)")
    excluded = {n["node"]: n for n in body["explanation"]["nodes"] if n["passed"] is False}
    assert set(excluded) == {"node-2", "node-4", "node-6"}
    assert all(n["unresolvable"] for n in excluded.values())


@pytest.mark.django_db
def test_why_explains_an_unschedulable_pod(api, kube_scheduler):
    kube_scheduler.schedule(at=T0, name="web-3", gpu=True, nodes=["node-2", "node-4"])
    body = api.get("/api/v1/why/", {"namespace": "shop", "name": "web-3"}).json()
    assert body["cycle"]["outcome"] == "unschedulable"
    assert body["explanation"]["summary"] == (
        "Not placed: no candidate node passed the filters. 2 nodes excluded: "
        "node-2 does not enable example.com/gpu; node-4 does not enable example.com/gpu."
    )


@pytest.mark.django_db
def test_why_for_an_unknown_pod_is_a_404(api, kube_scheduler):
    response = api.get("/api/v1/why/", {"namespace": "shop", "name": "nobody"})
    assert response.status_code == 404
    assert response.json() == {"error": "no recorded cycle for this pod"}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({}, "namespace"),
        ({"namespace": "shop"}, "name"),
        ({"name": "web-1"}, "namespace"),
        ({"pod_uid": "u", "name": "web-1"}, "pod_uid"),
    ],
)
def test_why_needs_namespace_and_name_or_a_uid(api, params, field):
    response = api.get("/api/v1/why/", params)
    assert response.status_code == 400
    assert response.json()["field"] == field


@pytest.mark.django_db
def test_a_cycle_detail_holds_every_call_with_its_record_answer_and_explanation(api, kube_scheduler):
    cycle = kube_scheduler.schedule(at=T0, name="web-1")
    body = api.get(f"/api/v1/cycles/{cycle.id}/").json()
    assert [c["verb"] for c in body["calls"]] == ["filter", "prioritize", "bind"]
    filter_call, prioritize_call, _ = body["calls"]
    assert filter_call["record"]["failures"] == {"node-5": {"TrafficThreshold": "receive rate above 125.0 MB/s"}}
    assert filter_call["response"]["NodeNames"] == ["node-1", "node-2", "node-3", "node-4"]
    assert prioritize_call["record"]["plugins"][0]["scores"] == [0.0, 75.0, 70.0, 65.0]
    assert prioritize_call["response"] == [
        {"Host": node, "Score": score}
        for node, score in zip(prioritize_call["record"]["nodes"], prioritize_call["record"]["extender"], strict=True)
    ]
    assert {"Host": "node-2", "Score": 10} in prioritize_call["response"], "the best node, on the spread scale"
    assert body["explanation"]["chosen_node"] == "node-2"
    assert len(filter_call["chain_hash"]) == 64


@pytest.mark.django_db
def test_a_missing_cycle_is_a_404(api):
    assert api.get("/api/v1/cycles/999999/").status_code == 404
