"""An operator previews a profile change on recorded history in a real headless Chromium: a field error
from the form, a replay started with pasted profile YAML, its progress followed by htmx until it is done, the report's
figures and its placements chart, and a changed decision's what-if with the candidate's settings filled in.

The replay runner is ``none``: the test runs the replay itself (``history_replay_run``) while the page polls.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from dashboard.replays.models import HistoryReplay
from dashboard.replays.services import history_replay_run
from tests.support.recording import PROFILES, Recorder, make_pod, use_demo_profiles

pytestmark = pytest.mark.django_db(transaction=True)

FIVE = ["node-1", "node-2", "node-3", "node-4", "node-5"]
WITHOUT_IMAGE_LOCALITY = PROFILES.read_text().replace(", {name: ImageLocality, weight: 1}", "")


@pytest.fixture
def recorder(settings, tmp_path) -> Recorder:
    use_demo_profiles(settings, tmp_path / "spool")
    settings.SCHEDLENS_REPLAY_RUNNER = "none"
    return Recorder()


def test_an_operator_replays_history_under_pasted_yaml_and_reads_the_report(
    page, live_server, operator_login, recorder, screenshot
):
    cycles = [recorder.schedule(make_pod(f"web-{i}", "shop"), nodes=FIVE) for i in range(6)]

    operator_login("/")
    page.get_by_role("navigation").get_by_role("link", name="Replays").click()
    expect(page.get_by_role("heading", name="Replay history under a candidate profile")).to_be_visible()
    expect(page.locator("#replay-list")).to_contain_text("No replay yet")

    # A refused field is named beside it, and nothing is started.
    page.get_by_label("Last N cycles").fill("0")
    page.get_by_role("button", name="Start the replay").click()
    expect(page.locator("#error-last")).to_have_text("must be at least 1")
    expect(page.get_by_label("Last N cycles")).to_have_attribute("aria-invalid", "true")
    assert HistoryReplay.objects.count() == 0

    page.get_by_label("Last N cycles").fill("10")
    page.get_by_label("Namespace").fill("shop")
    page.get_by_label("Profile YAML", exact=True).fill(WITHOUT_IMAGE_LOCALITY)
    expect(page.locator("#source-yaml")).to_be_checked()  # replays.js picked the source the operator filled in
    page.get_by_label("Profile to replay, when the YAML defines several").fill("default")
    screenshot("replay-form")
    page.get_by_role("button", name="Start the replay").click()

    replay = HistoryReplay.objects.get()
    expect(page).to_have_url(f"{live_server.url}/replays/{replay.pk}/")
    expect(page.locator("#replay-status")).to_have_text("Queued")
    expect(page.locator("#replay-live")).to_contain_text("SCHEDLENS_REPLAY_RUNNER=none")
    page.evaluate("() => { window.__samePage = true; }")  # the report must arrive by htmx, not by a reload

    seen: list[tuple[int, int]] = []

    def halfway(done: int, total: int) -> None:
        # The runner has written this chunk's progress on the row: the page shows it while the replay runs on.
        if 0 < done < total:
            expect(page.locator("#replay-status")).to_have_text("Running")
            expect(page.locator("#replay-progress")).to_contain_text(f"{done} of {total} cycles")
            seen.append((done, total))

    history_replay_run(replay.pk, chunk_size=3, progress=halfway)
    assert seen == [(3, 6)]
    expect(page.locator("#replay-status")).to_have_text("Done")
    assert page.evaluate("() => window.__samePage === true")
    expect(page.locator("#replay-body")).not_to_have_attribute("hx-trigger", re.compile("."))

    # The figures, with what they follow from.
    expect(page.locator("#replay-headline")).to_contain_text(
        "6 of the 6 decisions replayed would have preferred another node"
    )
    changed = page.locator('[data-figure="decisions_changed"]')
    expect(changed.locator(".value")).to_have_text("6 of 6 (100.0 %)")
    expect(changed).to_contain_text("6 = 6 moved to another node + 0 left without a feasible node + 0 given one")
    expect(page.locator("#quietest-after")).to_have_text("6 of 6 (100.0 %)")
    expect(page.locator('table.placements tr[data-node="node-1"] td.after')).to_have_text("6")
    expect(page.locator("#replay-caveats")).to_contain_text("The herd estimate is kept as recorded")

    # The chart: drawn by Chart.js once htmx swapped the report in, grouped bars per node, before vs after.
    chart = page.locator("#placements-chart")
    expect(chart).to_have_attribute("style", re.compile(r"height"))
    drawn = page.evaluate(
        """() => {
          const chart = Chart.getChart(document.getElementById("placements-chart"));
          return {labels: chart.data.labels, sets: chart.data.datasets.map((d) => [d.label, d.data])};
        }"""
    )
    assert drawn == {
        "labels": ["node-1", "node-3"],
        "sets": [["before (recorded profile)", [0, 6]], ["after (default)", [6, 0]]],
    }
    screenshot("replay-report")

    # A changed decision's what-if, with the candidate's settings filled in, finds the same move.
    first = page.locator("table.sample tbody tr").first
    expect(first).to_have_attribute("data-cycle", str(cycles[0].id))
    first.get_by_role("link", name="what-if with the candidate").click()
    expect(page).to_have_url(re.compile(rf"/cycles/{cycles[0].id}/what-if/\?mode=custom&"))
    expect(page.locator("#whatif-result")).to_contain_text("Our highest score would move from node-3 to node-1.")
    expect(page.get_by_label("ImageLocality")).to_have_value("0")
    expect(page.get_by_label("NetworkTraffic")).to_have_value("3")
    screenshot("replay-what-if")

    page.get_by_role("navigation").get_by_role("link", name="Replays").click()
    row = page.locator(f'#replay-list tr[data-id="{replay.pk}"]')
    expect(row).to_contain_text("Done")
    expect(row).to_contain_text("the last 10 cycles, namespace shop")
    expect(row).to_contain_text("olga")


def test_an_operator_compares_learned_traffic_with_the_constant_on_the_replay_and_the_what_if(
    page, live_server, operator_login, recorder
):
    """Without outcomes nothing is learned: every pod is assumed the constant under both modes, and the pages say so
    with the figures (the test of the figures themselves is tests/dashboard/replays/test_learning_comparison.py)."""
    cycles = [recorder.schedule(make_pod(f"web-{i}", "shop"), nodes=FIVE) for i in range(3)]

    operator_login("/replays/")
    page.get_by_label("Last N cycles").fill("3")
    page.get_by_label("Also compare, under the candidate, the herd estimate's assumed bytes per pod").select_option(
        "on"
    )
    page.get_by_role("button", name="Start the replay").click()
    replay = HistoryReplay.objects.get()
    assert replay.compare_learning == "on"
    history_replay_run(replay.pk)
    expect(page.locator("#replay-status")).to_have_text("Done")

    section = page.locator("#replay-learning")
    expect(section).to_contain_text("Learned traffic against the constant: constant → learned")
    expect(page.locator("#learning-headline")).to_contain_text("0 of the 3 cycles compared prefer another node")
    expect(section.locator('tr[data-figure="sources"] td').nth(1)).to_have_text("constant 3")
    row = section.locator(f'tr[data-cycle="{cycles[0].id}"]')
    expect(row).to_contain_text("fallback: the constant assumedBytesPerPod")

    row.get_by_role("link", name=str(cycles[0].id)).click()
    page.get_by_role("link", name=re.compile("What if")).click()
    page.get_by_label("Herd estimate").select_option("on")
    page.locator("#whatif-learning").get_by_role("button", name="Replay").click()
    expect(page).to_have_url(re.compile(rf"/cycles/{cycles[0].id}/what-if/\?learning=on"))
    figures = page.locator("#whatif-learning-figures")
    expect(figures.locator('[data-assumed="learned"]')).to_contain_text("fallback: the constant assumedBytesPerPod")
    expect(page.locator("#whatif-result")).to_contain_text("Our highest score would stay on")
