"""The vectorized replay of a history replay gives exactly what ``scheduler_core.history_replay.what_if.replay``
gives."""

from __future__ import annotations

import dataclasses

import msgspec
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler_core.extender.record.structs import FilterRecord, PluginScores, PrioritizeRecord
from scheduler_core.history_replay.fast_replay import batch_key, batch_of, outcome_of, replay_batch, replay_columns
from scheduler_core.history_replay.recorded_cycles import SMALLEST_BYTES, columns_from_inputs
from scheduler_core.history_replay.what_if import RecordedInputs, Scenario, replay

FILTERS = ("TrafficThreshold", "NodeResourceFitByCR", "SomeOtherFilter")
SCORERS = ("NetworkTraffic", "NodeResourceFitByCR", "ImageLocality")
# Few distinct values, so that equal finals, ties on 0..10 and thresholds right at a figure happen often.
RAWS = st.one_of(st.none(), st.sampled_from([0.0, 1e6, 3e7, 3.75e10, 4e10, 6e10, 1.2e11]), st.floats(0, 1e11))
SCORES = st.one_of(st.sampled_from([0.0, 25.0, 50.0, 72.5, 100.0]), st.floats(0, 100).map(lambda v: round(v, 4)))


@st.composite
def recorded(draw: st.DrawFn) -> RecordedInputs:
    count = draw(st.integers(0, 12))
    nodes = [f"node-{i}" for i in draw(st.permutations(range(count)))]
    failures: dict[str, dict[str, str]] = {}
    for node in nodes:
        failing = draw(st.lists(st.sampled_from(FILTERS), max_size=2, unique=True))
        if failing:
            failures[node] = {p: f"{p} said no ({draw(st.integers(0, 2))})" for p in failing}
    passed = [n for n in nodes if n not in failures]
    with_filter = draw(st.booleans()) or count == 0
    traffic = draw(st.lists(RAWS, min_size=count, max_size=count)) if draw(st.booleans()) else []
    filter_record = FilterRecord(nodes=nodes, passed=passed, failures=failures, traffic_bytes=traffic)
    prioritize_record = None
    if draw(st.booleans()):
        pool = passed if with_filter else nodes
        # kube-scheduler may send fewer (another extender excluded some), in another order.
        sent = draw(st.permutations(pool)) if pool else []
        sent = list(sent[: draw(st.integers(0, len(sent)))]) if draw(st.booleans()) else list(sent)
        if not with_filter and not sent:
            sent = list(nodes)
        plugins = []
        names = draw(st.lists(st.sampled_from(SCORERS), unique=True))
        if "NetworkTraffic" not in names and draw(st.booleans()):
            names.insert(draw(st.integers(0, len(names))), "NetworkTraffic")
        for name in names:
            scores = draw(st.lists(SCORES, min_size=len(sent), max_size=len(sent)))
            applicable = draw(st.booleans()) or name == "NetworkTraffic"
            plugin = PluginScores(name=name, weight=draw(st.integers(1, 5)), scores=scores, applicable=applicable)
            if name == "NetworkTraffic":
                if traffic and with_filter and draw(st.booleans()):  # the filter's figures, as the engine records
                    plugin.raw = [traffic[nodes.index(n)] for n in sent]
                elif draw(st.booleans()):
                    plugin.raw = draw(st.lists(RAWS, min_size=len(sent), max_size=len(sent)))
                if draw(st.booleans()):
                    plugin.herd_bytes = draw(
                        st.lists(st.sampled_from([0.0, 0.0, 3e8, 6e8]), min_size=len(sent), max_size=len(sent))
                    )
            plugins.append(plugin)
        prioritize_record = PrioritizeRecord(
            nodes=sent,
            plugins=plugins,
            final=[0.0] * len(sent),
            extender=[0] * len(sent),
            answer_scale=draw(st.sampled_from(["fixed", "spread"])),
        )
    return RecordedInputs(filter_record if with_filter else None, prioritize_record, recorded_filters=FILTERS[:2])


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    weights = {name: draw(st.integers(0, 4)) for name in draw(st.permutations(SCORERS))[: draw(st.integers(0, 3))]}
    return Scenario(
        filters=tuple(draw(st.lists(st.sampled_from(FILTERS), unique=True))),
        weights=weights,
        max_bytes_per_second=draw(st.sampled_from([1e5, 1e8, 1.25e8, 2e8, 4e10 / 300])),
        fail_on_missing=draw(st.booleans()),
        window_seconds=draw(st.sampled_from([0, 60, 300])),
        answer_scale=draw(st.sampled_from(["fixed", "spread"])),
    )


def not_byte_counts(inputs: RecordedInputs) -> bool:
    figures = list(inputs.filter.traffic_bytes) if inputs.filter is not None else []
    for plugin in inputs.prioritize.plugins if inputs.prioritize is not None else ():
        figures += [*plugin.raw, *plugin.herd_bytes]
    return any(f is not None and 0 < f < SMALLEST_BYTES for f in figures)


def assert_same(inputs: RecordedInputs, scenario: Scenario, fast=None) -> None:
    if fast is None:
        columns = columns_from_inputs(inputs)
        if columns is None:  # left to replay() itself: only figures that are no byte counts
            assert not_byte_counts(inputs)
            return
        fast = replay_columns(columns, scenario)
    slow = outcome_of(replay(inputs, scenario))
    assert fast.passed.tolist() == slow.passed.tolist()
    assert fast.finals.tobytes() == slow.finals.tobytes(), (fast.finals, slow.finals)
    assert fast.answers.tolist() == slow.answers.tolist()
    assert fast.preferred == slow.preferred
    assert fast.tied == slow.tied
    assert fast.partial == slow.partial
    for position in range(len(inputs.candidates)):
        assert dict(fast.reasons(position)) == dict(slow.reasons(position)), position


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(recorded(), scenarios())
def test_the_vectorized_replay_gives_what_replay_gives(inputs, scenario):
    assert_same(inputs, scenario)


def test_a_cycle_the_columns_cannot_hold_is_left_to_replay():
    duplicate = RecordedInputs(FilterRecord(nodes=["a", "a"], passed=["a", "a"]), None)
    unknown = RecordedInputs(
        FilterRecord(nodes=["a", "b"], passed=["a"], failures={"b": {"NodeCache": "node unknown"}}), None
    )
    assert columns_from_inputs(duplicate) is None
    assert columns_from_inputs(unknown) is None
    nan = RecordedInputs(FilterRecord(nodes=["a"], passed=["a"], traffic_bytes=[float("nan")]), None)
    assert columns_from_inputs(nan) is None
    assert np.isnan(float("nan"))


def _variant(inputs: RecordedInputs, draw: st.DrawFn) -> RecordedInputs:
    """The same candidates, verdicts, traffic figures and nodes sent, with other scores and herd bytes."""
    if inputs.prioritize is None:
        return inputs
    plugins = []
    for plugin in inputs.prioritize.plugins:
        count = len(plugin.scores)
        plugin = msgspec.structs.replace(plugin, scores=draw(st.lists(SCORES, min_size=count, max_size=count)))
        if plugin.name == "NetworkTraffic":
            herd = draw(st.lists(st.sampled_from([0.0, 3e8, 6e8]), min_size=count, max_size=count))
            plugin = msgspec.structs.replace(plugin, herd_bytes=herd)
        plugins.append(plugin)
    return dataclasses.replace(inputs, prioritize=msgspec.structs.replace(inputs.prioritize, plugins=plugins))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(recorded(), scenarios(), st.data())
def test_cycles_replayed_together_give_what_each_gives_alone(inputs, scenario, data):
    if data.draw(st.booleans()):  # the herd bytes, which differ from cycle to cycle, count
        scenario = dataclasses.replace(scenario, weights={**scenario.weights, "NetworkTraffic": 2})
    variants = [inputs] + [_variant(inputs, data.draw) for _ in range(data.draw(st.integers(1, 5)))]
    columns = [columns_from_inputs(v) for v in variants]
    if any(c is None for c in columns):
        assert any(not_byte_counts(v) for v in variants)
        return
    first = columns[0]
    shared = [dataclasses.replace(c, shape=first.shape) for c in columns]  # as the reader shares one shape
    groups: dict = {}
    for index, c in enumerate(shared):
        groups.setdefault(batch_key(c), []).append(index)
    for members in groups.values():
        batch = replay_batch([shared[i] for i in members], scenario)
        for row, index in enumerate(members):
            assert_same(variants[index], scenario, batch.outcome(row))
            # The rejections of any set of nodes, as the report counts them, from the reasons replay() gives.
            slow = batch_of(outcome_of(replay(variants[index], scenario)), variants[index].candidates, None)
            mask = ~batch.passed
            assert sorted(batch.rejections(mask)) == sorted(slow.rejections(mask))
