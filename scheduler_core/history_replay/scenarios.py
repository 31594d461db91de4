"""The two scenarios a history replay compares: the one a cycle was recorded under, and the candidate.

:func:`recorded_scenario` is the scenario the decision page's what-if starts from too (``dashboard.ui.views``), so
that a page and a history replay replay a cycle "as recorded" alike. :func:`candidate_description` is what a report
says about its candidate, with the what-if parameters that fill the same settings in on a decision page.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from scheduler_core.extender.scoring.plugins import SCORE_PLUGINS
from scheduler_core.extender.scoring.profiles import profile_version
from scheduler_core.extender.scoring.traffic_terms import window_seconds
from scheduler_core.extender.scoring.units import MB
from scheduler_core.history_replay.report import CandidateDescription
from scheduler_core.history_replay.what_if import Scenario, scenario_from_profile


def recorded_scenario(
    description: Mapping[str, Any] | None,
    weights: Sequence[tuple[str, int]] | None,
    filters_seen: Sequence[str],
    *,
    answer_scale: str | None = None,
) -> Scenario:
    """The scenario a cycle was recorded under, as a history replay and the decision page's what-if
    (``dashboard.ui.views.what_if``, which then sets the page's window) both build it: the profile as configured now,
    else what the record says about filters; the weights the cycle's prioritize record used, which win over today's
    configuration (``weights``: its plugins' (name, weight), None without one); the scale it answered on
    (``answer_scale``: :attr:`~scheduler_core.history_replay.what_if.RecordedInputs.answer_scale`, None when it never
    reached prioritize: then the profile's scale as configured now)."""
    if description:
        scenario = scenario_from_profile(description, label=f"{description.get('name', '')} (as recorded)")
    else:
        scenario = Scenario(filters=tuple(filters_seen), weights={}, label="as recorded")
    if weights is not None:
        scenario = replace(scenario, weights=dict(weights))
    if answer_scale:
        scenario = replace(scenario, answer_scale=answer_scale)
    return replace(scenario, window_seconds=window_seconds((description or {}).get("pluginConfig", {})))


def candidate_description(
    description: Mapping[str, Any], *, source: str, profile_file: str = ""
) -> CandidateDescription:
    """What a report says about its candidate (``Profile.describe()`` of it), with the decision page's what-if
    parameters that fill the same settings in (``mode=custom``)."""
    scenario = scenario_from_profile(description)
    params: dict[str, str] = {"mode": "custom", "scale": scenario.answer_scale}
    for name in sorted(SCORE_PLUGINS):
        params[f"w_{name}"] = str(int(scenario.weights.get(name, 0)))
    for name in scenario.filters:
        params[f"f_{name}"] = "on"
    params["threshold_mbps"] = f"{scenario.max_bytes_per_second / MB:g}"
    if scenario.fail_on_missing:
        params["fail_on_missing"] = "on"
    return CandidateDescription(
        label=scenario.label,
        source=source,
        filters=list(scenario.filters),
        weights=dict(scenario.weights),
        max_bytes_per_second=scenario.max_bytes_per_second,
        fail_on_missing=scenario.fail_on_missing,
        answer_scale=scenario.answer_scale,
        what_if_params=params,
        version=profile_version(description),
        profile_file=profile_file,
    )
