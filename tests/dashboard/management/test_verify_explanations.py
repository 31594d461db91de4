"""``manage.py verify_explanations``: every recorded cycle's explanation, recomputed from what it shows."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.support.kube_scheduler import T0

MINUTE = timedelta(minutes=1)
# Reads through the audit API or its explanations: its profiles and throttle counters at zero, as tests/dashboard/api/.
pytestmark = pytest.mark.usefixtures("api_settings")


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("verify_explanations", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


@pytest.mark.django_db
def test_every_recorded_cycle_is_recomputed_and_adds_up(kube_scheduler):
    for i in range(3):
        kube_scheduler.schedule(at=T0 + i * MINUTE, name=f"web-{i}")
    kube_scheduler.schedule(at=T0 + 3 * MINUTE, name="gpu-1", gpu=True, profile="gpu-aware")
    kube_scheduler.schedule(at=T0 + 4 * MINUTE, name="alone", nodes=["node-4"])
    assert run() == "ok: 5 cycles recomputed (5 with a prioritize call): 5 add up\n"
    assert run("--started-after", (T0 + 3 * MINUTE).isoformat(), "--limit", "1") == (
        "ok: 1 cycles recomputed (1 with a prioritize call): 1 add up\n"
    )


@pytest.mark.django_db
def test_a_cycle_whose_explanation_does_not_add_up_fails_the_command_and_is_named(kube_scheduler, monkeypatch):
    cycle = kube_scheduler.schedule(at=T0, name="web-1")
    from scheduler_core.explanation import figures

    # What a regression would do: show a maximum the scores were not normalized by.
    original = figures.TrafficColumn.figures

    def shifted(self, index, missing_reason):
        found = original(self, index, missing_reason)
        return type(found)(**{**{f: getattr(found, f) for f in found.__slots__}, "max_estimate_bytes": 1.0})

    monkeypatch.setattr(figures.TrafficColumn, "figures", shifted)
    err = io.StringIO()
    with pytest.raises(CommandError, match=r"1 cycles recomputed \(1 with a prioritize call\): 0 add up, 1 do not"):
        call_command("verify_explanations", stdout=io.StringIO(), stderr=err)
    assert f"cycle {cycle.id}: node-" in err.getvalue()
    assert "NetworkTraffic max_estimate_bytes shown as 1.0" in err.getvalue()


@pytest.mark.django_db
def test_a_bad_date_names_the_option():
    with pytest.raises(CommandError, match="--started-after: not an ISO 8601 date and time: 'yesterday'"):
        run("--started-after", "yesterday")
