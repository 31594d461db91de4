"""NetworkTraffic arithmetic, the 0..10 scale, and what happens without metrics."""

from __future__ import annotations

import pytest

from scheduler_core.binding import SimulatedBinder
from scheduler_core.cluster import StaticCluster
from scheduler_core.engine import to_extender_score
from scheduler_core.profiles import load_profiles
from scheduler_core.verbs import Extender
from scheduler_core.wire import encode
from tests.conftest import traffic_store

POD = {"metadata": {"name": "web-1", "namespace": "shop", "uid": "uid-1"}, "spec": {"containers": []}}


def prioritize(bytes_by_node: dict[str, float], nodes: list[str], *, age: float = 0.0, config: str | None = None):
    extender = Extender(
        load_profiles(config),
        cluster=StaticCluster(),
        traffic=traffic_store(bytes_by_node, age=age),
        binder=SimulatedBinder(),
    )
    return extender.prioritize("default", encode({"Pod": POD, "Nodes": None, "NodeNames": nodes}))


def test_the_tutorial_example_scores_28_57_14_29_and_0_and_answers_3_1_0():
    result = prioritize({"node-1": 1.0e6, "node-2": 1.2e6, "node-3": 1.4e6}, ["node-1", "node-2", "node-3"])

    assert result.status == 200
    assert result.body == b'[{"Host":"node-1","Score":3},{"Host":"node-2","Score":1},{"Host":"node-3","Score":0}]'
    (traffic,) = result.event.prioritize.plugins
    assert traffic.scores == pytest.approx([100 - 1.0 / 1.4 * 100, 100 - 1.2 / 1.4 * 100, 0.0], abs=1e-4)
    assert [round(s, 2) for s in traffic.scores] == [28.57, 14.29, 0.0]
    assert traffic.raw == [1.0e6, 1.2e6, 1.4e6]


@pytest.mark.parametrize(
    ("final", "expected"),
    [(0.0, 0), (4.99, 0), (5.0, 1), (14.29, 1), (25.0, 3), (28.57, 3), (94.999, 9), (95.0, 10), (100.0, 10)],
)
def test_final_scores_map_to_the_extender_scale_rounding_half_up(final: float, expected: int):
    assert to_extender_score(final) == expected


def test_scores_are_encoded_as_json_integers():
    result = prioritize({"a": 3.0, "b": 7.0}, ["a", "b"])
    assert b"." not in result.body
    assert result.body == b'[{"Host":"a","Score":6},{"Host":"b","Score":0}]'


def test_all_nodes_without_traffic_score_100():
    result = prioritize({"a": 0.0, "b": 0.0}, ["a", "b"])
    assert result.event.prioritize.final == [100.0, 100.0]
    assert result.body == b'[{"Host":"a","Score":10},{"Host":"b","Score":10}]'


def test_a_node_without_a_series_gets_the_neutral_score_and_a_recorded_reason():
    result = prioritize({"a": 100.0, "b": 50.0}, ["a", "b", "new-node"])

    record = result.event.prioritize
    assert record.final == [0.0, 50.0, 50.0]
    assert record.plugins[0].notes == {"new-node": "no traffic series for node"}
    assert result.status == 200


def test_stale_metrics_count_as_missing_and_the_record_says_so():
    result = prioritize({"a": 100.0, "b": 50.0}, ["a", "b"], age=600)

    (traffic,) = result.event.prioritize.plugins
    assert traffic.note == "metrics stale"
    assert traffic.metric_age_seconds == pytest.approx(600, abs=5)
    assert result.event.prioritize.final == [50.0, 50.0]


def test_weights_combine_plugins_as_a_weighted_mean():
    config = """
profiles:
- name: default
  plugins:
    score:
      enabled: [{name: NetworkTraffic, weight: 3}, {name: ImageLocality, weight: 1}]
"""
    extender = Extender(
        load_profiles(config),
        cluster=StaticCluster(),
        traffic=traffic_store({"a": 0.0, "b": 10.0}),
        binder=SimulatedBinder(),
    )
    pod = {"metadata": {"name": "p", "namespace": "n", "uid": "u"}, "spec": {"containers": [{"image": "nginx:1.25"}]}}
    result = extender.prioritize("default", encode({"Pod": pod, "Nodes": None, "NodeNames": ["a", "b"]}))

    # a: traffic 100 × 3 + images 0 × 1 → 75; b: traffic 0 × 3 + 0 → 0.
    assert result.event.prioritize.final == [75.0, 0.0]
    assert result.body == b'[{"Host":"a","Score":8},{"Host":"b","Score":0}]'


def test_an_auditor_recomputing_the_final_score_from_the_recorded_scores_gets_it_exactly():
    config = """
profiles:
- name: default
  plugins:
    score:
      enabled: [{name: NetworkTraffic, weight: 3}, {name: ImageLocality, weight: 2}]
"""
    traffic = {f"n{i}": 1.0e6 + i * 37_111.7 for i in range(40)}  # scores with many decimals before rounding
    extender = Extender(
        load_profiles(config), cluster=StaticCluster(), traffic=traffic_store(traffic), binder=SimulatedBinder()
    )
    pod = {"metadata": {"name": "p", "namespace": "n", "uid": "u"}, "spec": {"containers": [{"image": "nginx:1.25"}]}}
    record = extender.prioritize("default", encode({"Pod": pod, "Nodes": None, "NodeNames": list(traffic)})).event
    scored = record.prioritize
    assert any(s != round(s, 2) for s in scored.plugins[0].scores), "the scores carry 4 decimals"
    for i in range(len(scored.nodes)):
        applicable = [p for p in scored.plugins if p.applicable]
        mean = sum(p.scores[i] * p.weight for p in applicable) / sum(p.weight for p in applicable)
        assert scored.final[i] == round(mean, 4)
