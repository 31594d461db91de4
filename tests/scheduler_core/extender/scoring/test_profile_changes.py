"""What changed between two recorded versions of a profile, read as an operator says it: one line per plugin added or
removed, weight, arg or other field changed, each figure the one the versions recorded (so an auditor finds it again
in either version's normalized definition), and anything not understood still one line, in compact JSON."""

from __future__ import annotations

import json
from typing import Any

import pytest

from scheduler_core.extender.scoring.profile_changes import (
    ChangeKind,
    ChangeLine,
    in_reading_order,
    version_change_lines,
)
from scheduler_core.extender.scoring.profiles import load_profiles

BASE = """
profiles:
- name: web
  plugins:
    filter: {enabled: [{name: TrafficThreshold}, {name: NodeResourceFitByCR}]}
    score: {enabled: [{name: NetworkTraffic, weight: 3}]}
  pluginConfig:
  - {name: NetworkTraffic, args: {timeRangeInMinutes: 5}}
"""


def described(text: str) -> dict[str, Any]:
    return load_profiles(text)["web"].describe()


def edited(*replacements: tuple[str, str]) -> dict[str, Any]:
    text = BASE
    for old, new in replacements:
        assert old in text
        text = text.replace(old, new)
    return described(text)


def texts(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    return [line.text for line in version_change_lines(before, after)]


WEIGHT_5 = ("weight: 3", "weight: 5")
IMAGE_LOCALITY_2 = ("weight: 3}]", "weight: 3}, {name: ImageLocality, weight: 2}]")
WINDOW_10 = ("timeRangeInMinutes: 5", "timeRangeInMinutes: 10")
THRESHOLD_OFF = (
    "filter: {enabled: [{name: TrafficThreshold}, {name: NodeResourceFitByCR}]}",
    "filter: {enabled: [{name: NodeResourceFitByCR}], disabled: [{name: TrafficThreshold}]}",
)


def test_a_weight_raised_reads_as_that_plugin_s_weight_before_and_after() -> None:
    (line,) = version_change_lines(described(BASE), edited(WEIGHT_5))
    assert line.text == "NetworkTraffic weight 3 → 5"
    assert line == ChangeLine(
        kind=ChangeKind.WEIGHT_CHANGED,
        text="NetworkTraffic weight 3 → 5",
        plugin="NetworkTraffic",
        point="score",
        field="weight",
        before=3,
        after=5,
    )
    assert line.path == "score", "where the Definition holds it"


def test_a_plugin_added_to_score_names_its_weight() -> None:
    (line,) = version_change_lines(described(BASE), edited(IMAGE_LOCALITY_2))
    assert line.text == "ImageLocality added to score (weight 2)"
    assert (line.kind, line.plugin, line.point) == (ChangeKind.PLUGIN_ADDED, "ImageLocality", "score")
    assert (line.before, line.after) == (None, {"name": "ImageLocality", "weight": 2}), "the entry as recorded"


def test_a_plugin_removed_from_filter_is_one_line_without_its_args_going_with_it() -> None:
    before = described(BASE)
    assert "TrafficThreshold" in before["pluginConfig"]
    after = edited(THRESHOLD_OFF)
    assert texts(before, after) == ["TrafficThreshold removed from filter"]


def test_a_plugin_removed_from_score_names_the_weight_it_had() -> None:
    after = edited(
        (
            "score: {enabled: [{name: NetworkTraffic, weight: 3}]}",
            "score: {enabled: [{name: ImageLocality}], disabled: [{name: NetworkTraffic}]}",
        )
    )
    assert texts(described(BASE), after) == [
        "NetworkTraffic removed from score (weight 3)",
        "ImageLocality added to score (weight 1)",
    ]


def test_a_plugin_coming_into_use_shows_the_args_it_runs_with_as_recorded() -> None:
    after = described(BASE)
    lines = version_change_lines(edited(THRESHOLD_OFF), after)
    assert [line.kind for line in lines] == [ChangeKind.PLUGIN_ADDED, ChangeKind.ARG_ADDED]
    assert lines[0].text == "TrafficThreshold added to filter"
    args = after["pluginConfig"]["TrafficThreshold"]
    assert (lines[1].plugin, lines[1].field, lines[1].before, lines[1].after) == ("TrafficThreshold", "", None, args)
    assert lines[1].text.startswith("TrafficThreshold args {")
    assert json.loads(lines[1].text.removeprefix("TrafficThreshold args ")) == args, "every arg, in compact JSON"
    assert '"maxBytesPerSecond":125000000.0' in lines[1].text, "the figure as recorded, not reformatted"


def test_an_arg_changed_reads_as_the_plugin_s_arg_before_and_after() -> None:
    (line,) = version_change_lines(described(BASE), edited(WINDOW_10))
    assert line.text == "NetworkTraffic arg timeRangeInMinutes 5 → 10"
    assert (line.kind, line.plugin, line.point, line.field, line.before, line.after) == (
        ChangeKind.ARG_CHANGED,
        "NetworkTraffic",
        "",
        "timeRangeInMinutes",
        5,
        10,
    )
    assert line.path == "pluginConfig.NetworkTraffic.timeRangeInMinutes"


def test_a_threshold_reads_as_recorded() -> None:
    after = described(BASE + "  - {name: TrafficThreshold, args: {maxBytesPerSecond: 2000}}\n")
    assert texts(described(BASE), after) == ["TrafficThreshold arg maxBytesPerSecond 125000000.0 → 2000.0"]


def test_an_arg_left_out_at_its_default_added_and_removed_says_what_absent_means() -> None:
    learning = edited(("timeRangeInMinutes: 5}", "timeRangeInMinutes: 5, learnWorkloadTraffic: true}"))
    (added,) = version_change_lines(described(BASE), learning)
    assert (added.kind, added.field, added.before, added.after) == (
        ChangeKind.ARG_ADDED,
        "learnWorkloadTraffic",
        None,
        True,
    )
    assert added.text == "NetworkTraffic arg learnWorkloadTraffic added: true (absent: its default, false)"
    (removed,) = version_change_lines(learning, described(BASE))
    assert removed.kind == ChangeKind.ARG_REMOVED
    assert removed.text == "NetworkTraffic arg learnWorkloadTraffic removed (was true; absent: its default, false)"


def test_an_arg_no_default_explains_is_added_or_removed_plainly() -> None:
    before, after = described(BASE), described(BASE)
    after["pluginConfig"]["NetworkTraffic"]["burstWindow"] = 30
    assert texts(before, after) == ["NetworkTraffic arg burstWindow added: 30"]
    assert texts(after, before) == ["NetworkTraffic arg burstWindow removed (was 30)"]


def test_the_answer_scale_and_extender_weight_read_as_fields() -> None:
    after = described(BASE + "  answer: {scale: fixed, extenderWeight: 5}\n")
    lines = version_change_lines(described(BASE), after)
    assert [line.text for line in lines] == ["answer scale spread → fixed", "answer extenderWeight null → 5"]
    assert {line.kind for line in lines} == {ChangeKind.FIELD_CHANGED}
    assert [line.path for line in lines] == ["answer.scale", "answer.extenderWeight"]


def test_a_plugin_moved_between_points_is_removed_from_one_and_added_to_the_other() -> None:
    after = edited(
        ("{name: TrafficThreshold}, {name: NodeResourceFitByCR}", "{name: TrafficThreshold}"),
        ("weight: 3}]", "weight: 3}, {name: NodeResourceFitByCR, weight: 4}]"),
    )
    assert texts(described(BASE), after) == [
        "NodeResourceFitByCR removed from filter",
        "NodeResourceFitByCR added to score (weight 4)",
    ]


def test_several_changes_read_one_line_each_in_the_definition_s_order() -> None:
    before = described(BASE)
    after = edited(
        THRESHOLD_OFF,
        IMAGE_LOCALITY_2,
        WEIGHT_5,
        WINDOW_10,
        ("pluginConfig:", "answer: {scale: fixed}\n  pluginConfig:"),
    )
    expected = [
        "TrafficThreshold removed from filter",
        "NetworkTraffic weight 3 → 5",
        "ImageLocality added to score (weight 2)",
        "NetworkTraffic arg timeRangeInMinutes 5 → 10",
        "answer scale spread → fixed",
    ]
    assert texts(before, after) == expected
    # The same two versions always read the same, whichever order their keys come back from the database in
    # (PostgreSQL's jsonb keeps its own order of an object's keys, not the one they were written in).
    assert texts(keys_reversed(before), keys_reversed(after)) == expected


def keys_reversed(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: keys_reversed(value[key]) for key in reversed(list(value))}
    return value


def test_plugins_reordered_only_say_so() -> None:
    after = edited(
        (
            "{name: TrafficThreshold}, {name: NodeResourceFitByCR}",
            "{name: NodeResourceFitByCR}, {name: TrafficThreshold}",
        )
    )
    (line,) = version_change_lines(described(BASE), after)
    assert (line.kind, line.point) == (ChangeKind.FIELD_CHANGED, "filter")
    assert (
        line.text
        == 'filter order ["TrafficThreshold","NodeResourceFitByCR"] → ["NodeResourceFitByCR","TrafficThreshold"]'
    )


@pytest.mark.parametrize(
    ("field", "before", "after", "text"),
    [
        (
            "score",
            [{"name": "NetworkTraffic", "weight": 3}],
            "all",
            'score: [{"name":"NetworkTraffic","weight":3}] → "all"',
        ),
        (
            "filter",
            ["TrafficThreshold", "TrafficThreshold"],
            ["TrafficThreshold"],
            'filter: ["TrafficThreshold","TrafficThreshold"] → ["TrafficThreshold"]',
        ),
        ("answer", {"scale": "spread"}, None, 'answer: removed (was {"scale":"spread"})'),
        ("shards", None, {"count": 2}, 'shards: added {"count":2}'),
    ],
)
def test_a_shape_not_understood_falls_back_to_the_field_in_compact_json(
    field: str, before: Any, after: Any, text: str
) -> None:
    old, new = described(BASE), described(BASE)
    for definition, value in ((old, before), (new, after)):
        if value is None:
            definition.pop(field, None)
        else:
            definition[field] = value
    (line,) = version_change_lines(old, new)
    assert (line.kind, line.text, line.before, line.after) == (ChangeKind.FIELD_CHANGED, text, before, after)


def test_a_nested_field_not_understood_names_its_leaf() -> None:
    old, new = described(BASE), described(BASE)
    old["shards"], new["shards"] = {"count": 2, "zone": "a"}, {"count": 3, "zone": "a"}
    assert texts(old, new) == ["shards.count: 2 → 3"]


def test_the_same_version_has_no_change() -> None:
    assert version_change_lines(described(BASE), described(BASE)) == []


def test_a_definition_shown_beside_the_lines_reads_in_their_order_whatever_order_it_was_stored_in() -> None:
    stored = keys_reversed(described(BASE) | {"shards": {"count": 2}})
    shown = in_reading_order(stored)
    assert shown == stored, "nothing added or lost"
    assert list(shown) == ["name", "filter", "score", "pluginConfig", "answer", "shards"]
    assert list(shown["pluginConfig"]) == sorted(stored["pluginConfig"])
    assert list(shown["pluginConfig"]["NetworkTraffic"]) == sorted(stored["pluginConfig"]["NetworkTraffic"])
    assert shown["filter"] == stored["filter"], "a list keeps its recorded order"
