"""The decision page's "What happened next" and the balance page, on the placements of ``placed`` (conftest)."""

from __future__ import annotations

import re

import pytest

from dashboard.outcomes.services import outcomes_refresh
from tests.dashboard.outcomes.conftest import at
from tests.support.kube_scheduler import TRAFFIC, KubeScheduler
from tests.support.outcome_data import ATTRIBUTED_POD, NODE_RATES

pytestmark = [pytest.mark.prometheus, pytest.mark.usefixtures("outcome_settings")]


@pytest.fixture
def signed_in(client, django_user_model):
    client.force_login(django_user_model.objects.create_user(username="olga", password="not-used"))
    return client


def text(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def section(html: str, ident: str) -> str:
    match = re.search(rf'<section id="{ident}".*?</section>', html, re.S)
    assert match, f"no section {ident}"
    return text(match.group(0))


def test_the_decision_page_says_what_happened_next_with_the_figures_it_adds_up_from(signed_in, placed):
    html = signed_in.get(f"/cycles/{placed['node-2']}/").content.decode()

    shown = section(html, "outcome")
    assert "The decision estimated 1.0 MB over 5 min for node-2: 1.0 MB measured + 0 B assumed" in shown
    assert NODE_RATES["node-2"] * 60 == 600_000
    # 1 min: estimated 1.0 MB × 60 / 300 = 200.0 kB, received 600.0 kB, error (600 − 200) / 200 = +200.0 %;
    # node-3 received 300.0 kB, quieter; node-4 3.0 MB.
    assert "60 s 200.0 kB 600.0 kB +200.0 % 300.0 kB (quieter) 3.0 MB" in shown
    assert "A runner-up ended the last 15 min quieter: node-3." in shown


def test_each_runner_up_s_bytes_are_under_its_own_name_in_the_order_the_decision_ranked_them(signed_in, anchor, db):
    """node-4 ranked above node-3 when the extender decided (it was quieter then): its column comes first, and each
    column holds that node's own bytes, whatever order the database keeps the outcome's keys in."""
    swapped = KubeScheduler({**TRAFFIC, "node-3": TRAFFIC["node-4"], "node-4": TRAFFIC["node-3"]})
    cycle = swapped.schedule(at=at(anchor - 17 * 60), name=ATTRIBUTED_POD, nodes=["node-2", "node-3", "node-4"])
    outcomes_refresh(now=anchor)

    shown = section(signed_in.get(f"/cycles/{cycle.id}/").content.decode(), "outcome")
    assert "Error node-4 (runner-up) node-3 (runner-up) Pod estimated" in shown
    assert NODE_RATES["node-4"] * 60 == 3_000_000
    assert NODE_RATES["node-3"] * 60 == 300_000
    assert "60 s 200.0 kB 600.0 kB +200.0 % 3.0 MB 300.0 kB (quieter)" in shown


def test_the_decision_page_of_a_cycle_without_an_outcome_says_why(signed_in, kube_scheduler, anchor, db):
    cycle = kube_scheduler.schedule(at=at(anchor - 10), name="fresh-1", nodes=["node-2", "node-3"])
    shown = section(signed_in.get(f"/cycles/{cycle.id}/").content.decode(), "outcome")
    assert "No outcome yet: the first window after the bind has not passed" in shown


def test_the_balance_page_shows_the_spread_the_quietest_share_and_the_error_per_workload_kind(signed_in, placed):
    response = signed_in.get("/balance/?hours=6")

    assert response.status_code == 200
    html = response.content.decode()
    quietest = text(re.search(r'<table id="balance-quietest">.*?</table>', html, re.S).group(0))
    assert "default 1 2 50 %" in quietest
    errors = text(re.search(r'<table id="balance-errors">.*?</table>', html, re.S).group(0))
    assert "Deployment default 1" in errors
    samples = text(re.search(r'<table id="balance-samples">.*?</table>', html, re.S).group(0))
    assert "default 2 2.2 MB 750.0 kB 0.33 3.0 MB 1.5 MB 2.0" in samples


def test_a_bad_balance_period_is_a_400_naming_it(signed_in, db):
    response = signed_in.get("/balance/?hours=forever")
    assert response.status_code == 400
    assert b"hours" in response.content
