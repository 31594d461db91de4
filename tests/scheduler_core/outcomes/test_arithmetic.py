"""The outcome arithmetic: the estimate a prioritize record made, errors, runner-ups, spread (table-driven)."""

from __future__ import annotations

import math

import pytest

from scheduler_core.extender.record.structs import PluginScores, PrioritizeRecord
from scheduler_core.outcomes.arithmetic import (
    WindowOutcome,
    bucket_counts,
    estimate_of,
    quieter_runner_ups,
    relative_error,
    spread,
    stayed_quietest,
)


def record(**traffic: list) -> PrioritizeRecord:
    return PrioritizeRecord(
        nodes=["a", "b", "c", "d"],
        plugins=[PluginScores(name="NetworkTraffic", weight=1, scores=[0, 0, 0, 0], **traffic)],
        final=[40.0, 90.0, 70.0, 80.0],
        extender=[4, 9, 7, 8],
    )


def test_the_estimate_is_the_measured_plus_the_assumed_bytes_and_the_runner_ups_the_next_best_scored():
    prioritize = record(raw=[1.0, 2.0e6, 3.0, 4.0], herd_bytes=[0.0, 3.0e8, 0.0, 0.0])

    estimate = estimate_of(prioritize, "b", query_window_seconds=300)

    assert estimate is not None
    assert (estimate.measured_bytes, estimate.assumed_bytes, estimate.total_bytes) == (2.0e6, 3.0e8, 3.02e8)
    assert estimate.runner_ups == ["d", "c"]  # finals 80 and 70, after b's 90
    assert estimate.over(60) == pytest.approx(3.02e8 * 60 / 300)


@pytest.mark.parametrize(
    ("prioritize", "chosen"),
    [(None, "b"), (record(raw=[1.0, 2.0, 3.0, 4.0]), "z"), (record(), "b")],
    ids=["no prioritize call", "chosen not a candidate", "no traffic figures"],
)
def test_no_estimate_without_network_traffic_figures_for_the_chosen_node(prioritize, chosen):
    assert estimate_of(prioritize, chosen, query_window_seconds=300) is None


@pytest.mark.parametrize(
    ("outcome", "estimate", "expected"),
    [(3.0, 1.0, 2.0), (0.5, 1.0, -0.5), (1.0, 1.0, 0.0), (None, 1.0, None), (1.0, 0.0, None), (1.0, None, None)],
)
def test_the_relative_error_is_none_rather_than_a_number_when_either_side_is_unknown(outcome, estimate, expected):
    assert relative_error(outcome, estimate) == expected


def test_a_runner_up_that_received_less_ended_quieter():
    window = WindowOutcome(seconds=60, node_bytes=10.0, runner_up_bytes={"x": 20.0, "y": 5.0, "z": None})
    assert quieter_runner_ups(window) == ["y"]
    assert stayed_quietest(window) is False
    assert stayed_quietest(WindowOutcome(seconds=60, node_bytes=1.0, runner_up_bytes={"x": 2.0})) is True
    assert stayed_quietest(WindowOutcome(seconds=60, node_bytes=1.0, runner_up_bytes={"x": None})) is None


def test_the_spread_is_the_population_stdev_over_the_mean_and_the_busiest_over_the_quietest():
    found = spread([1.0, 3.0])
    assert found is not None
    assert (found.mean, found.stdev, found.cv, found.max_over_min) == (2.0, 1.0, 0.5, 3.0)
    zero = spread([0.0, 4.0])
    assert zero is not None
    assert zero.max_over_min is None
    assert spread([]) is None
    assert math.isclose(spread([5.0, 5.0]).cv, 0.0)


def test_bucket_counts_are_cumulative_with_the_total_last():
    assert bucket_counts([-0.95, 0.1, 0.1, 20.0], bounds=(-0.9, 0.0, 0.25)) == [1, 1, 3, 4]
