"""A profile version is its complete, normalized definition: written differently but meaning the same, it is the same
version; any arg that changes the decision changes it, and the diff between two versions names that arg."""

from __future__ import annotations

import pytest

from scheduler_core.extender.scoring import profiles as profiles_module
from scheduler_core.extender.scoring.profile_versions import decode_note, encode_note, version_changes, version_notes
from scheduler_core.extender.scoring.profiles import load_profiles

BARE = """
profiles:
- name: web
"""
EVERY_DEFAULT_SPELLED_OUT = """
profiles:
- name: web
  plugins:
    filter: {enabled: [{name: TrafficThreshold}]}
    score: {enabled: [{name: NetworkTraffic, weight: 1}]}
  pluginConfig:
  - name: TrafficThreshold
    args: {deviceName: eth0, timeRangeInMinutes: 5, maxBytesPerSecond: 125000000, failOnMissing: false,
           missingPolicy: neutral, maxStalenessSeconds: 120}
  - name: NetworkTraffic
    args: {assumedBytesPerPod: 300000000, herdDecaySeconds: 0, missingPolicy: neutral}
  answer: {scale: spread}
"""


def version(text: str) -> str:
    return load_profiles(text)["web"].version()


def test_the_defaults_written_out_are_the_same_version_as_left_out() -> None:
    assert version(EVERY_DEFAULT_SPELLED_OUT) == version(BARE)


@pytest.mark.parametrize(
    "change",
    [
        "pluginConfig: [{name: TrafficThreshold, args: {maxBytesPerSecond: 1000}}]",
        "pluginConfig: [{name: TrafficThreshold, args: {failOnMissing: true}}]",
        "pluginConfig: [{name: NetworkTraffic, args: {missingPolicy: fail}}]",
        "pluginConfig: [{name: NetworkTraffic, args: {assumedBytesPerPod: 0}}]",  # the herd settings
        "pluginConfig: [{name: NetworkTraffic, args: {herdDecaySeconds: 30}}]",
        "pluginConfig: [{name: NetworkTraffic, args: {timeRangeInMinutes: 10}}]",
        "plugins: {score: {enabled: [{name: NetworkTraffic, weight: 2}]}}",
        "plugins: {filter: {disabled: [{name: '*'}]}}",
        "answer: {scale: fixed}",
        "answer: {extenderWeight: 5}",
    ],
)
def test_any_setting_that_changes_a_decision_is_another_version(change: str) -> None:
    assert version(f"{BARE}  {change}\n") != version(BARE)


def test_a_version_is_computed_once_when_the_profile_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    profile = load_profiles(BARE)["web"]
    built = version(BARE)
    digests: list[object] = []
    monkeypatch.setattr(profiles_module, "profile_version", lambda d: digests.append(d) or "changed")
    assert {profile.version() for _ in range(3)} == {built}
    assert digests == [], "every verb call reads the digest computed when the profile was built"


def test_the_diff_between_two_versions_names_the_changed_arg() -> None:
    before = load_profiles(BARE)["web"].describe()
    after = load_profiles(f"{BARE}  pluginConfig: [{{name: TrafficThreshold, args: {{maxBytesPerSecond: 2000}}}}]\n")
    changes = version_changes(before, after["web"].describe())
    assert [c.text for c in changes] == ["pluginConfig.TrafficThreshold.maxBytesPerSecond: 125000000.0 → 2000.0"]


def test_a_weight_change_names_the_scorers() -> None:
    before = load_profiles(BARE)["web"].describe()
    after = load_profiles(f"{BARE}  plugins: {{score: {{enabled: [{{name: NetworkTraffic, weight: 3}}]}}}}\n")
    changes = version_changes(before, after["web"].describe())
    assert [c.path for c in changes] == ["score"]
    assert changes[0].after == [{"name": "NetworkTraffic", "weight": 3}]


def test_a_note_keeps_the_yaml_only_when_it_defines_that_version() -> None:
    profiles = load_profiles(EVERY_DEFAULT_SPELLED_OUT)
    (note,) = version_notes(profiles, EVERY_DEFAULT_SPELLED_OUT, server="replica-a", at=1.0)
    assert (note.digest, note.profile, note.server) == (profiles["web"].version(), "web", "replica-a")
    assert note.normalized == profiles["web"].describe()
    assert "maxBytesPerSecond: 125000000" in note.yaml
    # The file changed between loading the profiles and reading it again: its YAML is not this version's.
    (stale,) = version_notes(profiles, f"{BARE}  answer: {{scale: fixed}}\n", server="replica-a", at=1.0)
    assert stale.yaml == ""


NOTE_AS_SPOOLED = (
    b'{"digest":"3f2a9c01be44","profile":"web","normalized":{"name":"web","filter":["TrafficThreshold"]},'
    b'"server":"replica-a","loaded_at":1800000000.5,"yaml":"name: web\\n"}'
)
"""A note as the spool's ``profile_versions`` table holds it (issue 31's form): the ingester must keep reading it."""


def test_a_spooled_note_reads_back_field_for_field() -> None:
    note = decode_note(NOTE_AS_SPOOLED)
    assert (note.digest, note.profile, note.server, note.loaded_at, note.yaml) == (
        "3f2a9c01be44",
        "web",
        "replica-a",
        1800000000.5,
        "name: web\n",
    )
    assert note.normalized == {"name": "web", "filter": ["TrafficThreshold"]}
    assert encode_note(note) == NOTE_AS_SPOOLED
