"""Hostile strings in everything a client controls, shown in real Chromium: pod names and namespaces, node names
(which become reasons' keys and chart data), extended resource names (which end up in NodeResourceFitByCR's
reasons), labels and annotations, and the ``why_not`` query parameter the decision page echoes. Nothing runs, no
element is injected, and the Content-Security-Policy reports nothing (the ``page`` fixture fails on any report).
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.support.recording import Recorder, make_pod, use_demo_profiles

pytestmark = pytest.mark.django_db(transaction=True)

SCRIPT = "<script>alert('pod')</script>"
IMG = '"><img src=x onerror=alert(document.domain)>'
SVG = "<svg/onload=alert(3)>"


@pytest.fixture
def recorder(settings, tmp_path) -> Recorder:
    use_demo_profiles(settings, tmp_path / "spool")
    return Recorder()


def test_hostile_names_reasons_and_parameters_are_shown_as_text_and_never_run(
    page, live_server, operator_login, recorder
) -> None:
    pod = make_pod(SCRIPT, IMG)
    pod["metadata"]["labels"] = {"app": SVG}
    pod["metadata"]["annotations"] = {"note": SCRIPT}
    pod["spec"]["containers"][0]["resources"] = {"requests": {f"example.com/{SVG}": "1"}}
    hostile_node = f"node-{IMG}"
    cycle = recorder.schedule(pod, profile="gpu-aware", nodes=["node-1", "node-2", hostile_node, "node-3"])
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))

    operator_login("/")
    expect(page.locator("#history-rows").get_by_text(SCRIPT)).to_be_visible()

    page.goto(f"{live_server.url}/cycles/{cycle.pk}/?why_not={hostile_node}")
    expect(page.locator("#pod-name")).to_have_text(SCRIPT)
    expect(page.get_by_text(hostile_node).first).to_be_visible()
    expect(page.get_by_text(f"node does not enable example.com/{SVG}").first).to_be_visible()  # a reason
    page.goto(f"{live_server.url}/cycles/{cycle.pk}/?why_not={SVG}")
    page.goto(f"{live_server.url}/nodes/")
    page.goto(f"{live_server.url}/?namespace={IMG}&pod={SCRIPT}")

    assert dialogs == []
    assert page.locator("img[src='x'], svg[onload], script:not([src]):not([type='application/json'])").count() == 0
