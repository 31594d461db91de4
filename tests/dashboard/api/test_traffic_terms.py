"""The traffic window and staleness limit a cycle is explained with: the same on the why API and the decision page.

The record carries the traffic measured and its age, and the version of the profile that decided (its digest), not
the window (``timeRangeInMinutes``) nor the limit (``maxStalenessSeconds``): those come from that recorded version,
whatever the profiles file says now; a cycle recorded before versions were kept says so instead of showing a default
or today's file.
"""

from __future__ import annotations

import html
import re

import pytest
from django.urls import reverse

from dashboard.models import SchedulingCycle
from tests.support.kube_scheduler import PROFILES, T0

ONLY_DEFAULT = PROFILES.split("- name: gpu-aware")[0]


def decision_page(client, auditor, cycle_id: int) -> str:
    client.force_login(auditor)
    response = client.get(reverse("ui:decision", args=[cycle_id]))
    assert response.status_code == 200
    return html.unescape(response.content.decode())


def shown(body: str, element_id: str) -> str:
    found = re.search(rf'id="{element_id}"[^>]*>(.*?)</', body, re.S)
    assert found is not None, element_id
    return found.group(1).strip()


@pytest.mark.django_db
def test_a_profile_no_longer_configured_is_explained_by_the_version_it_recorded(
    api, client, auditor, kube_scheduler, settings, tmp_path
):
    cycle = kube_scheduler.schedule(at=T0, name="trainer", profile="gpu-aware", gpu=True)
    assert cycle.chosen_node
    version = kube_scheduler.profiles["gpu-aware"].version()
    assert cycle.profile_version == version
    config = tmp_path / "now.yaml"
    config.write_text(ONLY_DEFAULT, encoding="utf-8")
    settings.SCHEDLENS_CONFIG = str(config)

    explanation = api.get("/api/v1/why/", {"namespace": "shop", "name": "trainer"}).json()["explanation"]
    assert explanation["traffic_terms"] == {
        "window_minutes": 5,
        "max_staleness_seconds": 120.0,
        "source": "recorded",
        "unknown": "",
        "profile": "gpu-aware",
        "version": version,
    }
    assert explanation["metric_stale"] is False

    body = decision_page(client, auditor, cycle.id)
    assert shown(body, "traffic-window") == f"5 min (profile 'gpu-aware' version {version}, as recorded)"
    assert explanation["metric_staleness"] in body
    assert explanation["summary"] in body


@pytest.mark.django_db
def test_a_cycle_recorded_before_versions_were_kept_says_so_on_both_screens(api, client, auditor, kube_scheduler):
    cycle = kube_scheduler.schedule(at=T0, name="web-0")
    SchedulingCycle.objects.filter(pk=cycle.pk).update(profile_version="")  # as the ingester wrote it before

    explanation = api.get("/api/v1/why/", {"namespace": "shop", "name": "web-0"}).json()["explanation"]
    unknown = "not recorded; recorded before profile versions were kept"
    assert explanation["traffic_window_minutes"] is None
    assert explanation["traffic_terms"] == {
        "window_minutes": None,
        "max_staleness_seconds": None,
        "source": "",
        "unknown": unknown,
        "profile": "default",
        "version": "",
    }
    assert explanation["metric_stale"] is None
    assert explanation["metric_staleness"] == (
        f"Traffic was measured 0 s before the decision; whether that was stale is not known: maxStalenessSeconds"
        f" {unknown}."
    )

    body = decision_page(client, auditor, cycle.id)
    assert shown(body, "traffic-window") == unknown
    assert shown(body, "profile-version") == "recorded before profile versions were kept"
    assert "as configured now" not in body, "today's file is not passed off as the cycle's"

    what_if = html.unescape(client.get(reverse("ui:what-if", args=[cycle.id])).content.decode())
    # The replay needs a window to turn bytes into a rate: it takes the default, and says it is an assumption.
    assert shown(what_if, "whatif-window") == f"{unknown}; replayed as if 5 min, timeRangeInMinutes' default"


@pytest.mark.django_db
def test_a_recorded_version_gives_both_screens_its_window_and_limit(api, client, auditor, kube_scheduler):
    cycle = kube_scheduler.schedule(at=T0, name="web-1")
    version = kube_scheduler.profiles["default"].version()

    explanation = api.get("/api/v1/why/", {"namespace": "shop", "name": "web-1"}).json()["explanation"]
    assert explanation["traffic_window_minutes"] == 5
    assert explanation["traffic_terms"] == {
        "window_minutes": 5,
        "max_staleness_seconds": 120.0,
        "source": "recorded",
        "unknown": "",
        "profile": "default",
        "version": version,
    }
    assert explanation["metric_stale"] is False
    assert explanation["metric_staleness"] == (
        "Traffic was measured 0 s before the decision, within maxStalenessSeconds"
        f" (120 s, profile 'default' version {version}, as recorded)."
    )

    body = decision_page(client, auditor, cycle.id)
    assert shown(body, "traffic-window") == f"5 min (profile 'default' version {version}, as recorded)"
    assert explanation["metric_staleness"] in body
    assert explanation["summary"] in body


@pytest.mark.django_db
def test_a_broken_profiles_file_leaves_the_why_api_explaining_by_the_recorded_version(
    api, kube_scheduler, settings, tmp_path
):
    kube_scheduler.schedule(at=T0, name="web-1")
    config = tmp_path / "broken.yaml"
    config.write_text("profiles: []\n", encoding="utf-8")
    settings.SCHEDLENS_CONFIG = str(config)

    response = api.get("/api/v1/why/", {"namespace": "shop", "name": "web-1"})
    assert response.status_code == 200
    terms = response.json()["explanation"]["traffic_terms"]
    assert (terms["window_minutes"], terms["source"], terms["unknown"]) == (5, "recorded", "")
