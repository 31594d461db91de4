"""The what-if form: a scenario from a configured profile, or from weights and a threshold the operator types,
answered on the 0..10 scale the operator picks (``fixed`` or ``spread``; the cycle's own scale to begin with).

The replay itself is :mod:`scheduler_core.history_replay.what_if`, and the scenario the form starts from (the cycle as
recorded) is
:func:`scheduler_core.history_replay.scenarios.recorded_scenario`, the one a history replay uses; this module only
turns GET parameters into a :class:`~scheduler_core.history_replay.what_if.Scenario` and says which field is wrong when
one is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from django.http import QueryDict

from scheduler_core.extender.scoring.answer import ANSWER_SCALES
from scheduler_core.extender.scoring.plugins import FILTER_PLUGINS, SCORE_PLUGINS
from scheduler_core.extender.scoring.profiles import MAX_WEIGHT
from scheduler_core.extender.scoring.units import MB
from scheduler_core.history_replay.what_if import Scenario, scenario_from_profile


@dataclass(frozen=True, slots=True)
class WhatIfForm:
    scenario: Scenario
    mode: str
    """``profile`` or ``custom``."""
    profile: str
    errors: list[str]
    weights: list[tuple[str, int]]
    filters: list[tuple[str, bool]]
    threshold_mbps: float
    fail_on_missing: bool
    submitted: bool
    """True when the parameters named a valid scenario to replay."""
    answer_scale: str = ""
    """The scale the custom form offers: the submitted one, else the cycle's recorded one."""
    profile_answer_scale: str = ""
    """The scale the profile form asked for; empty: the chosen profile's own."""
    answer_scales: tuple[str, ...] = ANSWER_SCALES
    learning: str = ""
    """``on``: the herd bytes rebuilt with traffic learned per workload; ``off``: with the constant; empty: as
    recorded (``dashboard.replays.learning.learning_what_if``)."""


LEARNING_CHOICES = ("on", "off")


def _learning(params: QueryDict, errors: list[str]) -> str:
    learning = params.get("learning", "").strip()
    if learning and learning not in LEARNING_CHOICES:
        errors.append(f"learning: must be on (learned traffic) or off (the constant), got {learning[:20]!r}")
        return ""
    return learning


def _answer_scale(params: QueryDict, errors: list[str]) -> str:
    """The ``scale`` parameter: ``fixed``, ``spread`` or empty (not asked for)."""
    scale = params.get("scale", "").strip()
    if scale and scale not in ANSWER_SCALES:
        errors.append(f"scale: must be one of {', '.join(ANSWER_SCALES)}, got {scale[:20]!r}")
        return ""
    return scale


def parse_what_if(params: QueryDict, *, base: Scenario, profiles: Mapping[str, Mapping[str, Any]]) -> WhatIfForm:
    mode = params.get("mode", "profile")
    profile = params.get("profile", "")
    errors: list[str] = []
    scenario: Scenario | None = None
    scale = _answer_scale(params, errors)
    learning = _learning(params, errors)
    if mode == "profile" and profile:
        if profile in profiles:
            # The recorded raw bytes cover the recorded window, whatever window the other profile reads.
            scenario = replace(scenario_from_profile(profiles[profile]), window_seconds=base.window_seconds)
            if scale:  # else the profile's own scale
                scenario = replace(scenario, answer_scale=scale)
        else:
            errors.append(f"profile: unknown profile {profile!r}")
        if errors:
            scenario = None
    elif mode == "custom":
        weights: dict[str, int] = {}
        for name in sorted(SCORE_PLUGINS):
            raw = params.get(f"w_{name}", "").strip()
            if not raw:
                continue
            try:
                weight = int(raw)
            except ValueError:
                errors.append(f"w_{name}: weight must be a whole number, got {raw[:20]!r}")
                continue
            if not 0 <= weight <= MAX_WEIGHT:
                errors.append(f"w_{name}: weight must be 0..{MAX_WEIGHT}, got {weight}")
                continue
            weights[name] = weight
        filters = tuple(name for name in sorted(FILTER_PLUGINS) if params.get(f"f_{name}") == "on")
        threshold = base.max_bytes_per_second
        raw_threshold = params.get("threshold_mbps", "").strip()
        if raw_threshold:
            try:
                threshold = float(raw_threshold) * MB
            except ValueError:
                errors.append(f"threshold_mbps: must be a number of MB/s, got {raw_threshold[:20]!r}")
            else:
                if not threshold > 0 or threshold != threshold or threshold == float("inf"):
                    errors.append("threshold_mbps: must be a positive number of MB/s")
                    threshold = base.max_bytes_per_second
        if not errors:
            scenario = replace(
                base,
                filters=filters,
                weights=weights,
                max_bytes_per_second=threshold,
                fail_on_missing=params.get("fail_on_missing") == "on",
                label="custom",
                answer_scale=scale or base.answer_scale,
            )
    if scenario is None and learning and not errors:  # the decision as recorded, only the herd estimate changed
        what = "traffic learned per workload" if learning == "on" else "the constant assumedBytesPerPod"
        scenario = replace(base, label=f"{base.label}, herd estimate from {what}")
    shown = scenario or base
    return WhatIfForm(
        scenario=shown,
        mode=mode,
        profile=profile,
        errors=errors,
        weights=[(name, int(shown.weights.get(name, 0))) for name in sorted(SCORE_PLUGINS)],
        filters=[(name, name in shown.filters) for name in sorted(FILTER_PLUGINS)],
        threshold_mbps=round(shown.max_bytes_per_second / MB, 3),
        fail_on_missing=shown.fail_on_missing,
        submitted=scenario is not None,
        answer_scale=scale or base.answer_scale,
        profile_answer_scale=scale if mode == "profile" else "",
        learning=learning,
    )
