"""The pending page in a real headless Chromium: the same figures as the API and the plugin, refreshed live, and the
list emptying as pods bind."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from dashboard import runtime as runtime_module
from dashboard.api.pending_serializers import PendingPodDetailSerializer
from dashboard.placements.selectors import pending_pod
from tests.support.fake_kube_api import FakeKubeAPI
from tests.support.pending_pods import EXPECTED, NAMESPACE, leave_waiting_pods, watch_into_the_list
from tests.support.recording import Recorder, use_demo_profiles

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def api(settings, tmp_path, monkeypatch) -> Iterator[FakeKubeAPI]:
    use_demo_profiles(settings, tmp_path / "spool")
    web = runtime_module.Runtime()  # what config/wsgi.py builds in every web process (not started: no threads)
    monkeypatch.setattr(runtime_module, "_runtime", web)
    with FakeKubeAPI() as server:
        leave_waiting_pods(server, Recorder())
        watch_into_the_list(server)
        yield server
    web.spool.close()


def test_the_page_lists_each_waiting_pod_and_empties_live_as_they_bind(page, operator_login, api, screenshot) -> None:
    operator_login("/")
    page.locator("#pending-banner a").click()
    rows = page.locator("#pending-list tbody tr[data-pod]")
    expect(rows).to_have_count(3)
    for name, summary in EXPECTED.items():
        expect(page.locator(f'tr[data-pod="{NAMESPACE}/{name}"] .pending-summary')).to_have_text(summary)
    screenshot("pending-list")
    page.evaluate("window.__sameDocument = true")

    api.set_pod_node("big-cpu", "node-1", namespace=NAMESPACE)
    watch_into_the_list(api, pods=2)
    expect(rows).to_have_count(2, timeout=20_000)
    assert page.evaluate("window.__sameDocument") is True, "the page was not reloaded"


def test_one_pod_shows_the_figures_and_limits_the_api_serves(page, operator_login, api, screenshot) -> None:
    operator_login(f"/pending/{NAMESPACE}/web-busy/")
    served = PendingPodDetailSerializer(pending_pod(namespace=NAMESPACE, name="web-busy")).data  # the API's JSON
    [attempt] = served["recent_attempts"]
    reasons = page.locator("table.pending-reasons tbody tr")
    expect(reasons).to_have_count(len(attempt["reasons"]))
    for row, group in enumerate(attempt["reasons"]):
        cells = reasons.nth(row).locator("td")
        expect(cells.nth(0)).to_have_text(str(group["nodes"]))
        expect(cells.nth(1)).to_have_text(group["reason"])
        expect(cells.nth(3)).to_have_text(group["limit"] or "—")
        for figure in group["figures"]:
            expect(cells.nth(4)).to_contain_text(f"{figure['node']}: {figure['figure']}")
    closest = page.locator("table.pending-closest tbody tr")
    expect(closest).to_have_count(len(attempt["closest"]))
    for row, miss in enumerate(attempt["closest"]):
        expect(closest.nth(row).locator("td").nth(2)).to_have_text(miss["figure"])
        expect(closest.nth(row).locator("td").nth(3)).to_have_text(miss["limit"])
    assert attempt["closest"][0]["figure"] == "166.7 MB/s over the last 5 min"
    screenshot("pending-pod")

    api.set_pod_node("web-busy", "node-2", namespace=NAMESPACE)
    watch_into_the_list(api, pods=2)
    expect(page.locator("#pending-gone")).to_be_visible(timeout=20_000)
