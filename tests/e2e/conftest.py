"""End-to-end fixtures: Debian's Chromium driven by Playwright (never a downloaded browser), the app in-process.

The app is served by pytest-django's ``live_server`` (a threaded WSGI server in this process) over a committed
test database, so the cycles a test records through the verbs are what the browser sees.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.paths import ARTIFACTS

CHROMIUM = Path(os.environ.get("SCHEDLENS_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
PASSWORD = "correct horse battery staple"


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """Chromium for one test module.

    While Playwright's sync API is up, an event loop runs on this thread, so Django would refuse the ORM calls
    made beside it (the tests', and the flush after each transactional test). They are allowed for exactly as
    long as Playwright is up; the module's last teardown stops it and restores the check for later modules.
    """
    assert CHROMIUM.exists(), f"Debian chromium is expected at {CHROMIUM} (scripts/ensure-services.sh installs it)"
    from playwright.sync_api import sync_playwright

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        with sync_playwright() as playwright:
            chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            yield chromium
            chromium.close()


@pytest.fixture
def page(browser, request):
    """A fresh browser context per test, in a time zone other than UTC, failing on any CSP violation."""
    context = browser.new_context(viewport={"width": 1440, "height": 1000}, timezone_id="Asia/Kolkata")
    page = context.new_page()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if "Content Security Policy" in m.text else None)
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    page.set_default_timeout(15_000)
    yield page
    context.close()
    assert problems == [], f"the browser reported: {problems}"


@pytest.fixture
def screenshot(page):
    ARTIFACTS.mkdir(exist_ok=True)

    def take(name: str) -> Path:
        path = ARTIFACTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return take


@pytest.fixture
def operator_login(page, live_server, django_user_model):
    django_user_model.objects.create_user(username="olga", password=PASSWORD)

    def login(next_path: str = "/") -> None:
        page.goto(f"{live_server.url}{next_path}")
        page.get_by_label("User name").fill("olga")
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Log in").click()

    return login
