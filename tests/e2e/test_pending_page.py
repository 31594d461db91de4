"""The pending page in a real headless Chromium: the same figures as the API and the plugin, refreshed live, and the
list emptying as pods bind."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from dashboard import runtime as runtime_module
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
    pod = pending_pod(namespace=NAMESPACE, name="web-busy")
    assert pod is not None
    [attempt] = pod.view.attempts
    reasons = page.locator("table.pending-reasons tbody tr")
    expect(reasons).to_have_count(len(attempt.groups))
    for row, group in zip(range(len(attempt.groups)), attempt.groups, strict=True):
        expect(reasons.nth(row).locator("td").first).to_have_text(str(group.nodes))
        expect(reasons.nth(row)).to_contain_text(group.reason)
    closest = page.locator("table.pending-closest tbody tr")
    expect(closest).to_have_count(1)
    expect(closest.first).to_contain_text("166.7 MB/s over the last 5 min")
    expect(closest.first).to_contain_text("125.0 MB/s")
    screenshot("pending-pod")

    api.set_pod_node("web-busy", "node-2", namespace=NAMESPACE)
    watch_into_the_list(api, pods=2)
    expect(page.locator("#pending-gone")).to_be_visible(timeout=20_000)
