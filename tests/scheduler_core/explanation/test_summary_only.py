"""The ``Explained`` Event's summary, computed without explaining every node, is ``explain(...).summary`` exactly.

``scheduler_core.explanation.explain.explain_summary`` builds only the nodes the sentence names; the decision page and
the why API show ``explain(...).summary``. Two sources of cycles:

- the real extender verbs on the generated cycles of ``tests.support.explained_cycles`` (herd binds, ties, stale and
  missing metrics, both answer scales), each summarized as bound to every candidate in turn, to none and to a node
  the extender never saw (kube-scheduler's own scores may outweigh ours), with and without an error and a window;
- records generated directly, for what the verbs seldom or never write: nodes the node cache does not know,
  nodes prioritized that were never filtered, answers that disagree with the finals, a prioritize call without a
  filter call or the other way round, more excluded nodes than the summary lists, reasons that start with "node ",
  unreadable records.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import msgspec
from hypothesis import example, given, settings
from hypothesis import strategies as st

from scheduler_core.explanation.explain import explain, explain_summary
from scheduler_core.extender.record.structs import NODE_CACHE, FilterRecord, PrioritizeRecord
from tests.support.explained_cycles import (
    ALL_ZERO,
    HALF_UP_FIXED,
    HERD_TIE,
    NEAR_TIE_FIXED,
    PROPERTY,
    STALE_FAIL,
    TINY_MAXIMUM,
    Scenario,
    record_cycle,
    scenarios,
)
from tests.support.explanation_checks import IMAGES, RESOURCES, TRAFFIC

RecordT = TypeVar("RecordT", FilterRecord, PrioritizeRecord)


def typed(record: dict[str, Any] | None, kind: type[RecordT]) -> RecordT | None:
    """The record as a reader gets it: typed, or None when it has none or it does not read as the engine's."""
    try:
        return msgspec.convert(record, kind) if record else None
    except msgspec.ValidationError:
        return None


def assert_same_summary(
    filter_record: dict[str, Any] | None,
    prioritize_record: dict[str, Any] | None,
    chosen: Sequence[str],
    *,
    errors: Sequence[str] = ("", "bind refused"),
    windows: Sequence[int | None] = (None, 5),
) -> None:
    filtered, scored = typed(filter_record, FilterRecord), typed(prioritize_record, PrioritizeRecord)
    for chosen_node in chosen:
        for error in errors:
            for window in windows:
                args = {
                    "filter_record": filtered,
                    "prioritize_record": scored,
                    "chosen_node": chosen_node,
                    "error": error,
                    "traffic_window_minutes": window,
                }
                assert explain_summary(**args) == explain(**args).summary, args


# --- cycles the real verbs recorded ------------------------------------------------------------------------------


@PROPERTY
@given(scenario=scenarios())
@example(scenario=ALL_ZERO)
@example(scenario=STALE_FAIL)
@example(scenario=HERD_TIE)
@example(scenario=HALF_UP_FIXED)
@example(scenario=NEAR_TIE_FIXED)
@example(scenario=TINY_MAXIMUM)
def test_the_summary_of_recorded_cycles_is_the_explanations(scenario: Scenario) -> None:
    recorded = record_cycle(scenario)
    records = {e.verb: msgspec.to_builtins(getattr(e, e.verb)) for e in recorded.events if e.verb != "bind"}
    chosen = ["", recorded.chosen, "not-a-candidate", *(n.name for n in scenario.nodes)]
    assert_same_summary(records.get("filter"), records.get("prioritize"), list(dict.fromkeys(chosen)))


# --- records generated directly ----------------------------------------------------------------------------------

FINALS = (0.0, 12.5, 25.0, 49.9999, 50.0, 72.0, 71.5, 99.0001, 100.0)
"""Few values, so equal finals and equal answers come up often."""
REASONS = ("node does not enable example.com/gpu", "traffic above threshold", "node is not ready")
_FILTERS = (
    ("TrafficThreshold", "node traffic above threshold"),
    ("NodeResourceFitByCR", REASONS[0]),
    ("NodeReady", REASONS[2]),
    ("TrafficThreshold", REASONS[1]),
    (NODE_CACHE, "node unknown to the node cache"),
)
_Records = tuple[dict[str, Any] | None, dict[str, Any] | None, list[str]]
"""A filter and a prioritize record as the ingester stores them, and the nodes to try as the bound one."""


@st.composite
def plugin_scores(draw: st.DrawFn, name: str, count: int) -> dict[str, Any]:
    scores = draw(st.lists(st.sampled_from((0.0, 25.0, 50.0, 59.4632, 100.0)), min_size=count, max_size=count))
    plugin: dict[str, Any] = {"name": name, "weight": draw(st.integers(1, 5)), "scores": scores}
    if not draw(st.integers(0, 5)):
        plugin |= {"applicable": False, "note": "the pod requests nothing it scores"}
    if name == TRAFFIC:
        raw = st.none() | st.sampled_from((0.0, 1e6, 2.5e6, 3.2e7)) | st.floats(0, 5e9)
        plugin["raw"] = draw(st.lists(raw, min_size=count, max_size=count)) if draw(st.integers(0, 4)) else []
        if draw(st.booleans()):
            plugin["herd_bytes"] = draw(st.lists(st.sampled_from((0.0, 3e8, 1_234_567.0)), min_size=count))[:count]
            if draw(st.integers(0, 3)):  # else a record from before the binds were counted
                plugin["herd_binds"] = draw(st.lists(st.integers(0, 4), min_size=count, max_size=count))
            if draw(st.booleans()):
                plugin["herd_newest_age_ms"] = draw(st.lists(st.none() | st.integers(0, 60_000), max_size=count))
        plugin["missing_score"] = draw(st.sampled_from((None, 0.0, 50.0)))
        top = max((r for r in plugin["raw"] if r is not None), default=0.0)
        if top and draw(st.booleans()):  # the scores the raw bytes give (else unrelated ones)
            plugin["scores"] = [50.0 if r is None else round(100 - r * 100 / top, 4) for r in plugin["raw"]]
        plugin["metric_age_seconds"] = draw(st.none() | st.floats(0, 900))
        if not draw(st.integers(0, 4)):
            plugin["note"] = "no traffic data yet"
    elif name == RESOURCES and draw(st.booleans()):
        plugin["requested"] = ["example.com/gpu"]
        plugin["inputs"] = {"example.com/gpu": draw(st.lists(st.none() | st.floats(-20, 130), max_size=count))}
        plugin["raw"] = draw(st.lists(st.none() | st.floats(-20, 130), max_size=count))
    elif name == IMAGES and draw(st.booleans()):
        plugin["requested"] = ["docker.io/library/redis:7", "docker.io/library/busybox:latest"]
        plugin["raw"] = draw(st.lists(st.none() | st.sampled_from((0.0, 1.0, 2.0)), max_size=count))
    return plugin


@st.composite
def records(draw: st.DrawFn) -> _Records:
    """A filter and a prioritize record as the ingester stores them (either may be missing or unreadable), and the
    nodes to try as the bound one."""
    names = [f"n-{i:02d}" for i in range(draw(st.integers(0, 14)))]
    filter_record: dict[str, Any] | None = None
    passed = names
    if draw(st.integers(0, 5)):
        failing = draw(st.lists(st.sampled_from(names), unique=True)) if names else []
        passed = [n for n in names if n not in failing]
        if passed and not draw(st.integers(0, 3)):  # one feasible node: kube-scheduler skips prioritize
            passed = passed[:1]
            failing = [n for n in names if n not in passed]
        failures = {n: dict(draw(st.lists(st.sampled_from(_FILTERS), min_size=1, unique=True))) for n in failing}
        filter_record = {
            "nodes": names,
            "passed": passed,
            "failures": failures,
            "details": {n: {"TrafficThreshold": "150.0 MB/s"} for n in failing if draw(st.booleans())},
            "unresolvable": [n for n in failing if draw(st.booleans())],
            "traffic_bytes": draw(st.lists(st.none() | st.floats(0, 5e9), max_size=len(names))),
            "metric_age_seconds": draw(st.none() | st.floats(0, 900)),
            "metric_note": draw(st.sampled_from(("", "no traffic data yet", "metrics stale"))),
        }
    prioritize_record: dict[str, Any] | None = None
    if draw(st.integers(0, 5)):
        scored = list(passed) if draw(st.integers(0, 4)) else draw(st.permutations(names))[: draw(st.integers(0, 3))]
        scored += ["not-filtered"] if not draw(st.integers(0, 2)) else []  # prioritized, never filtered
        count = len(scored)
        plugins = [draw(plugin_scores(name, count)) for name in draw(st.permutations([TRAFFIC, RESOURCES, IMAGES]))]
        plugins = plugins[: draw(st.integers(1, 3))]
        finals = draw(st.lists(st.sampled_from(FINALS), min_size=count, max_size=count))
        if draw(st.booleans()):  # the weighted mean of the scores (else unrelated finals)
            applicable = [p for p in plugins if p.get("applicable", True)]
            weights = sum(p["weight"] for p in applicable)
            sums = [sum(p["scores"][i] * p["weight"] for p in applicable) for i in range(count)]
            finals = [round(total / weights, 4) if weights else 0.0 for total in sums]
        extender = [int(f / 10 + 0.5) for f in finals]
        if not draw(st.integers(0, 4)):  # answers that do not follow from the finals (another scale, a bug)
            extender = draw(st.lists(st.integers(0, 10), min_size=count, max_size=count))
        unknown = [n for n in scored if not draw(st.integers(0, 6))]
        if unknown:
            notes = dict.fromkeys(unknown, "node unknown to the node cache")
            plugins.append({"name": NODE_CACHE, "weight": 0, "scores": [0.0] * count, "notes": notes})
            plugins[-1]["applicable"] = False
        prioritize_record = {
            "nodes": scored,
            "plugins": plugins,
            "final": finals,
            "extender": extender,
            "answer_scale": draw(st.sampled_from(("fixed", "spread"))),
            "extender_weight": draw(st.sampled_from((0, 1, 10))),
        }
    if not draw(st.integers(0, 12)):
        filter_record = {"nodes": "unreadable"}  # a refused call's: counts as absent
    return filter_record, prioritize_record, ["", "not-a-candidate", "not-filtered", *names]


def _traffic_cycle(raw: list[float], herd: list[float], binds: list[int], newest_ms: list[int | None]) -> _Records:
    """Two or more nodes scored on traffic alone, with recent binds weighing on some (as the verbs record them)."""
    names = [f"t-{i}" for i in range(len(raw))]
    estimates = [r + h for r, h in zip(raw, herd, strict=True)]
    scores = [round(100 - e * 100 / max(estimates), 4) for e in estimates]
    traffic = {
        "name": TRAFFIC,
        "weight": 1,
        "scores": scores,
        "raw": raw,
        "herd_bytes": herd,
        "herd_binds": binds,
        "herd_newest_age_ms": newest_ms,
    }
    answers = [int(s / 10 + 0.5) for s in scores]
    prioritize = {"nodes": names, "plugins": [traffic], "final": scores, "extender": answers}
    return {"nodes": names, "passed": names}, prioritize, ["", *names]


ONLY_ONE_PASSED: _Records = (
    {"nodes": ["a", "b"], "passed": ["a"], "failures": {"b": {"TrafficThreshold": REASONS[1]}}},
    None,
    ["", "a", "b"],
)
"""kube-scheduler skips prioritize for a single feasible node."""
LOWEST_WITH_HERD = _traffic_cycle([1e6, 2e6, 3e6], [3e5, 0.0, 0.0], [1, 0, 0], [2200, None, None])
"""The winner's lead is its traffic, part of it assumed for a recent bind."""
HERD_MOVED = _traffic_cycle([1e6, 1.2e6], [5e8, 0.0], [1, 0], [35, None])
"""On measured bytes alone t-0 leads; one recent bind there moves our preference to t-1."""


@settings(max_examples=300, deadline=None, database=None)
@given(cycle=records())
@example(cycle=ONLY_ONE_PASSED)
@example(cycle=LOWEST_WITH_HERD)
@example(cycle=HERD_MOVED)
def test_the_summary_of_generated_records_is_the_explanations(cycle: _Records) -> None:
    filter_record, prioritize_record, chosen = cycle
    assert_same_summary(filter_record, prioritize_record, chosen, windows=(5,))
