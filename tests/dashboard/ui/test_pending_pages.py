"""The pending pages: the waiting pods with their combined reasons, one pod's attempts, the history's link, 400s."""

from __future__ import annotations

import pytest
from django.urls import reverse

from dashboard.placements.models import WaitingPod
from tests.support.fake_kube_api import FakeKubeAPI
from tests.support.pending_pods import EXPECTED, NAMESPACE, leave_waiting_pods, watch_into_the_list

pytestmark = pytest.mark.django_db


@pytest.fixture
def waiting(recorder) -> None:
    with FakeKubeAPI() as api:
        leave_waiting_pods(api, recorder)
        watch_into_the_list(api)


def test_the_list_shows_each_pod_with_its_combined_reasons_and_the_history_links_to_it(signed_in, waiting) -> None:
    body = signed_in.get(reverse("ui:pending")).content.decode()
    for name, summary in EXPECTED.items():
        assert f'data-pod="{NAMESPACE}/{name}"' in body
        assert summary.replace("'", "&#x27;") in body
    assert 'hx-trigger="every 5s"' in body
    history = signed_in.get(reverse("ui:history")).content.decode()
    assert "3 pods waiting for a node now" in history
    assert reverse("ui:pending") in history


def test_one_pod_shows_its_reasons_the_closest_nodes_and_the_figures(signed_in, waiting) -> None:
    body = signed_in.get(reverse("ui:pending-pod", args=[NAMESPACE, "web-busy"])).content.decode()
    assert "node-4: 166.7 MB/s over the last 5 min" in body
    assert "<td>125.0 MB/s</td>" in body
    assert "Insufficient memory" in body
    assert "Closest to passing" in body


def test_the_body_says_when_the_pod_no_longer_waits(signed_in, waiting) -> None:
    WaitingPod.objects.filter(pod_name="web-busy").delete()
    body = signed_in.get(reverse("ui:pending-pod-body", args=[NAMESPACE, "web-busy"]))
    assert body.status_code == 200
    assert "is not waiting for a node" in body.content.decode()
    assert signed_in.get(reverse("ui:pending-pod", args=[NAMESPACE, "web-busy"])).status_code == 404


@pytest.mark.parametrize(
    ("url", "field"),
    [
        ("/pending/?namespace=Bad_NS", "namespace"),
        ("/pending/rows/?namespace=" + "a" * 64, "namespace"),
        ("/pending/BAD/web-1/", "namespace"),
        ("/pending/shop/web_1/body/", "name"),
    ],
)
def test_bad_names_are_a_400_naming_the_field(signed_in, url, field) -> None:
    response = signed_in.get(url)
    assert response.status_code == 400
    assert response.content.decode().startswith(f"{field}:")
