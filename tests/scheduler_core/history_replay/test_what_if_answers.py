"""Replay knows how the cycle answered (the ``fixed`` or ``spread`` scale) and the herd bytes it assumed.

Cycles are recorded by the real engine (``run_filter`` then ``run_prioritize``) with recent binds on some nodes, so
``NetworkTraffic`` scored raw + herd bytes; replaying one under its own profile must give back every recorded final
score and answer exactly, under either scale.
"""

from __future__ import annotations

import math
import random
from dataclasses import replace
from typing import Any

import msgspec
import numpy as np
import pytest

from scheduler_core.extender.protocol.binding import SimulatedBinder
from scheduler_core.extender.protocol.cluster import NodeInfo, NodeResourcesSpec, PodInfo, StaticCluster
from scheduler_core.extender.record.structs import FilterRecord, PrioritizeRecord
from scheduler_core.extender.scoring.answer import DEFAULT_ANSWER_SCALE, preference_tied
from scheduler_core.extender.scoring.engine import run_filter, run_prioritize
from scheduler_core.extender.scoring.herd import RecentBinds
from scheduler_core.extender.scoring.plugins import CycleContext
from scheduler_core.extender.scoring.profiles import load_profiles
from scheduler_core.extender.verbs import Extender
from scheduler_core.history_replay.what_if import RecordedInputs, ReplayResult, Scenario, replay, scenario_from_profile
from scheduler_core.traffic import TrafficQuery, TrafficSnapshot
from scheduler_core.traffic.store import TrafficStore

MB = 1e6
NOW = 1_800_000_000.0
GPU = "example.com/gpu"
NGINX = "docker.io/library/nginx:1.25.4"
THRESHOLD = 125_000_000  # bytes per second: 37.5 GB over the 5-minute window


def traffic_store(bytes_by_node: dict[str, float]) -> TrafficStore:
    """A snapshot fetched at ``NOW`` (the cycles' clock)."""
    store = TrafficStore()
    store.put(TrafficSnapshot(TrafficQuery(), dict(bytes_by_node), NOW, "test"))
    return store


def profile_yaml(scale: str, assumed: float = 300_000_000) -> str:
    return f"""
profiles:
- name: default
  plugins:
    filter: {{enabled: [{{name: TrafficThreshold}}, {{name: NodeResourceFitByCR}}]}}
    score: {{enabled: [{{name: NetworkTraffic, weight: 3}}, {{name: NodeResourceFitByCR, weight: 1}},
                       {{name: ImageLocality, weight: 1}}]}}
  pluginConfig:
  - {{name: NetworkTraffic, args: {{assumedBytesPerPod: {assumed}, herdDecaySeconds: 15}}}}
  - {{name: TrafficThreshold, args: {{maxBytesPerSecond: {THRESHOLD}}}}}
  answer: {{scale: {scale}}}
"""


def traffic_only_yaml(scale: str) -> str:
    return f"""
profiles:
- name: default
  plugins:
    filter: {{enabled: [{{name: TrafficThreshold}}]}}
    score: {{enabled: [{{name: NetworkTraffic, weight: 1}}]}}
  answer: {{scale: {scale}}}
"""


def record_cycle(
    config: str, rng: random.Random, *, nodes: int = 14, binds: int = 25, gpu: bool | None = None
) -> tuple[RecordedInputs, dict[str, Any], PrioritizeRecord]:
    """Filter then prioritize through the engine, with recent binds raising some nodes' traffic estimates; the
    records go through JSON as the spool and the database keep them."""
    profile = load_profiles(config)["default"]
    names = [f"node-{i:02d}" for i in range(nodes)]
    # Quiet nodes (a few MB) up to busy ones (GBs); node-01 just under the threshold, so that only its herd bytes
    # would put it over: the threshold judges measured bytes only.
    measured = {name: 10 ** rng.uniform(6, 10) for name in names}
    measured[names[1]] = THRESHOLD * 300 - 1 * MB
    measured.pop(names[-1])  # one node without a series: neutral, and no herd bytes
    with_image = frozenset({NGINX})
    infos = [NodeInfo(n, images=with_image if rng.random() < 0.4 else frozenset()) for n in names]
    specs = {
        n: NodeResourcesSpec({GPU: rng.random() < 0.8}, {GPU: rng.randint(0, 100)}) for n in names if rng.random() < 0.9
    }
    cluster = StaticCluster(infos, specs)
    wants_gpu = rng.random() < 0.5 if gpu is None else gpu
    pod = PodInfo(
        namespace="shop",
        name="web-1",
        uid="uid-1",
        requested_resources=frozenset({GPU, "cpu"}) if wants_gpu else frozenset({"cpu"}),
        images=(NGINX,),
    )
    # Binds mostly on the quietest nodes (where a herd goes), each up to 15 s old.
    quiet = [*sorted(measured, key=measured.__getitem__)[:4], names[1], names[-1]]
    bound = [rng.choice(quiet) if rng.random() < 0.8 else rng.choice(names) for _ in range(binds)]
    recent = RecentBinds(tuple(bound), np.array([NOW - rng.uniform(0, 14) for _ in bound]), 15.0)
    store = traffic_store(measured)

    def context() -> CycleContext:
        return CycleContext(pod=pod, cluster=cluster, traffic=store, now=NOW, binds=recent)

    decision, filtered = run_filter(profile, context(), infos)
    passed = [infos[i] for i in decision.passed]
    prioritized = run_prioritize(profile, context(), passed)
    inputs = RecordedInputs.from_records(
        msgspec.json.decode(msgspec.json.encode(filtered), type=FilterRecord),
        msgspec.json.decode(msgspec.json.encode(prioritized), type=PrioritizeRecord),
        profile.describe()["filter"],
    )
    return inputs, profile.describe(), prioritized


def scored(result: ReplayResult) -> tuple[list[str], list[float | None], list[int | None]]:
    passed = [o for o in result.nodes if o.passed]
    return [o.node for o in passed], [o.final for o in passed], [o.extender for o in passed]


@pytest.mark.parametrize("scale", ["fixed", "spread"])
@pytest.mark.parametrize("seed", range(12))
def test_replaying_under_the_recorded_profile_gives_back_every_final_and_answer_exactly(scale: str, seed: int) -> None:
    inputs, description, recorded = record_cycle(profile_yaml(scale), random.Random(seed))
    (traffic,) = [p for p in recorded.plugins if p.name == "NetworkTraffic"]
    assert any(traffic.herd_bytes), "the binds raised some nodes' estimates"
    assert recorded.answer_scale == scale

    scenario = scenario_from_profile(description)
    result = replay(inputs, scenario)

    assert scenario.answer_scale == scale
    nodes, finals, answers = scored(result)
    assert nodes == recorded.nodes
    assert finals == recorded.final, "to the last bit: the engine's arithmetic over the recorded figures"
    assert answers == recorded.extender
    assert any("Herd bytes are kept as recorded" in note for note in result.notes)


def test_herd_bytes_count_in_the_traffic_score_but_not_in_the_threshold() -> None:
    """Three quiet nodes; ``node-a`` took 20 binds (20 × 300 MB assumed) since the snapshot."""
    profile = load_profiles(traffic_only_yaml("fixed"))["default"]
    nodes = [NodeInfo(n) for n in ("node-a", "node-b", "node-c")]
    binds = RecentBinds(("node-a",) * 20, np.full(20, NOW), 15.0)
    store = traffic_store({"node-a": 1 * MB, "node-b": 2000 * MB, "node-c": 4000 * MB})

    def context() -> CycleContext:
        pod = PodInfo(namespace="shop", name="web-1", uid="u")
        return CycleContext(pod=pod, cluster=StaticCluster(nodes), traffic=store, now=NOW, binds=binds)

    _, filtered = run_filter(profile, context(), nodes)
    recorded = run_prioritize(profile, context(), nodes)
    inputs = RecordedInputs.from_records(filtered, recorded, profile.describe()["filter"])

    result = replay(inputs, scenario_from_profile(profile.describe()))
    # node-a's estimate is 1 MB + 6000 MB: the highest, so it scores 0 and node-b 100 − 2000·100/6001.
    assert recorded.plugins[0].herd_bytes == [6000 * MB, 0.0, 0.0]
    assert {o.node: o.terms["NetworkTraffic"] for o in result.nodes} == {
        "node-a": 0.0,
        "node-b": round(100 - 2000 * (100 / 6001), 4),
        "node-c": round(100 - 4000 * (100 / 6001), 4),
    }
    assert result.preferred == "node-b"
    assert [o.extender for o in result.nodes] == recorded.extender == [0, 7, 3]
    # A threshold of 10 MB/s (3000 MB over 5 min) fails node-c on its measured bytes; node-a stays in although its
    # estimate (6001 MB) is above: the threshold never judged herd bytes.
    stricter = replay(inputs, replace(scenario_from_profile(profile.describe()), max_bytes_per_second=10 * MB))
    assert [o.node for o in stricter.nodes if o.passed] == ["node-a", "node-b"]
    assert stricter.outcome("node-a").terms["NetworkTraffic"] == 0.0  # type: ignore[union-attr]


def spread_rule(finals: list[float]) -> list[int]:
    low, high = min(finals), max(finals)
    if high == low:
        return [10] * len(finals)  # each is the best
    rounded = [math.floor(10 * (f - low) / (high - low) + 0.5 + 1e-9) for f in finals]
    return [a if f == high else min(a, 9) for a, f in zip(rounded, finals, strict=True)]  # 10 kept for the best


def fixed_rule(finals: list[float]) -> list[int]:
    return [math.floor(f / 10 + 0.5 + 1e-9) for f in finals]


@pytest.mark.parametrize(("recorded_scale", "other_scale"), [("fixed", "spread"), ("spread", "fixed")])
@pytest.mark.parametrize("seed", range(8))
def test_switching_the_scale_changes_only_the_answers_as_the_formula_says(
    recorded_scale: str, other_scale: str, seed: int
) -> None:
    inputs, description, recorded = record_cycle(profile_yaml(recorded_scale), random.Random(100 + seed))
    assert inputs.answer_scale == recorded_scale

    same = replay(inputs, scenario_from_profile(description))
    other = replay(inputs, replace(scenario_from_profile(description), answer_scale=other_scale))

    _, finals, answers = scored(other)
    assert finals == recorded.final, "the scale changes what is answered, never the final scores"
    assert other.preferred == same.preferred
    rule = spread_rule if other_scale == "spread" else fixed_rule
    assert answers == rule(recorded.final)
    assert scored(same)[2] == recorded.extender
    if other_scale == "spread" and len(set(recorded.final)) > 1:
        assert other.answer_bounds == (min(recorded.final), max(recorded.final))
        assert max(answers) == 10  # type: ignore[type-var]
        assert min(answers) == 0  # type: ignore[type-var]
    else:
        assert other.answer_bounds is None


def test_close_finals_tie_under_fixed_and_are_told_apart_under_spread() -> None:
    """Traffic only: 40, 44 and 100 MB score 60, 56 and 0. Fixed answers 6, 6, 0: kube-scheduler sees a tie
    between our best node and a worse one. Spread answers 10, 9 (10 × 56/60 = 9.33), 0."""
    profile = load_profiles(traffic_only_yaml("fixed"))["default"]
    nodes = [NodeInfo(n) for n in ("node-a", "node-b", "node-c")]
    store = traffic_store({"node-a": 40 * MB, "node-b": 44 * MB, "node-c": 100 * MB})
    ctx = CycleContext(
        pod=PodInfo(namespace="shop", name="web-1", uid="u"), cluster=StaticCluster(nodes), traffic=store
    )
    recorded = run_prioritize(profile, ctx, nodes)
    inputs = RecordedInputs.from_records(None, recorded)
    fixed = scenario_from_profile(profile.describe())

    as_recorded = replay(inputs, fixed)
    spread = replay(inputs, replace(fixed, answer_scale="spread"))

    assert scored(as_recorded)[1:] == ([60.0, 56.0, 0.0], [6, 6, 0]) == (recorded.final, recorded.extender)
    assert preference_tied(recorded.final, recorded.extender)
    assert scored(spread)[2] == [10, 9, 0]
    assert not preference_tied(recorded.final, [10, 9, 0])
    assert spread.answer_bounds == (0.0, 60.0)
    assert as_recorded.notes == spread.notes == []


def test_the_scenario_of_a_profile_and_of_a_record_carry_its_scale() -> None:
    assert Scenario(filters=(), weights={}).answer_scale == DEFAULT_ANSWER_SCALE
    for scale in ("fixed", "spread"):
        description = load_profiles(traffic_only_yaml(scale))["default"].describe()
        assert scenario_from_profile(description).answer_scale == scale
    assert scenario_from_profile({"name": "old", "filter": [], "score": []}).answer_scale == DEFAULT_ANSWER_SCALE
    # A record from before the choice existed answered on the fixed scale (the record's default): it says so.
    legacy = {"nodes": ["a", "b"], "plugins": [], "final": [45.0, 12.0], "extender": [5, 1]}
    assert RecordedInputs.from_records(None, msgspec.convert(legacy, PrioritizeRecord)).answer_scale == "fixed"
    spread = msgspec.convert({**legacy, "answer_scale": "spread"}, PrioritizeRecord)
    assert RecordedInputs.from_records(None, spread).answer_scale == "spread"
    only_filter = FilterRecord(nodes=["a"], passed=["a"])
    assert RecordedInputs.from_records(only_filter, None).answer_scale == DEFAULT_ANSWER_SCALE


def test_a_node_unknown_to_the_node_cache_answers_zero_and_stays_out_of_the_spread() -> None:
    """kube-scheduler sent ``ghost`` to prioritize although the synced cache does not hold it: it answered 0 and
    the spread mapped the other nodes alone. The replay does the same, under either scale."""

    class SyncedCache(StaticCluster):
        knows_all_nodes = True

    names = ["node-1", "ghost", "node-2", "node-3"]
    ext = Extender(
        load_profiles(traffic_only_yaml("spread")),
        cluster=SyncedCache([NodeInfo(n) for n in names if n != "ghost"]),
        traffic=traffic_store({"node-1": 10 * MB, "node-2": 30 * MB, "node-3": 50 * MB, "ghost": 0.0}),
        binder=SimulatedBinder(),
        clock=lambda: NOW,
    )
    pod = {"metadata": {"name": "web-1", "namespace": "shop", "uid": "u"}, "spec": {"containers": []}}
    body = msgspec.json.encode({"Pod": pod, "Nodes": None, "NodeNames": names})
    recorded = ext.prioritize("default", body).event.prioritize
    assert recorded is not None
    inputs = RecordedInputs.from_records(None, recorded)
    scenario = scenario_from_profile(ext.profiles["default"].describe())

    result = replay(inputs, scenario)
    fixed = replay(inputs, replace(scenario, answer_scale="fixed"))

    assert scored(result)[1:] == (recorded.final, recorded.extender)
    assert recorded.extender[1] == 0
    assert recorded.final[1] == 0.0
    assert result.answer_bounds == (min(recorded.final[0], *recorded.final[2:]), max(recorded.final))
    assert scored(fixed)[2] == [
        fixed_rule([f])[0] if n != "ghost" else 0 for n, f in zip(names, recorded.final, strict=True)
    ]
    assert any("unknown to the node cache" in note for note in result.notes)


def test_filter_record_only_replays_answer_on_the_scenario_scale() -> None:
    """A cycle kube-scheduler never prioritized (a single feasible node) still replays: no scale was recorded."""
    filtered = FilterRecord(nodes=["a", "b"], passed=["a", "b"], traffic_bytes=[1 * MB, 3 * MB])
    inputs = RecordedInputs.from_records(filtered, None, ["TrafficThreshold"])
    scenario = Scenario(filters=("TrafficThreshold",), weights={"NetworkTraffic": 1}, answer_scale="spread")
    result = replay(inputs, scenario)
    assert scored(result)[1:] == ([round(100 - 100 / 3, 4), 0.0], [10, 0])
