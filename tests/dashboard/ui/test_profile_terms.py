"""What the cycle pages say when the profiles file is broken, and how they judge the traffic's age.

The pages read the profiles file for the profile list: a broken file must be named on the page, not a 500. A cycle's
filter columns, traffic window and staleness limit come from the profile version it recorded
(``dashboard.selectors.cycles.cycle_traffic_terms``), whatever the file says now.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from django.urls import reverse

from scheduler_core.extender.protocol.binding import SimulatedBinder
from scheduler_core.extender.scoring.profiles import ProfileError, load_profiles
from scheduler_core.extender.verbs import Extender
from tests.support.inputs import traffic_store
from tests.support.recording import CLUSTER, TRAFFIC, Recorder

pytestmark = pytest.mark.django_db

BROKEN = """
profiles:
- name: default
  plugins:
    score: {enabled: [{name: NetworkTraffic, weight: 0}]}
"""
CYCLE_PAGES = ["ui:decision", "ui:what-if"]


def text(response) -> str:
    return html.unescape(response.content.decode())


def broken_profiles(settings, tmp_path: Path, kind: str) -> str:
    """Point SCHEDLENS_CONFIG at a bad file; the message the pages must show."""
    if kind == "invalid":
        path = tmp_path / "broken.yaml"
        path.write_text(BROKEN, encoding="utf-8")
        with pytest.raises(ProfileError) as raised:
            load_profiles(BROKEN)
        message = str(raised.value)
        assert "field plugins.score.enabled.weight" in message
    else:
        path = tmp_path / "missing.yaml"
        message = str(path)
    settings.SCHEDLENS_CONFIG = str(path)
    return message


@pytest.mark.parametrize("kind", ["invalid", "missing"])
@pytest.mark.parametrize("name", ["ui:history", *CYCLE_PAGES])
def test_a_broken_profiles_file_is_named_on_the_page_with_a_503_not_a_500(
    signed_in, recorder, settings, tmp_path, name, kind
):
    cycle = recorder.schedule()
    message = broken_profiles(settings, tmp_path, kind)
    response = signed_in.get(reverse(name, args=[cycle.id] if name in CYCLE_PAGES else []))
    assert response.status_code == 503
    body = text(response)
    problem = re.search(r'<div class="error" role="alert" id="profiles-problem">(.*?)</div>', body, re.S)
    assert problem is not None, "the page names the problem"
    assert "The profiles configuration cannot be read" in problem.group(1)
    assert message in problem.group(1)
    assert cycle.pod_name in body, "the page still shows what the record holds"


def test_the_decision_still_shows_the_record_and_why_not_still_answers(signed_in, recorder, settings, tmp_path):
    cycle = recorder.schedule(nodes=["node-1", "node-2", "node-3"])
    broken_profiles(settings, tmp_path, "invalid")
    body = text(signed_in.get(reverse("ui:decision", args=[cycle.id])))
    assert "Placed on node-3" in body
    version = recorder.extender.profiles["default"].version()
    assert f"5 min (profile 'default' version {version}, as recorded)" in body, "the recorded version still explains"
    # The htmx fragment is answered from the record (the page around it names the problem): htmx swaps only a 2xx.
    fragment = signed_in.get(reverse("ui:why-not", args=[cycle.id]), {"why_not": "node-1"})
    assert fragment.status_code == 200
    assert "node-1 scored 3.6 points less than node-3" in text(fragment)


# --- staleness: the profile's maxStalenessSeconds, not a fixed 120 s ------------------------------------------------

STALENESS = """
profiles:
- name: default
  pluginConfig:
  - {{name: NetworkTraffic, args: {{maxStalenessSeconds: {limit}}}}}
  - {{name: TrafficThreshold, args: {{maxStalenessSeconds: {limit}}}}}
"""


def record_aged(settings, tmp_path: Path, *, limit: int, age: float) -> Recorder:
    """A recorder whose profile has ``limit`` as maxStalenessSeconds and whose snapshot is ``age`` seconds old."""
    config = STALENESS.format(limit=limit)
    path = tmp_path / "staleness.yaml"
    path.write_text(config, encoding="utf-8")
    settings.SCHEDLENS_CONFIG = str(path)
    extender = Extender(
        load_profiles(config), cluster=CLUSTER, traffic=traffic_store(TRAFFIC, age=age), binder=SimulatedBinder()
    )
    return Recorder(extender=extender)


def metric_age(body: str) -> str:
    found = re.search(r"<dt>Metric age</dt><dd[^>]*>(.*?)</dd>", body, re.S)
    assert found is not None
    return found.group(1)


def test_traffic_younger_than_the_profiles_limit_is_not_called_stale(signed_in, dashboard_settings, tmp_path):
    cycle = record_aged(dashboard_settings, tmp_path, limit=600, age=200).schedule(nodes=["node-1", "node-2"])
    body = text(signed_in.get(reverse("ui:decision", args=[cycle.id])))
    assert "stale" not in metric_age(body)
    assert "older than usual" not in body
    version = load_profiles(STALENESS.format(limit=600))["default"].version()
    assert (
        "Traffic was measured 200 s before the decision, within maxStalenessSeconds"
        f" (600 s, profile 'default' version {version}, as recorded)." in body
    )


def test_a_limit_lowered_since_leaves_the_verdict_to_the_recorded_limit(signed_in, dashboard_settings, tmp_path):
    cycle = record_aged(dashboard_settings, tmp_path, limit=600, age=200).schedule(nodes=["node-1", "node-2"])
    (tmp_path / "lowered.yaml").write_text(STALENESS.format(limit=150), encoding="utf-8")
    dashboard_settings.SCHEDLENS_CONFIG = str(tmp_path / "lowered.yaml")
    body = text(signed_in.get(reverse("ui:decision", args=[cycle.id])))
    assert "stale" not in metric_age(body)
    version = load_profiles(STALENESS.format(limit=600))["default"].version()
    assert (
        "Traffic was measured 200 s before the decision, within maxStalenessSeconds"
        f" (600 s, profile 'default' version {version}, as recorded)." in body
    )
    assert "150 s" not in body, "today's lowered limit does not judge a decision made under the recorded one"


def test_traffic_the_extender_refused_as_stale_is_called_stale(signed_in, dashboard_settings, tmp_path):
    cycle = record_aged(dashboard_settings, tmp_path, limit=60, age=90).schedule(nodes=["node-1", "node-2"])
    body = text(signed_in.get(reverse("ui:decision", args=[cycle.id])))
    assert "(stale)" in metric_age(body)
    version = load_profiles(STALENESS.format(limit=60))["default"].version()
    assert (
        "Traffic was measured 90 s before the decision, older than maxStalenessSeconds"
        f" (60 s, profile 'default' version {version}, as recorded): the extender scored without it (metrics stale)."
        in body
    )
