"""Profiles: the KubeSchedulerConfiguration shape, defaults, and errors that name profile, plugin and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler_core.extender.scoring.profiles import ProfileError, load_profiles

DEPLOY = Path(__file__).resolve().parents[4] / "deploy"


def test_without_a_file_there_is_one_default_profile_filtering_by_threshold_and_scoring_by_traffic():
    profiles = load_profiles(None)
    assert list(profiles) == ["default"]
    described = profiles["default"].describe()
    assert described["filter"] == ["TrafficThreshold"]
    assert described["score"] == [{"name": "NetworkTraffic", "weight": 1}]
    assert described["pluginConfig"]["NetworkTraffic"]["timeRangeInMinutes"] == 5
    assert described["pluginConfig"]["NetworkTraffic"]["deviceName"] == "eth0"
    assert described["pluginConfig"]["NetworkTraffic"]["queryMode"] == "increase"


def test_enabled_adds_to_the_defaults_and_disabled_star_removes_them():
    profiles = load_profiles(
        """
profiles:
- name: extra
  plugins:
    score: {enabled: [{name: ImageLocality, weight: 2}, {name: NetworkTraffic, weight: 5}]}
- name: only-cr
  plugins:
    filter: {enabled: [{name: NodeResourceFitByCR}], disabled: [{name: "*"}]}
    score: {disabled: [{name: NetworkTraffic}]}
"""
    )
    assert profiles["extra"].describe()["score"] == [
        {"name": "ImageLocality", "weight": 2},
        {"name": "NetworkTraffic", "weight": 5},
    ]
    assert profiles["only-cr"].describe()["filter"] == ["NodeResourceFitByCR"]
    assert profiles["only-cr"].describe()["score"] == []


@pytest.mark.parametrize("path", sorted(DEPLOY.glob("profiles.*.yaml")), ids=lambda p: p.name)
def test_the_shipped_profile_files_load(path: Path):
    profiles = load_profiles(path.read_text())
    assert {"default", "gpu-aware"} <= set(profiles)


def test_equal_traffic_args_share_one_query():
    profiles = load_profiles((DEPLOY / "profiles.demo.yaml").read_text())
    assert len(profiles["default"].traffic_queries()) == 1


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            "profiles: [{name: p, plugins: {score: {enabled: [{name: Nope}]}}}]",
            "profile 'p', plugin 'Nope': field plugins.score.enabled: unknown plugin",
        ),
        (
            "profiles: [{name: p, plugins: {score: {enabled: [{name: NetworkTraffic, weight: 0}]}}}]",
            "profile 'p', plugin 'NetworkTraffic': field plugins.score.enabled.weight: must be 1..100, got 0",
        ),
        (
            "profiles: [{name: p, plugins: {score: {enabled: [{name: NetworkTraffic, weight: heavy}]}}}]",
            "profile 'p', field profiles[0].plugins.score.enabled[0].weight: expected an integer or null, got a string",
        ),
        (
            "profiles: [{name: p, pluginConfig: [{name: NetworkTraffic, args: {timeRangeInMinutes: abc}}]}]",
            "profile 'p', plugin 'NetworkTraffic': field args.timeRangeInMinutes: expected an integer, got a string",
        ),
        (
            "profiles: [{name: p, pluginConfig: [{name: NetworkTraffic, args: {timeRangeInMinutes: 0}}]}]",
            "profile 'p', plugin 'NetworkTraffic': field args: timeRangeInMinutes must be between 1 and 1440",
        ),
        (
            "profiles: [{name: p, pluginConfig: [{name: NetworkTraffic, args: {devicename: eth1}}]}]",
            "profile 'p', plugin 'NetworkTraffic': field args: unknown field `devicename`",
        ),
        (
            "profiles: [{name: p, pluginConfig: [{name: TrafficThreshold, args: {maxBytesPerSecond: -1}}]}]",
            "profile 'p', plugin 'TrafficThreshold': field args: maxBytesPerSecond must be positive",
        ),
        (
            "profiles: [{name: p, pluginConfig: [{name: NetworkTraffic, args: {queryMode: rate}}]}]",
            "profile 'p', plugin 'NetworkTraffic': field args.queryMode: "
            "expected one of 'increase', 'sum_over_time', got 'rate'",
        ),
        (
            "profiles: [{name: p, plugins: {filter: {enabled: [{name: ImageLocality}]}}}]",
            "profile 'p', plugin 'ImageLocality': field plugins.filter.enabled: plugin has no filter extension point",
        ),
        (
            "profiles: [{name: p, plugins: {filter: {disabled: [{name: Nope}]}}}]",
            "profile 'p', plugin 'Nope': field plugins.filter.disabled: unknown plugin",
        ),
        (
            "profiles: [{name: p, pluginConfig: [{name: Nope, args: {}}]}]",
            "profile 'p', plugin 'Nope': field pluginConfig: unknown plugin",
        ),
        ("profiles: [{name: p}, {name: p}]", "profile 'p': field name: duplicate profile name"),
        ("profiles: [{name: Bad_Name}]", "profile 'Bad_Name': field name: must be a DNS label"),
        ("profiles: [{name: p, plugin: {}}]", "profile 'p', field profiles[0]: unknown field `plugin`"),
        ("profiles: []", "field profiles: at least one profile is required"),
        ("- just a list", "profile configuration must be a mapping"),
        ("profiles: [", "profile configuration is not valid YAML at line 1, column 12"),
        ("profiles: [{}]", "profile #0, field profiles[0]: missing required field `name`"),
        ("profiles: {a: 1}", "field profiles: expected an array, got an object"),
        (
            "profiles: [{name: p, answer: {scale: big}}]",
            "profile 'p', field profiles[0].answer.scale: expected one of 'fixed', 'spread', got 'big'",
        ),
    ],
)
def test_a_bad_profile_file_is_refused_naming_profile_plugin_and_field(config: str, message: str):
    with pytest.raises(ProfileError) as caught:
        load_profiles(config)
    assert message in str(caught.value)
