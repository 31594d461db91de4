"""NetworkTraffic arithmetic, the 0..10 scale, and what happens without metrics."""

from __future__ import annotations

import pytest

from scheduler_core.extender.protocol.binding import SimulatedBinder
from scheduler_core.extender.protocol.cluster import StaticCluster
from scheduler_core.extender.protocol.wire import encode
from scheduler_core.extender.scoring.answer import answers, fixed_answer, preference_tied
from scheduler_core.extender.scoring.profiles import load_profiles
from scheduler_core.extender.verbs import Extender
from tests.support.inputs import traffic_store

POD = {"metadata": {"name": "web-1", "namespace": "shop", "uid": "uid-1"}, "spec": {"containers": []}}


def prioritize(bytes_by_node: dict[str, float], nodes: list[str], *, age: float = 0.0, config: str | None = None):
    extender = Extender(
        load_profiles(config),
        cluster=StaticCluster(),
        traffic=traffic_store(bytes_by_node, age=age),
        binder=SimulatedBinder(),
    )
    return extender.prioritize("default", encode({"Pod": POD, "Nodes": None, "NodeNames": nodes}))


FIXED = "profiles: [{name: default, answer: {scale: fixed}}]"
SPREAD = "profiles: [{name: default, answer: {scale: spread}}]"


def test_the_tutorial_example_scores_28_57_14_29_and_0_and_answers_3_1_0():
    nodes = ["node-1", "node-2", "node-3"]
    result = prioritize({"node-1": 1.0e6, "node-2": 1.2e6, "node-3": 1.4e6}, nodes, config=FIXED)

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
    assert fixed_answer(final) == expected


def test_scores_are_encoded_as_json_integers():
    result = prioritize({"a": 3.0, "b": 7.0}, ["a", "b"], config=FIXED)
    assert b"." not in result.body
    assert result.body == b'[{"Host":"a","Score":6},{"Host":"b","Score":0}]'


def test_the_spread_scale_maps_the_candidates_final_scores_onto_the_whole_0_to_10_range():
    nodes = ["node-1", "node-2", "node-3"]
    result = prioritize({"node-1": 1.0e6, "node-2": 1.2e6, "node-3": 1.4e6}, nodes, config=SPREAD)
    record = result.event.prioritize
    low, high = min(record.final), max(record.final)
    expected = [int(10 * (f - low) / (high - low) + 0.5 + 1e-9) for f in record.final]
    assert (record.answer_scale, expected) == ("spread", [10, 5, 0])
    assert result.body == b'[{"Host":"node-1","Score":10},{"Host":"node-2","Score":5},{"Host":"node-3","Score":0}]'


def test_nodes_that_the_fixed_scale_rounds_together_answer_apart_when_spread():
    """Traffic weighted 1 beside a plugin weighted 4 that scores every node 80: 3 MB, 360 MB and 2.4 GB received
    score 99.875, 85 and 0 on traffic, 83.975, 81 and 64 in all, which the fixed scale answers 8, 8 and 6."""
    finals = [83.975, 81.0, 64.0]
    assert answers(finals, "fixed") == [8, 8, 6]
    assert answers(finals, "spread") == [10, 9, 0]
    assert preference_tied(finals, answers(finals, "fixed"))
    assert not preference_tied(finals, answers(finals, "spread"))


def test_on_the_spread_scale_candidates_that_all_scored_the_same_each_answer_10():
    """Each is the best: the answer kube-scheduler gets for our best node does not depend on how many tie for it."""
    assert answers([75.0, 75.0], "spread") == [10, 10]
    assert answers([42.0], "spread") == [10]
    assert answers([75.0, 75.0, 0.0], "spread", forced=[2]) == [10, 10, 0]
    assert answers([75.0, 75.0], "fixed") == [8, 8]
