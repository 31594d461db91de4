"""An operator in a real headless Chromium: log in, filter, open a decision, ask why not, replay, look around."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from dashboard import runtime as runtime_module
from dashboard.models import SchedulingCycle
from scheduler_core.extender.protocol.binding import SimulatedBinder
from scheduler_core.extender.scoring.herd import InMemoryBindLog
from scheduler_core.extender.scoring.profiles import load_profiles
from scheduler_core.extender.verbs import Extender
from tests.support.inputs import Inputs, traffic_store
from tests.support.recording import CLUSTER, PROFILES, TRAFFIC, Recorder, make_pod, use_demo_profiles

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def recorder(settings, tmp_path, monkeypatch) -> Iterator[Recorder]:
    use_demo_profiles(settings, tmp_path / "spool")
    web = runtime_module.Runtime()  # what config/wsgi.py builds in every web process (not started: no threads)
    monkeypatch.setattr(runtime_module, "_runtime", web)
    yield Recorder()
    web.spool.close()


def test_an_operator_follows_a_pod_from_the_history_to_a_what_if(
    page, live_server, operator_login, recorder, screenshot
):
    recorder.schedule(make_pod("api-5f6c", "payments"), nodes=["node-1", "node-2"])
    cycle = recorder.schedule(make_pod("web-7d9f", "shop"), nodes=["node-1", "node-2", "node-3", "node-4", "node-5"])
    recorder.schedule(make_pod("train-1", "ml", gpu=True), nodes=["node-3", "node-4"])

    operator_login("/")
    expect(page.get_by_role("heading", name="Placement history")).to_be_visible()
    expect(page.locator("#history-rows tr[data-id]")).to_have_count(3)
    screenshot("history")

    page.get_by_label("Namespace").fill("shop")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("#history-rows tr[data-id]")).to_have_count(1)
    expect(page).to_have_url(re.compile(r"namespace=shop"))
    screenshot("history-filtered")

    page.get_by_role("link", name="shop/web-7d9f").click()
    expect(page).to_have_url(f"{live_server.url}/cycles/{cycle.id}/")
    explanation = page.locator("#explanation")
    expect(explanation).to_contain_text("Placed on node-3")
    expect(explanation).to_contain_text("2 nodes excluded: node-4: receive rate above 125.0 MB/s")
    first_row = page.locator("table.candidates tbody tr").first
    expect(first_row).to_have_attribute("data-node", "node-3")
    expect(first_row).to_have_class(re.compile(r"\bchosen\b"))
    # The chart was drawn by the vendored Chart.js (a blank canvas would still have its fallback size).
    expect(page.locator("#score-chart")).to_have_attribute("style", re.compile(r"height"))
    answers = page.locator("details.answer")
    expect(answers).to_have_count(3)
    expect(answers.first.locator("pre")).to_be_hidden()
    answers.first.locator("summary").click()
    expect(answers.first.locator("pre")).to_contain_text('"NodeNames"')
    screenshot("decision")

    page.get_by_label(re.compile(r"^Compare node-3 with")).select_option("node-1")
    result = page.locator("#why-not-result")
    expect(result).to_contain_text("node-1 scored 3.6 points less than node-3; most of it from ImageLocality.")
    expect(result.locator("table.terms tr.total")).to_contain_text("21.4")
    expect(page).to_have_url(f"{live_server.url}/cycles/{cycle.id}/?why_not=node-1")
    page.get_by_label(re.compile(r"^Compare node-3 with")).select_option("node-5")
    expect(result).to_contain_text("node-5 was excluded before scoring")
    screenshot("decision-why-not")

    page.get_by_role("link", name=re.compile(r"What if")).click()
    expect(page.get_by_role("heading", name=re.compile(r"What if"))).to_be_visible()
    page.get_by_label("ImageLocality").fill("0")
    page.locator("#whatif-custom").get_by_role("button", name="Replay").click()
    outcome = page.locator("#whatif-result")
    expect(outcome).to_contain_text("Our highest score would move from node-3 to node-1.")
    screenshot("what-if")

    page.locator("#whatif-profile-name").select_option("gpu-aware")
    page.locator("#whatif-profile").get_by_role("button", name="Replay").click()
    expect(outcome).to_contain_text("Under gpu-aware")

    page.get_by_role("link", name="Nodes").click()
    expect(page.get_by_role("heading", name="Traffic received by node-1")).to_be_visible()  # most placements, then name
    expect(page.locator("table.nodes")).to_contain_text("no NodeResources object for node")
    screenshot("nodes")

    page.get_by_role("link", name="Health").click()
    expect(page.locator("table.verbs")).to_contain_text("prioritize")
    expect(page.get_by_text("records waiting")).to_be_visible()
    screenshot("health")


def test_new_cycles_appear_in_the_history_without_a_reload(page, operator_login, recorder):
    recorder.schedule(make_pod("first-1"))
    operator_login("/")
    rows = page.locator("#history-rows tr[data-id]")
    expect(rows).to_have_count(1)
    page.evaluate("window.__sameDocument = true")

    recorder.schedule(make_pod("second-2"))
    expect(rows.first).to_contain_text("second-2", timeout=20_000)
    expect(rows).to_have_count(2)
    assert page.evaluate("window.__sameDocument") is True, "the page was not reloaded"


def test_a_script_in_a_pod_name_is_shown_as_text_and_never_runs(page, operator_login, recorder, screenshot):
    hostile = "<script>alert('pwned')</script>"
    cycle = recorder.schedule(make_pod(hostile, "<img src=x onerror=alert(1)>"))
    assert SchedulingCycle.objects.get(pk=cycle.pk).pod_name == hostile
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))

    operator_login("/")
    expect(page.locator("#history-rows").get_by_text(hostile)).to_be_visible()
    page.locator("#history-rows a").first.click()
    expect(page.locator("#pod-name")).to_have_text(hostile)
    expect(page.locator("h1.pod-title")).to_contain_text("<img src=x onerror=alert(1)>")
    assert page.locator("h1.pod-title img").count() == 0
    screenshot("decision-hostile-pod-name")
    assert dialogs == []


def test_times_are_shown_in_the_operator_s_zone_with_utc_on_hover(page, operator_login, recorder):
    recorder.schedule(make_pod("clock-1"))
    operator_login("/")
    stamp = page.locator("#history-rows time.ts").first
    expect(stamp).to_have_attribute("data-local", "1")
    title = stamp.get_attribute("title") or ""
    assert title.endswith(" UTC")
    expect(stamp).to_contain_text(re.compile(r"GMT\+5:30|IST"))


def test_the_decision_page_writes_out_the_arithmetic_of_a_herd_adjusted_node(
    page, live_server, operator_login, recorder, screenshot
):
    """The second pod of a burst: its decision shows the bytes assumed for the first pod's bind, and the sum."""
    store = traffic_store(TRAFFIC)
    recorder.extender = Extender(
        load_profiles(PROFILES.read_text()),
        cluster=CLUSTER,
        traffic=store,
        binder=SimulatedBinder(),
        inputs=Inputs(store, InMemoryBindLog(15.0, default_decay_seconds=15.0)),
    )
    nodes = ["node-1", "node-2", "node-3"]
    first = recorder.schedule(make_pod("burst-1", "shop"), nodes=nodes)
    second = recorder.schedule(make_pod("burst-2", "shop"), nodes=nodes)
    bound = first.chosen_node
    assert bound, "the first pod was bound"

    operator_login(f"/cycles/{second.id}/")
    row = page.locator(f'tr.arithmetic-row[data-arithmetic-of="{bound}"]')
    details = row.locator("details")
    if details.get_attribute("open") is None:
        details.locator("summary").click()
    traffic = row.locator('div[data-plugin="NetworkTraffic"] dd')
    expect(traffic).to_be_visible()
    text = traffic.inner_text()
    # estimate E = M measured + A assumed (1 recent bind, …); 100 − E × 100 / X (node) = S
    found = re.fullmatch(
        r"estimate ([\d,]+) = ([\d,]+) measured \+ ([\d,]+) assumed \(1 recent bind, the newest [\d.]+ m?s before\); "
        r"100 − ([\d,]+) × 100 / ([\d,]+) \(([\w-]+)\) = ([\d.]+)",
        text,
    )
    assert found, text
    estimate, measured, assumed, used, largest = (int(found.group(i).replace(",", "")) for i in range(1, 6))
    assert estimate == measured + assumed == used
    assert assumed > 0
    assert round(100 - estimate * 100 / largest, 4) == float(found.group(7))
    shown_score = page.locator(f'tr[data-node="{bound}"] td.term[data-plugin="NetworkTraffic"]')
    expect(shown_score).to_contain_text(f"{float(found.group(7)):.1f} × ")
    expect(row.locator('div[data-step="final"] dd')).to_contain_text("= ")
    expect(row.locator('div[data-step="answer"] dd')).to_contain_text("→")
    screenshot("decision-herd-arithmetic")
