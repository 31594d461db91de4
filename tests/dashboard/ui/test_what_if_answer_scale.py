"""The what-if page offers the 0..10 answer scale (``fixed`` / ``spread``), starting from the cycle's own, and shows
the answers before and after."""

from __future__ import annotations

import math
import re

import pytest
from django.urls import reverse

from dashboard.models import SchedulingCycle
from dashboard.selectors.cycles import cycle_get_read
from dashboard.ui import presenters
from scheduler_core.extender.protocol.binding import SimulatedBinder
from scheduler_core.extender.scoring.answer import DEFAULT_ANSWER_SCALE
from scheduler_core.extender.scoring.profiles import load_profiles
from scheduler_core.extender.scoring.traffic_terms import TrafficTerms
from scheduler_core.extender.verbs import Extender
from tests.support.inputs import traffic_store
from tests.support.recording import CLUSTER, PROFILES, TRAFFIC, Recorder, make_pod

pytestmark = pytest.mark.django_db

MB = 1e6
NODES = ["node-1", "node-2", "node-3"]


def recorder_on(scale: str, traffic: dict[str, float] | None = None) -> Recorder:
    """The demo profiles, the ``default`` one answering on ``scale``."""
    text = PROFILES.read_text().replace("- name: gpu-aware", f"  answer: {{scale: {scale}}}\n- name: gpu-aware")
    profiles = load_profiles(text)
    assert profiles["default"].answer_scale == scale
    return Recorder(
        Extender(profiles, cluster=CLUSTER, traffic=traffic_store(traffic or TRAFFIC), binder=SimulatedBinder())
    )


def page(client, cycle: SchedulingCycle, params: dict[str, str] | None = None) -> str:
    response = client.get(reverse("ui:what-if", args=[cycle.id]), params or {})
    assert response.status_code == 200
    return response.content.decode()


def selected(body: str, select_id: str) -> str:
    match = re.search(rf'<select name="scale" id="{select_id}">(.*?)</select>', body, re.S)
    assert match, f"the {select_id} control"
    options = re.findall(r'<option value="([^"]*)"( selected)?', match.group(1))
    assert [value for value, _ in options if value] == ["fixed", "spread"]
    (chosen,) = [value for value, on in options if on]
    return chosen


def answers(body: str) -> dict[str, tuple[str, str]]:
    """Node → (answer before, answer after), from the result table."""
    rows = re.findall(r'<th scope="row">([\w-]+).*?</th>(.*?)</tr>', body, re.S)
    out = {}
    for node, cells in rows:
        numbers = re.findall(r'<td class="num">([^<]*)</td>', cells)
        out[node] = (numbers[-2], numbers[-1])
    return out


def recorded(cycle: SchedulingCycle) -> tuple[list[str], list[float], list[int]]:
    """The cycle's prioritize record as the dashboard reads it back: nodes, final scores, answers."""
    found = cycle_get_read(cycle_id=cycle.pk)
    assert found is not None
    decision = presenters.build_decision(found.cycle, found.calls, None, traffic_terms=TrafficTerms())
    prioritize = decision.prioritize_record
    assert prioritize is not None
    return prioritize.nodes, prioritize.final, prioritize.extender


def spread(finals: list[float]) -> list[int]:
    low, high = min(finals), max(finals)
    return [math.floor(10 * (f - low) / (high - low) + 0.5 + 1e-9) for f in finals]


def fixed(finals: list[float]) -> list[int]:
    return [math.floor(f / 10 + 0.5 + 1e-9) for f in finals]


@pytest.mark.parametrize("scale", ["fixed", "spread"])
def test_the_scale_control_starts_from_the_scale_the_cycle_answered_on(signed_in, dashboard_settings, scale):
    cycle = recorder_on(scale).schedule(make_pod(), nodes=NODES)

    body = page(signed_in, cycle)

    assert selected(body, "whatif-custom-scale") == scale
    assert selected(body, "whatif-profile-scale") == "", "another profile answers on its own scale unless asked"
    assert f'answered on the <strong id="whatif-recorded-scale">{scale}</strong> scale' in body
    assert 'id="whatif-result"' not in body


@pytest.mark.parametrize(("recorded_scale", "other"), [("fixed", "spread"), ("spread", "fixed")])
def test_the_other_scale_shows_the_answers_before_and_after(signed_in, dashboard_settings, recorded_scale, other):
    cycle = recorder_on(recorded_scale).schedule(make_pod(), nodes=NODES)
    nodes, finals, extender = recorded(cycle)
    params = {"mode": "custom", "w_NetworkTraffic": "3", "w_ImageLocality": "1", "w_NodeResourceFitByCR": "1"}
    params |= {"f_TrafficThreshold": "on", "f_NodeResourceFitByCR": "on", "threshold_mbps": "125", "scale": other}

    body = page(signed_in, cycle, params)

    assert f"Answer before ({recorded_scale})" in body
    assert f"Answer after ({other})" in body
    after = spread(finals) if other == "spread" else fixed(finals)
    assert after != extender, "the scales answer this cycle differently"
    shown = answers(body)
    assert {node: shown[node] for node in nodes} == {
        node: (str(a), str(b)) for node, a, b in zip(nodes, extender, after, strict=True)
    }
    assert selected(body, "whatif-custom-scale") == other, "the form keeps what was asked"
    assert 'id="whatif-answers"' in body
    if other == "spread":
        assert "the lowest final score among the candidates answers 0, only the highest answers 10" in body


def test_a_tie_the_fixed_scale_made_is_pointed_out_when_spread_breaks_it(signed_in, dashboard_settings):
    # Traffic alone tells them apart (no image, no GPU asked): 58 and 52 weigh ×3 of 4 → 43.5 and 39, both 4 on
    # the fixed scale; spread over 0..43.5 answers 10 and 9.
    traffic = {"node-1": 42 * MB, "node-2": 48 * MB, "node-6": 100 * MB}
    cycle = recorder_on("fixed", traffic).schedule(make_pod(), nodes=["node-1", "node-2", "node-6"])
    assert recorded(cycle)[1:] == ([43.5, 39.0, 0.0], [4, 4, 0])
    params = {"mode": "custom", "w_NetworkTraffic": "3", "w_ImageLocality": "1", "w_NodeResourceFitByCR": "1"}
    params |= {"f_TrafficThreshold": "on", "f_NodeResourceFitByCR": "on", "scale": "spread"}

    body = page(signed_in, cycle, params)

    assert answers(body)["node-1"] == ("4", "10")
    assert answers(body)["node-2"] == ("4", "9")
    assert "As recorded, our highest-scored node answered the same as a lower-scored one" in body
    body = page(signed_in, cycle, {**params, "scale": "fixed"})
    assert "Our highest-scored node would answer the same as a lower-scored one" in body


def test_another_profile_answers_on_its_own_scale_unless_one_is_chosen(signed_in, dashboard_settings):
    cycle = recorder_on("fixed").schedule(make_pod(), nodes=NODES)

    own = page(signed_in, cycle, {"mode": "profile", "profile": "default", "scale": ""})
    chosen = page(signed_in, cycle, {"mode": "profile", "profile": "default", "scale": "fixed"})

    # The configured demo profiles state no scale: the default one.
    assert f"Answer after ({DEFAULT_ANSWER_SCALE})" in own
    assert "Answer after (fixed)" in chosen
    assert selected(chosen, "whatif-profile-scale") == "fixed"


def test_a_bad_scale_is_named_and_nothing_is_replayed(signed_in, dashboard_settings):
    cycle = recorder_on("fixed").schedule(make_pod(), nodes=NODES)
    for mode in ({"mode": "custom", "w_NetworkTraffic": "3"}, {"mode": "profile", "profile": "default"}):
        body = page(signed_in, cycle, {**mode, "scale": "linear"})
        assert "scale: must be one of fixed, spread, got &#x27;linear&#x27;" in body
        assert 'id="whatif-result"' not in body
