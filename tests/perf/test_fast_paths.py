"""The fast paths of the hot code give exactly what the plain code they replace gives."""

from __future__ import annotations

import math
import random
from bisect import bisect_right

import pytest

from scheduler_core.cluster import NodeInfo, PodInfo, StaticCluster
from scheduler_core.engine import _EXTENDER_THRESHOLDS, round4, run_prioritize, to_extender_score
from scheduler_core.plugins import CycleContext, NodeScore, ScoreColumns
from scheduler_core.profiles import load_profiles
from scheduler_core.traffic import TrafficQuery, TrafficSnapshot
from scheduler_core.traffic.store import TrafficStore

EDGES = [0.0, 4.99, 5.0, 14.29, 25.0, 28.57, 94.999, 95.0, 100.0, -1.0, 1e300]


def test_the_extender_score_thresholds_answer_what_the_rounding_rule_answers():
    rng = random.Random(7)
    values = [rng.uniform(-5, 105) for _ in range(100_000)] + [round(rng.uniform(0, 100), 4) for _ in range(50_000)]
    values += EDGES + list(_EXTENDER_THRESHOLDS) + [math.nextafter(t, -math.inf) for t in _EXTENDER_THRESHOLDS]
    assert [bisect_right(_EXTENDER_THRESHOLDS, v) for v in values] == [to_extender_score(v) for v in values]


@pytest.mark.parametrize("distinct", [1, 3, 40, 1000])
def test_round4_rounds_like_round(distinct):
    rng = random.Random(distinct)
    pool = [rng.uniform(0, 100) for _ in range(distinct)]
    values = [rng.choice(pool) for _ in range(1000)]
    assert round4(values) == [round(v, 4) for v in values]


def test_score_columns_index_like_a_list_of_node_scores():
    columns = ScoreColumns([1.0, 2.0, 3.0], [10.0, None, 30.0], ["", "no series", ""], {2: 5.0})
    assert columns[1] == NodeScore(2.0, None, "no series")
    assert columns[-1] == NodeScore(3.0, 30.0, "", 5.0)
    assert columns[0:2] == [NodeScore(1.0, 10.0, ""), NodeScore(2.0, None, "no series")]
    assert list(columns) == [columns[0], columns[1], columns[2]]


def test_a_plugin_that_does_not_apply_says_why_once_not_once_per_node():
    profiles = load_profiles(
        """
profiles:
- name: p
  plugins:
    filter: {enabled: []}
    score: {enabled: [{name: NodeResourceFitByCR, weight: 1}, {name: NetworkTraffic, weight: 1}]}
"""
    )
    nodes = [NodeInfo(f"node-{i}") for i in range(50)]
    store = TrafficStore()
    store.put(TrafficSnapshot(TrafficQuery(), {n.name: float(i) for i, n in enumerate(nodes[:-1])}, 1000.0, "t"))
    ctx = CycleContext(pod=PodInfo("ns", "pod", "uid"), cluster=StaticCluster(nodes), traffic=store, now=1001.0)
    record = run_prioritize(profiles["p"], ctx, nodes)
    resources, traffic = record.plugins
    assert (resources.applicable, resources.note, resources.notes) == (False, "pod requests no extended resource", {})
    assert traffic.notes == {"node-49": "no traffic series for node"}, "a node's own reason is still kept"
