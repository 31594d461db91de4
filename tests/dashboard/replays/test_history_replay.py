"""A stretch of recorded history replayed under a candidate profile: the recorded profile changes nothing,
a crafted change changes exactly what it should, computed here from the recorded figures alone."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from dashboard.models import SchedulingCycle
from dashboard.replays.models import ReplayStatus
from dashboard.replays.selectors import history_replay_report
from dashboard.replays.services import ReplayRequestInvalid, history_replay_run, history_replay_start
from dashboard.selectors.cycles import cycle_read
from scheduler_core.extender.record.structs import CycleRecords
from scheduler_core.history_replay.report import CAVEATS

pytestmark = pytest.mark.django_db

WITHOUT_TRAFFIC_SCORE = """
profiles:
- name: no-traffic-score
  plugins:
    filter: {enabled: [{name: TrafficThreshold}, {name: NodeResourceFitByCR}]}
    score:
      enabled: [{name: NodeResourceFitByCR, weight: 1}, {name: ImageLocality, weight: 1}]
      disabled: [{name: NetworkTraffic}]
  pluginConfig:
  - name: TrafficThreshold
    args: {maxBytesPerSecond: 125000000, deviceName: eth0, timeRangeInMinutes: 5}
"""
LOWER_THRESHOLD = """
profiles:
- name: sixty
  plugins:
    filter: {enabled: [{name: TrafficThreshold}, {name: NodeResourceFitByCR}]}
    score:
      enabled:
      - {name: NetworkTraffic, weight: 3}
      - {name: NodeResourceFitByCR, weight: 1}
      - {name: ImageLocality, weight: 1}
  pluginConfig:
  - name: NetworkTraffic
    args: {deviceName: eth0, timeRangeInMinutes: 5}
  - name: TrafficThreshold
    args: {maxBytesPerSecond: 60000000, deviceName: eth0, timeRangeInMinutes: 5}
"""


def replayed(**start):
    replay = history_replay_start(**start)
    replay = history_replay_run(replay.pk)
    assert replay.status == ReplayStatus.DONE, replay.error
    report = history_replay_report(replay)
    assert report is not None
    return replay, report


def records(cycle: SchedulingCycle) -> CycleRecords:
    """The cycle's answered records, as the API and the decision page read them."""
    return cycle_read(cycle=cycle).records


@pytest.mark.parametrize("profile", ["default", "gpu-aware"])
def test_replaying_history_under_the_profile_it_was_recorded_with_changes_nothing(recorded, profile):
    mine = [c for c in recorded if c.profile == profile]
    replay, report = replayed(selection={"last": "1000", "profile": profile}, candidate_profile=profile)
    assert report.cycles_selected == report.cycles_replayed == len(mine)
    assert report.cycles_skipped == 0
    assert report.decisions_changed.k == 0
    assert report.decisions_changed.n == sum(1 for c in mine if c.preferred_node)
    assert (report.feasible_to_infeasible, report.infeasible_to_feasible) == (0, 0)
    assert (report.became_unschedulable, report.became_schedulable) == (0, 0)
    assert (report.ties_created, report.ties_removed) == (0, 0)
    assert report.ties_before == report.ties_after == sum(1 for c in mine if c.answer_tie)
    assert report.new_rejections == []
    assert report.sample == []
    assert report.recorded_preferred_differs == 0  # "before" is what was recorded, cycle by cycle
    assert {p.node: p.before for p in report.placements} == Counter(c.preferred_node for c in mine if c.preferred_node)
    assert all(p.before == p.after and p.before_rate_sum == p.after_rate_sum for p in report.placements)
    assert report.balance.before == report.balance.after
    assert report.balance.quietest_chosen_before == report.balance.quietest_chosen_after
    assert report.caveats == list(CAVEATS)
    assert replay.progress_done == replay.progress_total == len(mine)


def expected_without_traffic_score(cycle: SchedulingCycle) -> str:
    """Our preferred node once NetworkTraffic carries no weight: the mean of the other recorded scores (weight 1
    each, over the plugins that applied), on the record's 4 decimals, the first highest in the order sent."""
    prioritize = records(cycle).prioritize
    if prioritize is None:  # one node passed (or none): nothing was scored, nothing changes
        return cycle.preferred_node
    total = np.zeros(len(prioritize.nodes))
    weights = 0
    for plugin in prioritize.plugins:
        if plugin.name in ("NodeResourceFitByCR", "ImageLocality") and plugin.applicable:
            total = total + np.array(plugin.scores, dtype=float)
            weights += 1
    finals = (total / weights if weights else np.zeros(len(total))).round(4)
    return prioritize.nodes[int(np.argmax(finals))]


def test_network_traffic_at_weight_zero_changes_exactly_the_decisions_it_should(recorded):
    mine = [c for c in recorded if c.profile == "default"]
    expected = {c.id: (c.preferred_node, expected_without_traffic_score(c)) for c in mine}
    changed = {cycle_id: nodes for cycle_id, nodes in expected.items() if nodes[0] != nodes[1]}
    assert changed, "the recorded history should hold decisions the traffic score made"
    _, report = replayed(selection={"last": "1000", "profile": "default"}, candidate_yaml=WITHOUT_TRAFFIC_SCORE)
    assert report.cycles_replayed == len(mine)
    assert report.decisions_changed.k == len(changed)
    assert {s.cycle_id: (s.before_node, s.after_node) for s in report.sample} == changed
    # The filters are the recorded profile's: nobody becomes feasible or infeasible.
    assert (report.feasible_to_infeasible, report.infeasible_to_feasible, report.new_rejections) == (0, 0, [])
    after = Counter(nodes[1] for nodes in expected.values() if nodes[1])
    assert {p.node: p.after for p in report.placements if p.after} == after
    assert [s.cycle_id for s in report.sample] == sorted(changed)  # oldest first
    for change in report.sample:
        assert change.after_node_final_after is not None
        assert change.before_node_final_after is not None
        assert change.after_node_final_after >= change.before_node_final_after
        tie = change.after_node_final_after == change.before_node_final_after
        assert change.why == (
            "another node scores the same under the candidate and comes first in the order sent"
            if tie
            else "another node scores higher under the candidate"
        )


def test_a_lower_traffic_threshold_rejects_exactly_the_nodes_above_it(recorded):
    mine = [c for c in recorded if c.profile == "default"]
    rejected = cycles = 0
    for cycle in mine:
        found = records(cycle)
        fr, pr = found.filter, found.prioritize
        assert fr is not None
        feasible = set(pr.nodes) if pr else set(fr.passed)
        traffic = dict(zip(fr.nodes, fr.traffic_bytes, strict=True))
        above = [n for n in feasible if traffic.get(n) is not None and traffic[n] / 300 > 60e6]
        rejected += len(above)
        cycles += bool(above)
    assert rejected
    _, report = replayed(selection={"last": "1000", "profile": "default"}, candidate_yaml=LOWER_THRESHOLD)
    assert report.feasible_to_infeasible == rejected
    assert report.infeasible_to_feasible == 0
    assert [(r.plugin, r.reason, r.nodes, r.cycles) for r in report.new_rejections] == [
        ("TrafficThreshold", "receive rate above 60.0 MB/s", rejected, cycles)
    ]
    for change in report.sample:  # a decision whose node is now rejected says so
        if change.before_node_final_after is None:
            assert "TrafficThreshold: receive rate above 60.0 MB/s" in change.why


def test_the_selection_takes_the_history_filters(recorded, history):
    node = history.node_names[10]  # a candidate of the 80-node cycles, not of the 5-node ones
    _, report = replayed(selection={"last": "1000", "node": node}, candidate_profile="default")
    assert report.cycles_replayed == 40
    _, report = replayed(selection={"last": "3"}, candidate_profile="default")
    assert report.cycles_selected == 3
    namespace = recorded[0].pod_namespace
    _, report = replayed(selection={"namespace": namespace, "last": "1000"}, candidate_profile="default")
    assert report.cycles_replayed == sum(1 for c in recorded if c.pod_namespace == namespace)


@pytest.mark.parametrize(
    ("start", "field", "words"),
    [
        ({"candidate_profile": "nope"}, "candidate_profile", ["no configured profile 'nope'"]),
        (
            {"candidate_yaml": "profiles: [{name: x, plugins: {score: {enabled: [{name: Nope}]}}}]"},
            "candidate_yaml",
            ["profile 'x'", "plugin 'Nope'", "field plugins.score.enabled", "unknown plugin"],
        ),
        (
            {
                "candidate_yaml": "profiles:\n- name: y\n  pluginConfig:\n"
                "  - {name: TrafficThreshold, args: {maxBytesPerSecond: fast}}"
            },
            "candidate_yaml",
            ["profile 'y'", "plugin 'TrafficThreshold'", "field args.maxBytesPerSecond"],
        ),
        ({"candidate_yaml": "profiles: [\n"}, "candidate_yaml", ["not valid YAML"]),
        ({"candidate_profile": "default", "selection": {"since": "yesterday"}}, "selection.since", ["date"]),
        ({"candidate_profile": "default", "selection": {"last": "0"}}, "selection.last", ["at least 1"]),
        ({"candidate_profile": "default", "selection": {"node": "Not A Node"}}, "selection.node", ["node name"]),
    ],
)
def test_a_replay_that_cannot_run_is_refused_naming_the_field(db, start, field, words):
    with pytest.raises(ReplayRequestInvalid) as refused:
        history_replay_start(**{"selection": {}, **start})
    assert field in refused.value.errors
    message = " ".join(refused.value.errors[field])
    for word in words:
        assert word in message
