"""The balance page before the outcome job has measured anything, in Debian's Chromium: one plain statement of that,
and no empty chart frame or table of headers alone."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_balance_page_says_plainly_that_nothing_is_sampled_yet(page, operator_login, screenshot) -> None:
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)

    operator_login("/balance/")

    empty = page.locator("#balance-empty")
    expect(empty.get_by_role("heading")).to_have_text("Nothing sampled in the last 6 h")
    expect(empty).to_contain_text("No placement has been measured yet in this period")
    expect(page.locator("canvas, .chart-box")).to_have_count(0)
    expect(page.locator("table")).to_have_count(0)
    screenshot("balance-empty")
    assert errors == []
