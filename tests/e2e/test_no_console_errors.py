"""The demo login in a real headless Chromium: every dashboard page, Swagger UI and the browsable API, and not one
console error, uncaught exception or Content-Security-Policy violation on any of them.

The user is the one ``manage.py ensure_demo_user`` creates (binds simulated, as in ``make run``), logged in
through the login form. Violations are caught twice: Chromium's console error ("Refused to apply inline style…" /
"Applying inline style violates…"), and the page's own ``securitypolicyviolation`` events, recorded by a script
Playwright injects before any of the page's (injected scripts are not subject to the page's policy).
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.core.management import call_command
from django.utils import timezone
from playwright.sync_api import Page, expect

from dashboard.models import SchedulingCycle
from dashboard.outcomes.models import BalanceSample
from dashboard.replays.services import history_replay_run, history_replay_start
from tests.support.paths import ARTIFACTS
from tests.support.recording import Recorder, make_pod, use_demo_profiles

pytestmark = pytest.mark.django_db(transaction=True)

WATCH_CSP = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  const report = `${e.violatedDirective} blocked ${e.blockedURI || "inline"} at ${e.sourceFile}:${e.lineNumber}`;
  window.__cspViolations.push(report);
  if (window.__reportCspViolation) window.__reportCspViolation(report);
});
"""


class Watched:
    """A page whose console errors, uncaught exceptions, 4xx/5xx answers and CSP violations are kept with their URL."""

    def __init__(self, page: Page, base_url: str) -> None:
        self.page = page
        self.base_url = base_url
        self.problems: list[str] = []
        self.reported = False
        page.on("console", self._console)
        page.on("pageerror", lambda exc: self.problems.append(f"{page.url}: uncaught exception: {exc}"))
        page.on("response", self._response)

    def _console(self, message: Any) -> None:
        if message.type == "error" or "Content Security Policy" in message.text:
            self.problems.append(f"{self.page.url}: console {message.type}: {message.text}")

    def _response(self, response: Any) -> None:
        if response.status >= 400:
            self.problems.append(f"{self.page.url}: {response.status} for {response.url}")

    def assert_clean(self) -> None:
        self.reported = True
        assert self.problems == [], "the browser reported:\n" + "\n".join(self.problems)

    def screenshot(self, name: str) -> None:
        ARTIFACTS.mkdir(exist_ok=True)
        self.page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)

    def visit(self, path: str) -> None:
        self.page.goto(f"{self.base_url}{path}")
        self.settle()

    def settle(self) -> None:
        """Wait for the page to load and for violation events queued during parsing to be dispatched; collect them."""
        self.page.wait_for_load_state("load")
        violations = self.page.evaluate(
            "() => new Promise((done) => setTimeout(() => done(window.__cspViolations || []), 50))"
        )
        self.problems.extend(f"{self.page.url}: securitypolicyviolation: {v}" for v in violations)
        self.page.evaluate("() => { window.__cspViolations = []; }")


@pytest.fixture
def watched(browser, live_server) -> Iterator[Watched]:
    context = browser.new_context(viewport={"width": 1440, "height": 1000}, timezone_id="Asia/Kolkata")
    problems_late: list[str] = []
    context.expose_binding("__reportCspViolation", lambda source, report: problems_late.append(report))
    context.add_init_script(WATCH_CSP)
    page = context.new_page()
    page.set_default_timeout(15_000)
    watched = Watched(page, live_server.url)
    yield watched
    context.close()
    # Violations reported after their page's own check (e.g. while navigating away) still fail the test.
    missed = [r for r in problems_late if not any(r in p for p in watched.problems)]
    assert missed == [], f"CSP violations reported late: {missed}"
    if not watched.reported:  # the test stopped early (e.g. Swagger UI never drew): say what the browser saw
        watched.assert_clean()


@pytest.fixture
def demo_login(settings, tmp_path, watched) -> Callable[[], None]:
    """The demo user exactly as ``make run`` creates it: ``ensure_demo_user`` with binds simulated."""
    settings.SCHEDLENS_BIND_MODE = "simulated"
    use_demo_profiles(settings, tmp_path / "spool")
    call_command("ensure_demo_user", stdout=io.StringIO())

    def login() -> None:
        watched.visit("/accounts/login/?next=/")
        watched.page.get_by_label("User name").fill("demo")
        watched.page.get_by_label("Password").fill("demo")
        watched.page.get_by_role("button", name="Log in").click()
        expect(watched.page.get_by_role("heading", name="Placement history")).to_be_visible()
        watched.settle()

    return login


def test_the_demo_user_sees_every_page_and_the_api_without_a_console_error_or_csp_violation(
    watched: Watched, demo_login: Callable[[], None]
) -> None:
    recorder = Recorder()
    recorder.schedule(make_pod("api-5f6c", "payments"), nodes=["node-1", "node-2"])
    cycle: SchedulingCycle = recorder.schedule(
        make_pod("web-7d9f", "shop"), nodes=["node-1", "node-2", "node-3", "node-4", "node-5"]
    )
    page = watched.page

    demo_login()
    expect(page.locator("#history-rows tr[data-id]")).to_have_count(2)

    # The dashboard.
    watched.visit(f"/cycles/{cycle.id}/")
    expect(page.locator("#explanation")).to_contain_text("Placed on node-3")
    expect(page.locator("#score-chart")).to_have_attribute("style", re.compile(r"height"))  # Chart.js drew it
    page.get_by_label(re.compile(r"^Compare node-3 with")).select_option("node-1")  # why-not, through htmx
    expect(page.locator("#why-not-result")).to_contain_text("node-1 scored")
    watched.settle()
    watched.visit(f"/cycles/{cycle.id}/?why_not=node-5")
    expect(page.locator("#why-not-result")).to_contain_text("node-5 was excluded before scoring")
    watched.visit(f"/cycles/{cycle.id}/what-if/")
    page.get_by_label("ImageLocality").fill("0")
    page.locator("#whatif-custom").get_by_role("button", name="Replay").click()
    expect(page.locator("#whatif-result")).to_contain_text("Our highest score would move")
    watched.settle()
    watched.visit("/nodes/")
    expect(page.get_by_role("heading", name=re.compile(r"^Traffic received by"))).to_be_visible()
    watched.visit("/health/")
    expect(page.locator("table.verbs")).to_contain_text("prioritize")
    watched.visit("/pending/")
    expect(page.locator("#pending-list")).to_contain_text("waiting")
    # The balance page with one sample, as the outcome job leaves them.
    BalanceSample.objects.create(
        at=timezone.now(),
        profile="default",
        nodes=2,
        mean_bytes=2e6,
        stdev_bytes=1e6,
        cv=0.5,
        max_bytes=3e6,
        min_bytes=1e6,
        max_over_min=3.0,
        window_seconds=300,
    )
    watched.visit("/balance/")
    expect(page.locator("#balance-samples")).to_contain_text("0.50")
    expect(page.locator("#balance-chart")).to_have_attribute("style", re.compile(r"height"))  # Chart.js drew it
    # History replays: the form and the list, then a finished replay's report with its chart.
    replay = history_replay_start(
        selection={"last": "10"}, candidate_profile="gpu-aware", created_by="demo", runner="none"
    )
    history_replay_run(replay.pk)
    watched.visit("/replays/")
    expect(page.locator(f'#replay-list tr[data-id="{replay.pk}"]')).to_contain_text("Done")
    watched.visit(f"/replays/{replay.pk}/")
    expect(page.locator("#replay-status")).to_have_text("Done")
    expect(page.locator("#placements-chart")).to_have_attribute("style", re.compile(r"height"))

    # The browsable API (a browser asks for text/html first, so DRF answers its HTML page).
    watched.visit("/api/v1/cycles/")
    expect(page.locator(".response-info")).to_contain_text("HTTP 200 OK")
    expect(page.locator(".response-info")).to_contain_text("web-7d9f")
    page.get_by_role("button", name="Filters").click()  # Bootstrap's modal with the filter form
    expect(page.locator("#filtersModal")).to_be_visible()
    watched.settle()
    watched.screenshot("api-browsable-cycles-filters")
    watched.visit(f"/api/v1/cycles/{cycle.id}/")
    expect(page.locator(".response-info")).to_contain_text("HTTP 200 OK")
    watched.visit("/api/v1/why/?namespace=shop&name=web-7d9f")
    expect(page.locator(".response-info")).to_contain_text("HTTP 200 OK")
    expect(page.locator(".response-info")).to_contain_text("node-3")
    watched.visit("/api/v1/nodes/?ordering=-placements")  # the current ordering is marked in the filters dialog
    expect(page.locator(".response-info")).to_contain_text("HTTP 200 OK")
    watched.screenshot("api-browsable-nodes")

    # Swagger UI (last: without its script nothing else on the page can be checked): drawn from the schema the
    # demo user may read, with its assets and its initialisation from the app.
    watched.visit("/api/docs/")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("schedlens audit API")
    operations = page.locator(".swagger-ui .opblock")
    expect(operations.first).to_be_visible()
    operations.first.locator(".opblock-summary").click()  # open one operation: parameters and responses render
    expect(operations.first.locator(".opblock-body")).to_be_visible()
    watched.settle()
    watched.screenshot("api-docs")

    watched.assert_clean()
