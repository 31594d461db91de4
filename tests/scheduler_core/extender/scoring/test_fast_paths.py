"""The fast paths of the hot code give exactly what the plain code they replace gives."""

from __future__ import annotations

import math
import random

import pytest

from scheduler_core.extender.protocol import wire
from scheduler_core.extender.protocol.cluster import NodeInfo, PodInfo, StaticCluster
from scheduler_core.extender.scoring.answer import answers, fixed_answer, spread_answer
from scheduler_core.extender.scoring.engine import round4, run_prioritize
from scheduler_core.extender.scoring.plugins import CycleContext, NodeScore, ScoreColumns
from scheduler_core.extender.scoring.profiles import load_profiles
from scheduler_core.traffic import TrafficQuery, TrafficSnapshot
from scheduler_core.traffic.store import TrafficStore

EDGES = [0.0, 4.99, 5.0, 14.29, 25.0, 28.57, 94.999, 95.0, 100.0, -1.0, 1e300]


def test_the_answers_of_a_whole_column_are_what_the_rounding_rule_answers_node_by_node():
    rng = random.Random(7)
    values = [rng.uniform(-5, 105) for _ in range(100_000)] + [round(rng.uniform(0, 100), 4) for _ in range(50_000)]
    values += EDGES + [math.nextafter(v, -math.inf) for v in range(0, 101, 5)] + [float(v) for v in range(0, 101, 5)]
    assert answers(values, "fixed") == [fixed_answer(v) for v in values]
    finals = [round(rng.uniform(0, 100), 4) for _ in range(10_000)] + [0.0, 100.0, 50.0]
    low, high = min(finals), max(finals)
    assert answers(finals, "spread") == [spread_answer(f, low, high) for f in finals]


@pytest.mark.parametrize("distinct", [1, 3, 40, 1000])
def test_round4_rounds_to_four_decimals_like_round(distinct):
    rng = random.Random(distinct)
    pool = [rng.uniform(0, 100) for _ in range(distinct)] + [28.571428571428573, 14.285714285714286, 0.0, 100.0]
    values = [rng.choice(pool) for _ in range(1000)]
    for value, rounded in zip(values, round4(values), strict=True):
        assert abs(rounded - value) <= 0.00005 + 1e-12
        assert rounded == round(rounded, 4)  # nothing past the fourth decimal
        tie = abs(value * 10_000 % 1 - 0.5) < 1e-6
        assert rounded == round(value, 4) or tie


def test_round4_keeps_values_it_cannot_scale():
    assert round4([1.23456, math.inf])[0] == 1.2346
    assert math.isnan(round4([math.nan, 1.0])[0])
    assert round4([]).tolist() == []


def test_score_columns_index_like_a_list_of_node_scores():
    columns = ScoreColumns([1.0, 2.0, 3.0], [10.0, None, 30.0], ["", "no series", ""], [0.0, 0.0, 5.0])
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


@pytest.mark.parametrize("hosts", [[], ["node-1"], ["a", 'we"ird\\name', "ünï", "\u2028x", "\x00", "node-1"]])
def test_host_priorities_are_encoded_like_the_host_priority_structs(hosts):
    scores = [i % 11 for i in range(len(hosts))]
    expected = wire.encode([wire.HostPriority(host=h, score=s) for h, s in zip(hosts, scores, strict=True)])
    assert wire.encode_host_priorities(hosts, scores) == expected
    assert wire.encode_host_priorities(hosts, scores) == expected  # the second time from the cached prefixes


@pytest.mark.parametrize(
    ("hosts", "scores"),
    [
        ([f"node-{i:04d}" for i in range(1000)], [i % 11 for i in range(1000)]),
        (["", "", "x"], [1, 2, 3]),
        (["ünïcode", "\u2028\u2029", "日本"], [0, 1, 2]),
        (['quote"d', "back\\slash", "nul\x00", "tab\t", 'a","b'], [0, 1, 2, 3, 4]),
        (["a", "b"], [11, 3]),  # not an extender score
        (["a", "b"], [-1, 3]),
        (["a", "b", "c"], [1, 2]),  # lengths differ (never from the verbs)
        (["a", "b"], [1, 2, 3]),
    ],
)
def test_host_priorities_refuse_or_encode_whatever_they_get_like_the_structs(hosts, scores):
    """The stored-body derivation (``dashboard.storage.call_body``) relies on this encoder too, on decoded records."""

    def outcome(encode):
        try:
            return encode()
        except ValueError as exc:
            return type(exc)

    structs = outcome(
        lambda: wire.encode([wire.HostPriority(host=h, score=s) for h, s in zip(hosts, scores, strict=True)])
    )
    assert outcome(lambda: wire.encode_host_priorities(hosts, scores)) == structs


class _PlainView:
    """A cluster view with only the protocol's two lookups: the plugins take their per-node path."""

    def __init__(self, view: StaticCluster) -> None:
        self.node = view.node
        self.node_resources = view.node_resources


@pytest.mark.parametrize("seed", range(5))
def test_the_resource_plugin_answers_the_same_from_its_tables_as_node_by_node(seed):
    from scheduler_core.extender.protocol.cluster import NodeResourcesSpec
    from scheduler_core.extender.scoring.plugins.node_resources import NodeResourceFitByCR, NodeResourceFitByCRArgs

    rng = random.Random(seed)
    resources = ["example.com/gpu", "example.com/nic", "example.com/fpga"]
    nodes = [NodeInfo(f"node-{i}") for i in range(300)]
    specs = {
        node.name: NodeResourcesSpec(
            resources_filter={r: rng.random() < 0.7 for r in resources if rng.random() < 0.8},
            resources_score={r: rng.randint(-20, 130) for r in resources if rng.random() < 0.8},
        )
        for node in nodes
        if rng.random() < 0.9
    }
    view = StaticCluster(nodes, specs)
    plugin = NodeResourceFitByCR(NodeResourceFitByCRArgs())
    store = TrafficStore()
    for wanted in [(), ("example.com/gpu",), ("example.com/gpu", "example.com/nic"), tuple(resources)]:
        pod = PodInfo("ns", "p", "uid", requested_resources=frozenset(wanted))
        fast, plain = (CycleContext(pod=pod, cluster=v, traffic=store, now=0.0) for v in (view, _PlainView(view)))
        assert [v.reason for v in plugin.filter(fast, nodes)] == [v.reason for v in plugin.filter(plain, nodes)]
        for _ in range(2):  # the second time from the memoized table
            expected = []
            for node in nodes:
                spec = specs.get(node.name)
                if spec is None:
                    expected.append("no NodeResources object for node")
                    continue
                missing = [r for r in sorted(wanted) if not spec.resources_filter.get(r, False)]
                expected.append(f"node does not enable {', '.join(missing)}" if missing else "")
            assert [v.reason for v in plugin.filter(fast, nodes)] == expected
        if wanted:
            fast_scores, plain_scores = plugin.score(fast, nodes).scores, plugin.score(plain, nodes).scores
            assert (fast_scores.values, fast_scores.raws) == (plain_scores.values, plain_scores.raws)
            means = [
                None
                if (s := specs.get(n.name)) is None
                else sum(s.resources_score.get(r, 0) for r in wanted) / len(wanted)
                for n in nodes
            ]
            assert fast_scores.raws == means
            assert fast_scores.values == [0.0 if m is None else min(100.0, max(0.0, m)) for m in means]


def test_a_score_outside_the_extender_scale_is_still_encoded_as_is():
    expected = wire.encode([wire.HostPriority(host="a", score=-1), wire.HostPriority(host="b", score=11)])
    assert wire.encode_host_priorities(["a", "b"], [-1, 11]) == expected
