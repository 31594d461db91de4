"""The comparison's arithmetic without a database: the learned table as it stood at a moment (no hindsight, the
lookback, the minimum sample count) and the herd bytes rebuilt from recorded binds."""

from __future__ import annotations

import pytest

from scheduler_core.extender.protocol.workloads import WorkloadKey
from scheduler_core.extender.scoring.workload_traffic import MIN_SAMPLES, PodSample
from scheduler_core.history_replay.learning import Bind, LearnedHistory, MeasuredPod, herd_bytes

API = WorkloadKey("shop", "Deployment", "api")
DAY = 86400.0


def pods(count: int, *, bound_at: float, rate: float = 6000.0, seconds: int = 900) -> list[MeasuredPod]:
    return [
        MeasuredPod(i, API, PodSample(rate, bound_at + i), available_at=bound_at + i + seconds) for i in range(count)
    ]


@pytest.mark.parametrize(
    ("at", "learned_from"),
    [
        (1000.0 + 4 + 900 - 1, None),  # the fifth pod's window ends a second later
        (1000.0 + 4 + 900, MIN_SAMPLES),  # ... and counts from the moment it ended
        (1000.0 + 5 + 900, MIN_SAMPLES + 1),
        (1000.0 + 7 * DAY + 3, None),  # the first three bound before the lookback: three left
    ],
)
def test_a_workload_is_learned_only_from_the_pods_whose_window_had_ended(at: float, learned_from: int | None) -> None:
    history = LearnedHistory(pods(MIN_SAMPLES + 1, bound_at=1000.0))

    found = history.learned(API, at)

    assert (found.pods if found is not None else None) == learned_from
    if found is not None:
        assert found.bytes_per_second == 6000.0


def test_the_herd_weighs_each_bind_by_its_age_and_its_own_assumed_bytes_leaving_the_cycles_own_pod_out() -> None:
    binds = [
        Bind(1, 100.0, "node-2", API),  # 10 s old at 110: weight 1 − 10/20 = 0.5
        Bind(2, 105.0, "node-2", None),  # 5 s old: 0.75
        Bind(3, 109.0, "node-3", None),  # the cycle's own pod
        Bind(4, 80.0, "node-3", None),  # 30 s old: weighs nothing
        Bind(5, 108.0, "node-9", None),  # not a candidate
    ]
    assumed = {1: 1000.0, 2: 300.0, 3: 5000.0, 4: 5000.0, 5: 5000.0}

    herd, counts = herd_bytes(binds, ["node-2", "node-3"], at=110.0, decay_seconds=20.0, assumed=assumed, own_cycle=3)

    assert herd.tolist() == [0.5 * 1000 + 0.75 * 300, 0.0]
    assert counts == [2, 0]
