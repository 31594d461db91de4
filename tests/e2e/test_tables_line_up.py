"""Every dashboard page with data, in Debian's Chromium: each table's rows line up under its header, and no page logs a
console error.

A table is checked as a reader sees it: every row of its body has as many cells as its header (counting colspan), and
each cell lies, horizontally, within the header cell(s) above it (1 px allowed for rounding). A table styled as
something else (a CSS grid, a flex box) draws its rows beside or apart from the header, and fails.

The data is recorded once for the module (``tests.support.every_page``) and served by a live server of the module's
own, so that one page's case does not record it all again: the database is committed to, and flushed when the module
ends, as a transactional test's is.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connections
from django.test import override_settings
from pytest_django.live_server_helper import LiveServer

from tests.e2e.conftest import PASSWORD
from tests.support.every_page import EveryPage, every_page_settings, record_every_page
from tests.support.outcome_data import outcome_series
from tests.support.prometheus_server import start_prometheus

# django_db: pytest-django sets the test database up only for the tests that ask for it. Each case's own transaction
# is not where the data is (the module's fixture committed it), and the pages are served from other threads.
pytestmark = [pytest.mark.prometheus, pytest.mark.django_db]

WITHOUT_IMAGE_LOCALITY = (
    "mode=custom&w_NetworkTraffic=3&w_NodeResourceFitByCR=1&w_ImageLocality=0&f_TrafficThreshold=on"
    "&f_NodeResourceFitByCR=on"
)
"""The custom what-if form as an operator submits it: the demo's default profile with ImageLocality off."""

PAGES: dict[str, Callable[[EveryPage], str]] = {
    "history": lambda d: "/",
    "decision with an outcome": lambda d: f"/cycles/{d.outcome_cycle}/",
    "decision, why not the runner-up": lambda d: f"/cycles/{d.outcome_cycle}/?why_not={d.runner_up}",
    "decision of the demo history": lambda d: f"/cycles/{d.demo_cycle}/",
    "what-if with other weights": lambda d: f"/cycles/{d.demo_cycle}/what-if/?{WITHOUT_IMAGE_LOCALITY}",
    "what-if under gpu-aware": lambda d: f"/cycles/{d.demo_cycle}/what-if/?mode=profile&profile=gpu-aware",
    "what-if with learned traffic": lambda d: f"/cycles/{d.outcome_cycle}/what-if/?learning=on",
    "nodes": lambda d: "/nodes/",
    "profiles": lambda d: "/profiles/",
    "replays": lambda d: "/replays/",
    "replay": lambda d: f"/replays/{d.replay}/",
    "balance": lambda d: "/balance/",
    "health": lambda d: "/health/",
    "pending": lambda d: "/pending/",
    "pending pod": lambda d: f"/pending/{d.pending_pod}/",
}
"""Every page of ``dashboard/ui/urls.py`` (the fragments its pages poll for are drawn inside them)."""

TABLES_LINE_UP = """() => {
  // Tables inside a closed <details> are not laid out: open them so they are checked too.
  for (const details of document.querySelectorAll("details")) details.open = true;
  const shown = (el) => el.getClientRects().length > 0;
  const text = (cell) => cell.textContent.replace(/\\s+/g, " ").trim().slice(0, 40);
  const px = (x) => Math.round(x);
  const name = (table) => {
    const own = table.id ? `#${table.id}` : `table.${[...table.classList].join(".")}`;
    const heading = table.closest("section, .card")?.querySelector("h2, h3");
    return heading ? `${own} ("${heading.textContent.trim()}")` : own;
  };
  return [...document.querySelectorAll("table")].filter(shown).map((table) => {
    const problems = [];
    const head = table.tHead && table.tHead.rows[table.tHead.rows.length - 1];
    if (!head) return { table: name(table), problems: ["no header row"] };
    const columns = [];
    for (const cell of head.cells) {
      const box = cell.getBoundingClientRect();
      for (let i = 0; i < cell.colSpan; i++) columns.push({ left: box.left, right: box.right, text: text(cell) });
    }
    const rows = [...table.tBodies].flatMap((body) => [...body.rows]);
    rows.forEach((row, index) => {
      if (!shown(row)) return;
      const where = `row ${index + 1}`;
      const count = [...row.cells].reduce((sum, cell) => sum + cell.colSpan, 0);
      if (count !== columns.length) {
        problems.push(`${where} has ${count} cells under ${columns.length} header cells`);
        return;
      }
      let column = 0;
      for (const cell of row.cells) {
        const first = columns[column];
        const last = columns[column + cell.colSpan - 1];
        const box = cell.getBoundingClientRect();
        if (box.left < first.left - 1 || box.right > last.right + 1) {
          problems.push(
            `${where}: "${text(cell)}" spans x ${px(box.left)}..${px(box.right)}, ` +
            `its header "${first.text}" x ${px(first.left)}..${px(last.right)}`
          );
        }
        column += cell.colSpan;
      }
    });
    return { table: name(table), rows: rows.length, problems };
  });
}"""


@pytest.fixture(scope="module")
def served(browser, django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[tuple[str, EveryPage]]:
    """The pages' data, and the URL of a live server showing it.

    While Playwright is up this thread has a database connection of its own (see conftest's ``browser``), which a
    transactional test closes after itself: this fixture, set up after Chromium and so ended before it, closes it at
    the end of the module, or it would outlive the test database.
    """
    anchor = int(time.time())
    prometheus = start_prometheus(outcome_series(anchor), tmp_path_factory.mktemp("outcome-prometheus"))
    recorded = every_page_settings(spool_dir=tmp_path_factory.mktemp("spool"), prometheus_url=prometheus.url)
    try:
        with django_db_blocker.unblock(), override_settings(**recorded):
            try:
                data = record_every_page(anchor)
                User.objects.create_user(username="olga", password=PASSWORD)
                server = LiveServer("localhost")
                try:
                    yield server.url, data
                finally:
                    server.stop()
            finally:
                # What a transactional test's teardown does: the next module starts from an empty database.
                call_command("flush", interactive=False, verbosity=0)
                connections.close_all()
    finally:
        prometheus.stop()


@pytest.fixture(scope="module")
def signed_in(browser, served) -> dict[str, Any]:
    """The cookies of olga logged in through the login form, for each page's own browser context."""
    url, _ = served
    context = browser.new_context()
    page = context.new_page()
    page.goto(f"{url}/accounts/login/?next=/")
    page.get_by_label("User name").fill("olga")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.get_by_role("heading", name="Placement history").wait_for()
    state: dict[str, Any] = context.storage_state()
    context.close()
    return state


@pytest.mark.parametrize("page_name", PAGES)
def test_each_table_s_rows_line_up_under_its_header_and_the_page_logs_no_error(
    browser, served, signed_in, page_name: str
) -> None:
    url, data = served
    context = browser.new_context(
        viewport={"width": 1440, "height": 1000}, timezone_id="Asia/Kolkata", storage_state=signed_in
    )
    page = context.new_page()
    page.set_default_timeout(15_000)
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(f"uncaught exception: {exc}"))
    try:
        path = PAGES[page_name](data)
        response = page.goto(f"{url}{path}")
        assert response is not None
        assert response.status == 200, f"{path}: {response.status}"
        page.wait_for_load_state("networkidle")  # htmx's first swaps and Chart.js have drawn
        tables = page.evaluate(TABLES_LINE_UP)
    finally:
        context.close()

    assert tables, f"{path} shows no table"
    misaligned = [f"{t['table']}: {problem}" for t in tables for problem in t["problems"]]
    assert misaligned == [], f"{path}: rows not under their header:\n" + "\n".join(misaligned)
    assert errors == [], f"{path}: the browser logged:\n" + "\n".join(errors)
