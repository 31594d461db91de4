"""The herd estimate, the missing/stale policy, and how both show in the record (plain core, no services)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from scheduler_core.extender.protocol.binding import BindOutcome, SimulatedBinder
from scheduler_core.extender.protocol.cluster import StaticCluster
from scheduler_core.extender.protocol.wire import encode
from scheduler_core.extender.scoring.herd import NO_BINDS, HerdEstimator, InMemoryBindLog
from scheduler_core.extender.scoring.profiles import load_profiles
from scheduler_core.extender.verbs import Extender
from scheduler_core.traffic import TrafficQuery, TrafficSnapshot
from scheduler_core.traffic.store import TrafficStore
from tests.support.inputs import Inputs, traffic_store

POD = {"metadata": {"name": "web-1", "namespace": "shop", "uid": "uid-1"}, "spec": {"containers": []}}
MB = 1_000_000.0


def profile_yaml(network_args: str = "", threshold_args: str = "") -> str:
    return f"""
profiles:
- name: default
  pluginConfig:
  - {{name: NetworkTraffic, args: {{{network_args}}}}}
  - {{name: TrafficThreshold, args: {{{threshold_args}}}}}
"""


def extender(store: TrafficStore, config: str | None = None, *, decay: float = 15.0, now: float | None = None):
    clock = (lambda: now) if now is not None else time.time
    inputs = Inputs(store, InMemoryBindLog(decay, default_decay_seconds=decay))
    ext = Extender(
        load_profiles(config),
        cluster=StaticCluster(),
        traffic=store,
        binder=SimulatedBinder(),
        clock=clock,
        inputs=inputs,
    )
    return ext, inputs


def names(nodes: list[str]) -> bytes:
    return encode({"Pod": POD, "Nodes": None, "NodeNames": nodes})


def bind(ext: Extender, node: str, uid: str) -> None:
    body = encode({"PodName": f"p-{uid}", "PodNamespace": "shop", "PodUID": uid, "Node": node})
    assert ext.bind("default", body).status == 200


# --- the estimate itself ----------------------------------------------------------------------------------


def one_node(herd: HerdEstimator, bind_times: list[float], now: float) -> float:
    """The extra bytes of one node bound at ``bind_times``."""
    positions = np.zeros(len(bind_times), dtype=np.intp)
    return float(herd.extra_bytes_at(positions, np.array(bind_times, dtype=np.float64), now, 1)[0])


@pytest.mark.parametrize(
    ("ages", "expected"),
    [
        ([0.0], 1.0),
        ([7.5], 0.5),
        ([15.0], 0.0),
        ([60.0], 0.0),
        ([0.0, 3.0, 12.0], 1.0 + 0.8 + 0.2),
        ([-2.0], 1.0),  # stamped by a replica whose clock runs ahead: counts fully, never more
    ],
    ids=["just-bound", "half-decayed", "decayed", "long-ago", "three-binds", "future-stamp"],
)
def test_each_bind_adds_the_assumed_bytes_decaying_linearly_to_zero(ages: list[float], expected: float) -> None:
    herd = HerdEstimator(bytes_per_pod=10 * MB, decay_seconds=15.0)
    now = 1_000.0
    assert one_node(herd, [now - age for age in ages], now) == pytest.approx(expected * 10 * MB)


@pytest.mark.parametrize(("per_pod", "decay"), [(0.0, 15.0), (10 * MB, 0.0)])
def test_zero_bytes_or_zero_decay_turns_the_estimate_off(per_pod: float, decay: float) -> None:
    herd = HerdEstimator(per_pod, decay)
    assert not herd.enabled
    assert one_node(herd, [100.0], 100.0) == 0.0


def test_the_bind_log_counts_a_pod_once_and_forgets_binds_past_its_horizon() -> None:
    binds = InMemoryBindLog(horizon_seconds=10.0)
    binds.record_bind(node="n1", pod="uid-a", at=100.0)
    binds.record_bind(node="n1", pod="uid-a", at=101.0)  # the bind verb, then a placement watcher
    binds.record_bind(node="n2", pod="uid-b", at=105.0)

    assert binds.recent_binds(106.0).by_node == {"n1": (100.0,), "n2": (105.0,)}
    assert binds.recent_binds(112.0).by_node == {"n2": (105.0,)}


# --- NetworkTraffic with recent binds ---------------------------------------------------------------------


def test_binds_raise_the_bound_nodes_traffic_and_the_record_shows_the_assumed_bytes() -> None:
    now = time.time()
    store = traffic_store({"quiet": 1 * MB, "mid": 200 * MB, "busy": 400 * MB})
    ext, _ = extender(store, profile_yaml("assumedBytesPerPod: 100000000"), now=now)
    bind(ext, "quiet", "u1")
    bind(ext, "quiet", "u2")

    record = ext.prioritize("default", names(["quiet", "mid", "busy"])).event.prioritize
    (traffic,) = record.plugins

    assert traffic.raw == [1 * MB, 200 * MB, 400 * MB], "raw stays what Prometheus measured"
    assert traffic.herd_bytes == [200 * MB, 0.0, 0.0]
    assert traffic.scores == pytest.approx([100 - 201 / 400 * 100, 50.0, 0.0], abs=1e-3)
    assert traffic.herd_binds == [2, 0, 0], "the assumed bytes come from two binds"
    assert traffic.herd_newest_age_ms == [0, None, None]


def test_the_record_counts_only_the_binds_that_still_weigh_and_ages_the_newest() -> None:
    now = time.time()
    store = traffic_store({"quiet": 1 * MB, "mid": 200 * MB, "busy": 400 * MB})
    ext, inputs = extender(store, profile_yaml("assumedBytesPerPod: 100000000, herdDecaySeconds: 10"), now=now)
    inputs.binds.record_bind(node="quiet", pod="old", at=now - 12.0)  # decayed: no bytes, not counted
    inputs.binds.record_bind(node="quiet", pod="a", at=now - 4.0)
    inputs.binds.record_bind(node="mid", pod="b", at=now - 7.5)
    inputs.binds.record_bind(node="mid", pod="c", at=now - 2.25)

    (traffic,) = ext.prioritize("default", names(["quiet", "mid", "busy"])).event.prioritize.plugins

    assert traffic.herd_binds == [1, 2, 0]
    assert traffic.herd_newest_age_ms == [4000, 2250, None]
    assert traffic.herd_bytes == [60 * MB, 25 * MB + 77.5 * MB, 0.0]


def test_without_binds_the_record_has_no_herd_bytes_and_scores_are_unchanged() -> None:
    store = traffic_store({"a": 1 * MB, "b": 2 * MB})
    ext, _ = extender(store)

    (traffic,) = ext.prioritize("default", names(["a", "b"])).event.prioritize.plugins

    assert traffic.herd_bytes == []
    assert traffic.scores == pytest.approx([50.0, 0.0])


def test_assumed_bytes_zero_turns_the_mitigation_off_so_the_quiet_node_keeps_winning() -> None:
    now = time.time()
    store = traffic_store({"quiet": 1 * MB, "busy": 400 * MB})
    ext, _ = extender(store, profile_yaml("assumedBytesPerPod: 0"), now=now)
    for i in range(20):
        bind(ext, "quiet", f"u{i}")

    result = ext.prioritize("default", names(["quiet", "busy"]))

    assert result.body == b'[{"Host":"quiet","Score":10},{"Host":"busy","Score":0}]'
    assert result.event.prioritize.plugins[0].herd_bytes == []


def test_herd_decay_seconds_overrides_the_refresh_interval() -> None:
    store = traffic_store({"quiet": 1 * MB, "busy": 400 * MB})
    ext, inputs = extender(store, profile_yaml("assumedBytesPerPod: 100000000, herdDecaySeconds: 60"), decay=120.0)
    inputs.binds.record_bind(node="quiet", pod="u1", at=time.time() - 30)

    (traffic,) = ext.prioritize("default", names(["quiet", "busy"])).event.prioritize.plugins

    assert traffic.herd_bytes[0] == pytest.approx(50 * MB, rel=1e-3), "half of the 60 s decay has passed"


def test_only_successful_binds_count() -> None:
    class RefusingBinder:
        def bind(self, *, namespace: str, name: str, uid: str, node: str) -> BindOutcome:
            return BindOutcome(error="pod already bound elsewhere", detail="409")

    store = traffic_store({"quiet": 1 * MB})
    ext, inputs = extender(store)
    ext.binder = RefusingBinder()
    ext.bind("default", encode({"PodName": "p", "PodNamespace": "shop", "PodUID": "u", "Node": "quiet"}))

    assert inputs.binds.recent_binds(time.time()).by_node == {}


def test_the_inputs_are_read_once_per_verb_call_and_not_by_bind() -> None:
    store = traffic_store({"a": 1 * MB, "b": 2 * MB})
    ext, inputs = extender(store)

    ext.filter("default", names(["a", "b"]))
    ext.prioritize("default", names(["a", "b"]))
    bind(ext, "a", "u1")

    assert inputs.reads == 2, "filter and prioritize read once each, whatever the number of plugins"


# --- freshness and the missing/stale policy ---------------------------------------------------------------


def test_a_stale_snapshot_scores_neutral_says_metrics_stale_and_records_its_age() -> None:
    ext, _ = extender(traffic_store({"a": 1 * MB, "b": 2 * MB}, age=300.0))

    filtered = ext.filter("default", names(["a", "b"])).event.filter
    (traffic,) = ext.prioritize("default", names(["a", "b"])).event.prioritize.plugins

    assert traffic.scores == [50.0, 50.0]
    assert traffic.note == "metrics stale"
    assert traffic.metric_age_seconds == pytest.approx(300.0, abs=5.0)
    assert filtered.metric_note == "metrics stale"
    assert filtered.passed == ["a", "b"], "neutral policy: stale metrics fail nobody"


@pytest.mark.parametrize(
    "threshold_args", ["missingPolicy: fail", "failOnMissing: true"], ids=["missingPolicy", "failOnMissing"]
)
def test_the_fail_policy_fails_nodes_without_usable_metrics(threshold_args: str) -> None:
    ext, _ = extender(traffic_store({"a": 1 * MB}, age=300.0), profile_yaml(threshold_args=threshold_args))

    result = ext.filter("default", names(["a", "b"])).event.filter

    assert result.passed == []
    assert result.failures["a"] == {"TrafficThreshold": "traffic metrics unavailable: metrics stale"}


def test_the_fail_policy_scores_unmeasured_nodes_zero_instead_of_neutral() -> None:
    ext, _ = extender(traffic_store({"a": 1 * MB, "b": 2 * MB}), profile_yaml("missingPolicy: fail"))

    (traffic,) = ext.prioritize("default", names(["a", "b", "new"])).event.prioritize.plugins

    assert traffic.scores == pytest.approx([50.0, 0.0, 0.0])
    assert traffic.notes == {"new": "no traffic series for node"}


def test_a_snapshot_carrying_an_error_is_used_and_the_record_says_why_it_may_be_old() -> None:
    store = TrafficStore()
    store.put(
        TrafficSnapshot(TrafficQuery(), {"a": 1 * MB, "b": 2 * MB}, time.time() - 20, "test", error="redis unavailable")
    )
    ext, _ = extender(store)

    filtered = ext.filter("default", names(["a", "b"])).event.filter
    (traffic,) = ext.prioritize("default", names(["a", "b"])).event.prioritize.plugins

    assert traffic.raw == [1 * MB, 2 * MB]
    assert traffic.note == "redis unavailable"
    assert filtered.metric_note == "redis unavailable"
    assert filtered.traffic_bytes == [1 * MB, 2 * MB]


def test_a_query_that_never_succeeded_is_no_data_with_its_error() -> None:
    store = TrafficStore()
    store.put(TrafficSnapshot(TrafficQuery(), {}, 0.0, "", error="connection refused"))
    ext, _ = extender(store)

    (traffic,) = ext.prioritize("default", names(["a"])).event.prioritize.plugins

    assert traffic.note == "no traffic data yet; connection refused"
    assert traffic.metric_age_seconds is None


@pytest.mark.parametrize(
    ("args", "field"),
    [("assumedBytesPerPod: -1", "assumedBytesPerPod"), ("herdDecaySeconds: -5", "herdDecaySeconds")],
)
def test_negative_herd_args_are_refused_naming_the_field(args: str, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        load_profiles(profile_yaml(args))


def test_missing_policy_accepts_only_neutral_or_fail() -> None:
    with pytest.raises(ValueError, match="missingPolicy"):
        load_profiles(profile_yaml("missingPolicy: ignore"))


def test_no_binds_is_the_default_context() -> None:
    assert NO_BINDS.by_node == {}


def test_the_vectorized_estimate_is_the_per_node_sum_in_whole_bytes() -> None:
    import random

    rng = random.Random(11)
    herd = HerdEstimator(bytes_per_pod=rng.uniform(1e6, 5e8), decay_seconds=15.0)
    now = 1_000_000.0
    # Some stamped in the future (another replica's clock), some decayed.
    binds = [(rng.randrange(50), now - rng.uniform(-1.0, 20.0)) for _ in range(2000)]

    column = herd.extra_bytes_at(
        np.array([p for p, _ in binds], dtype=np.intp), np.array([t for _, t in binds]), now, 60
    ).tolist()

    for position in range(60):
        times = [t for p, t in binds if p == position]
        # The estimate as a loop per node would add it up: linear decay, clamped at 0 and at 1; in whole bytes.
        expected = sum(herd.bytes_per_pod * max(0.0, 1.0 - max(0.0, now - t) / herd.decay_seconds) for t in times)
        assert column[position] == float(round(expected))


@pytest.mark.parametrize("with_missing", [False, True])
def test_each_score_is_the_per_node_formula_exactly_with_binds(with_missing: bool) -> None:
    """100 − (raw + herd)·100/max, node by node, as an auditor recomputes it: to the last bit before rounding."""
    import random

    rng = random.Random(23)
    nodes = [f"n{i:03d}" for i in range(300)]
    measured = {name: rng.uniform(0, 900 * MB) for name in nodes}
    if with_missing:
        for name in rng.sample(nodes, 30):
            del measured[name]
    now = time.time()
    ext, _ = extender(traffic_store(measured), profile_yaml("assumedBytesPerPod: 50000000"), now=now)
    for uid in range(40):
        bind(ext, rng.choice(nodes), f"u{uid}")

    (traffic,) = ext.prioritize("default", names(nodes)).event.prioritize.plugins

    effective = [
        None if raw is None else raw + (traffic.herd_bytes or [0.0] * 300)[i] for i, raw in enumerate(traffic.raw)
    ]
    assert any(traffic.herd_bytes), "the binds raised some nodes"
    highest = max(value for value in effective if value is not None)
    expected = [50.0 if value is None else float(np.round(100.0 - value * (100.0 / highest), 4)) for value in effective]
    assert traffic.scores == expected


def test_the_log_handed_to_verbs_stays_exactly_its_binds_through_rebinds_expiry_and_renumbering() -> None:
    """The log keeps its binds ready for the verbs, numbered by node, and updates them bind by bind: at every
    step they are the binds a plain scan of the log gives, and each bind's candidate position by number is the
    one found by name."""
    import random

    from scheduler_core.extender.scoring.herd import positions_by_number

    rng = random.Random(5)
    log = InMemoryBindLog(2.0)
    reference: dict[str, tuple[str, float]] = {}
    candidates = {f"n{i}": i for i in range(0, 300, 2)}  # every other node is a candidate
    known = None
    numbering = None
    numberings = 0
    now = 1000.0
    for step in range(12_000):
        now += rng.uniform(0.0, 0.01)
        node = f"n{rng.randrange(300)}" if step < 4000 else f"new-{step}"  # later, node names churn (autoscaling)
        pod = f"p{rng.randrange(max(0, step - 50), step + 1)}"  # some pods bound again, elsewhere, soon after
        log.record_bind(node=node, pod=pod, at=now)
        if pod not in reference or reference[pod][0] != node:
            reference[pod] = (node, now)
        if step % 97:
            continue
        binds = log.recent_binds(now)
        alive = {p: (n, t) for p, (n, t) in reference.items() if t >= now - 2.0}
        got = sorted(zip(binds.nodes, map(float, binds.times), strict=True))
        assert set(alive.values()) <= set(got) <= set(reference.values())
        assert min(at for _, at in got) >= now - 2.0 - 0.25, "pruned at most 0.25 s late"
        assert len(got) == len(set(got))
        if binds.id_names is not numbering:
            numbering, known = binds.id_names, None
            numberings += 1
        known = positions_by_number(binds.id_names, candidates, known)
        assert binds.node_ids is not None
        by_number = known[binds.node_ids].tolist()
        assert by_number == [candidates.get(name, -1) for name in binds.nodes]
    assert numberings > 1, "node names numbered over once they churned"
