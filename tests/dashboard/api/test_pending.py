"""``/api/v1/pending/``: the live pending list and one waiting pod, the figures each reason follows from, 400s."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.api_client import token_client
from tests.support.fake_kube_api import FakeKubeAPI
from tests.support.pending_pods import EXPECTED, NAMESPACE, leave_waiting_pods, watch_into_the_list

pytestmark = pytest.mark.django_db


@pytest.fixture
def watched() -> Iterator[FakeKubeAPI]:
    """The three waiting pods, through the placement watcher into the live list."""
    with FakeKubeAPI() as api:
        leave_waiting_pods(api)
        watch_into_the_list(api)
        yield api


def test_the_list_gives_each_pod_its_combined_reasons_with_counts(watched, auditor) -> None:
    body = token_client(auditor).get("/api/v1/pending/", {"namespace": NAMESPACE}).json()

    assert body["count"] == 3
    assert {p["name"]: p["summary"] for p in body["results"]} == EXPECTED
    busy = next(p for p in body["results"] if p["name"] == "web-busy")
    assert [(r["source"], r["reason"], r["nodes"]) for r in busy["reasons"]] == [
        ("kube-scheduler", "Insufficient memory", 5),
        ("schedlens", "receive rate above 125.0 MB/s", 1),
    ]
    ours = busy["reasons"][1]
    assert ours["limit"] == "125.0 MB/s"
    assert ours["figures"] == [{"node": "node-4", "figure": "166.7 MB/s over the last 5 min"}]
    assert busy["attempts"] == 1
    assert busy["profile"] == "default"


def test_one_pod_shows_its_attempts_and_the_nodes_closest_to_passing(watched, auditor) -> None:
    body = token_client(auditor).get(f"/api/v1/pending/{NAMESPACE}/gpu-job/").json()

    [attempt] = body["recent_attempts"]
    assert attempt["summary"] == EXPECTED["gpu-job"]
    assert attempt["nodes_total"] == 4
    assert {r["source"] for r in attempt["reasons"]} == {"schedlens"}, "kube-scheduler refused none itself"
    assert attempt["passed"] == 0
    assert [(m["node"], m["reason"]) for m in attempt["closest"]] == [
        ("node-3", "node does not enable example.com/gpu"),
        ("node-5", "no NodeResources object for node"),
    ]
    assert attempt["cycle_id"] is not None
    assert "Preemption is not helpful" in attempt["preemption"]


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/api/v1/pending/?namespace=Not_A_Namespace", "namespace"),
        ("/api/v1/pending/?namespace=" + "a" * 64, "namespace"),
        ("/api/v1/pending/BAD/web-1/", "namespace"),
        ("/api/v1/pending/shop/web_1/", "name"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(auditor, path, field) -> None:
    response = token_client(auditor).get(path)

    assert response.status_code == 400
    assert response.json()["field"] == field


def test_a_pod_not_waiting_is_a_404(auditor) -> None:
    response = token_client(auditor).get("/api/v1/pending/shop/web-1/")

    assert response.status_code == 404
    assert "is waiting" in response.json()["error"]
