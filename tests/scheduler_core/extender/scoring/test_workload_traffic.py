"""Traffic learned per workload: the owner climb, the decayed percentile, and what a prioritize records and explains
(through the verbs: the table is what the background run leaves in the store the verbs read)."""

from __future__ import annotations

import time

import pytest

from scheduler_core.explanation.explain import explain
from scheduler_core.explanation.recompute import recompute_explanation
from scheduler_core.extender.protocol.binding import SimulatedBinder
from scheduler_core.extender.protocol.cluster import StaticCluster
from scheduler_core.extender.protocol.wire import encode
from scheduler_core.extender.protocol.workloads import WorkloadKey, workload_of
from scheduler_core.extender.scoring.herd import InMemoryBindLog
from scheduler_core.extender.scoring.profiles import load_profiles
from scheduler_core.extender.scoring.traffic_terms import TrafficTerms
from scheduler_core.extender.scoring.workload_traffic import (
    LearnedTrafficStore,
    PodSample,
    decayed_percentile,
    learn,
    rate_after_warmup,
)
from scheduler_core.extender.verbs import Extender
from tests.support.inputs import Inputs, traffic_store

MB = 1_000_000.0
DAY = 86400.0
WEB = WorkloadKey("shop", "Deployment", "web")


def profile_yaml(network_args: str) -> str:
    return f"""
profiles:
- name: default
  pluginConfig:
  - {{name: NetworkTraffic, args: {{{network_args}}}}}
"""


def pod(annotations: dict[str, str] | None = None) -> dict[str, object]:
    meta: dict[str, object] = {
        "name": "web-5d8f7c9b4-x2x7q",
        "namespace": "shop",
        "uid": "uid-1",
        "ownerReferences": [{"kind": "ReplicaSet", "name": "web-5d8f7c9b4", "controller": True}],
    }
    if annotations:
        meta["annotations"] = annotations
    return {"metadata": meta, "spec": {"containers": []}}


def prioritize(ext: Extender, body_pod: dict[str, object]):  # type: ignore[no-untyped-def]
    body = encode({"Pod": body_pod, "Nodes": None, "NodeNames": ["quiet", "busy"]})
    return ext.prioritize("default", body).event.prioritize


def extender(network_args: str, store: LearnedTrafficStore) -> Extender:
    traffic = traffic_store({"quiet": 1 * MB, "busy": 400 * MB})
    return Extender(
        load_profiles(profile_yaml(network_args)),
        cluster=StaticCluster(),
        traffic=traffic,
        binder=SimulatedBinder(),
        inputs=Inputs(traffic, InMemoryBindLog(15.0)),
        learned=store,
    )


def samples(count: int, rate: float, now: float) -> dict[WorkloadKey, list[PodSample]]:
    return {WEB: [PodSample(rate, now - i * 60.0) for i in range(count)]}


# --- the owner and the arithmetic -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "name", "expected"),
    [
        ("ReplicaSet", "web-5d8f7c9b4", WorkloadKey("shop", "Deployment", "web")),
        ("ReplicaSet", "hand-made", WorkloadKey("shop", "ReplicaSet", "hand-made")),  # vowels: not a template hash
        ("Job", "nightly-29412345", WorkloadKey("shop", "CronJob", "nightly")),
        ("Job", "migrate", WorkloadKey("shop", "Job", "migrate")),
        ("StatefulSet", "db", WorkloadKey("shop", "StatefulSet", "db")),
        ("", "", None),
    ],
)
def test_an_owner_climbs_to_its_workload_by_the_name_its_controller_gave_it(kind, name, expected) -> None:  # type: ignore[no-untyped-def]
    assert workload_of("shop", kind, name) == expected


def test_the_first_window_is_warm_up_and_left_out_of_the_rate() -> None:
    # 60 MB in the first minute (pulling caches), then 1 MB/s for the next 4: the rate is the 4 minutes' alone.
    assert rate_after_warmup([(60, 60 * MB), (300, 300 * MB), (900, None)]) == pytest.approx(1 * MB)
    assert rate_after_warmup([(60, 60 * MB)]) is None, "one window: nothing after the warm-up"


def test_the_percentile_is_decayed_an_old_busy_pod_weighs_less_than_recent_quiet_ones() -> None:
    now = 100 * DAY
    recent = [PodSample(1 * MB, now) for _ in range(9)]
    busy_old = PodSample(50 * MB, now - 9 * DAY)  # three half-lives: weighs 1/8
    assert decayed_percentile([*recent, busy_old], now, percentile=0.9, half_life_days=3) == 1 * MB
    busy_new = PodSample(50 * MB, now)
    assert decayed_percentile([*recent, busy_new], now, percentile=0.9, half_life_days=3) == 1 * MB
    assert decayed_percentile([*recent[:8], busy_new, busy_new], now, percentile=0.9, half_life_days=3) == 50 * MB


def test_a_workload_is_learned_only_with_its_minimum_sample_count_within_the_lookback() -> None:
    now = 100 * DAY
    assert WEB not in learn(samples(4, 2 * MB, now), now, min_samples=5).by_workload
    assert learn(samples(5, 2 * MB, now), now, min_samples=5).by_workload[WEB].pods == 5
    old = {WEB: [PodSample(2 * MB, now - 8 * DAY) for _ in range(5)]}
    assert WEB not in learn(old, now, min_samples=5, lookback_days=7).by_workload


# --- through the verbs ---------------------------------------------------------------------------------------------


def test_the_learned_estimate_replaces_the_constant_after_the_minimum_sample_count() -> None:
    now = time.time()
    store = LearnedTrafficStore()
    ext = extender("assumedBytesPerPod: 100000000, learnWorkloadTraffic: true", store)

    store.current = learn(samples(4, 2 * MB, now), now)  # one pod short
    (before,) = prioritize(ext, pod()).plugins
    assert before.pod_assumed is not None
    assert (before.pod_assumed.bytes, before.pod_assumed.source) == (100 * MB, "constant")
    assert before.pod_assumed.workload == "deployment shop/web"

    store.current = learn(samples(5, 2 * MB, now), now)
    (after,) = prioritize(ext, pod()).plugins
    assert after.pod_assumed is not None
    assert after.pod_assumed.source == "learned"
    assert after.pod_assumed.bytes == 2 * MB * 300, "2 MB/s over the default 5-minute window"
    assert after.pod_assumed.text() == "learned from 5 pods of deployment shop/web, p90 over the last 7 days"


def test_without_the_profile_option_the_constant_stays_whatever_was_learned() -> None:
    now = time.time()
    store = LearnedTrafficStore(learn(samples(20, 2 * MB, now), now))
    ext = extender("assumedBytesPerPod: 100000000", store)
    (traffic,) = prioritize(ext, pod()).plugins
    assert traffic.pod_assumed is not None
    assert (traffic.pod_assumed.bytes, traffic.pod_assumed.source) == (100 * MB, "constant")


def test_the_pods_annotation_overrides_the_learned_figure_and_the_constant() -> None:
    now = time.time()
    store = LearnedTrafficStore(learn(samples(20, 2 * MB, now), now))
    ext = extender("assumedBytesPerPod: 100000000, learnWorkloadTraffic: true", store)
    (traffic,) = prioritize(ext, pod({"schedlens.io/assumed-bytes": "7000000"})).plugins
    assert traffic.pod_assumed is not None
    assert (traffic.pod_assumed.bytes, traffic.pod_assumed.source) == (7 * MB, "override")
    (unreadable,) = prioritize(ext, pod({"schedlens.io/assumed-bytes": "lots"})).plugins
    assert unreadable.pod_assumed is not None
    assert unreadable.pod_assumed.source == "learned", "an annotation that is not bytes is no override"


def test_the_learning_option_gives_the_profile_a_new_version_and_leaving_it_off_keeps_the_old() -> None:
    plain = load_profiles(profile_yaml("assumedBytesPerPod: 100000000"))["default"]
    off = load_profiles(profile_yaml("assumedBytesPerPod: 100000000, learnWorkloadTraffic: false"))["default"]
    on = load_profiles(profile_yaml("assumedBytesPerPod: 100000000, learnWorkloadTraffic: true"))["default"]
    assert plain.version() == off.version() != on.version()
    assert on.describe()["pluginConfig"]["NetworkTraffic"]["learnWorkloadTraffic"] is True


def test_the_explanation_says_where_the_assumed_bytes_come_from_and_verify_recomputes_them() -> None:
    now = time.time()
    store = LearnedTrafficStore(learn(samples(12, 2 * MB, now), now))
    ext = extender("assumedBytesPerPod: 100000000, learnWorkloadTraffic: true", store)
    record = prioritize(ext, pod())
    explained = explain(filter_record=None, prioritize_record=record, traffic_terms=TrafficTerms(window_minutes=5))

    assert explained.pod_assumed is not None
    assert explained.pod_assumed.text == "learned from 12 pods of deployment shop/web, p90 over the last 7 days"
    assert "assumed to add 600.0 MB to its node (learned from 12 pods" in explained.summary
    shown = {
        "pod_assumed": {
            "bytes": explained.pod_assumed.bytes,
            "source": "learned",
            "text": explained.pod_assumed.text,
            "workload": explained.pod_assumed.workload,
            "pods": explained.pod_assumed.pods,
            "bytes_per_second": explained.pod_assumed.bytes_per_second,
            "window_seconds": explained.pod_assumed.window_seconds,
        }
    }
    assert recompute_explanation(shown) == []
    shown["pod_assumed"]["bytes"] = 100 * MB
    (mismatch,) = recompute_explanation(shown)
    assert (mismatch.what, mismatch.recomputed) == ("pod assumed bytes", 600 * MB)


# --- the herd estimate counts each bound pod's own assumed bytes -------------------------------------------------


def bind(ext: Extender, node: str) -> None:
    body = encode({"PodName": "web-5d8f7c9b4-x2x7q", "PodNamespace": "shop", "PodUID": "uid-1", "Node": node})
    assert ext.bind("default", body).status == 200


def test_a_bound_pods_learned_bytes_are_what_the_herd_adds_to_its_node() -> None:
    now = time.time()
    store = LearnedTrafficStore(learn(samples(12, 2 * MB, now), now))
    ext = extender("assumedBytesPerPod: 100000000, learnWorkloadTraffic: true", store)
    ext.clock = lambda: now
    prioritize(ext, pod())
    bind(ext, "quiet")

    (traffic,) = prioritize(ext, pod()).plugins
    assert traffic.herd_bytes == [600 * MB, 0.0], "2 MB/s over 5 minutes, not the constant's 100 MB"
    assert traffic.herd_binds == [1, 0]


def test_a_bind_without_a_learned_or_overridden_figure_adds_the_constant() -> None:
    now = time.time()
    ext = extender("assumedBytesPerPod: 100000000, learnWorkloadTraffic: true", LearnedTrafficStore())
    ext.clock = lambda: now
    prioritize(ext, pod())
    bind(ext, "quiet")
    (traffic,) = prioritize(ext, pod()).plugins
    assert traffic.herd_bytes == [100 * MB, 0.0]


def test_the_bind_log_keeps_each_binds_own_bytes_beside_binds_of_the_constant() -> None:
    log = InMemoryBindLog(60.0)
    log.record_bind(node="a", pod="p1", at=10.0)
    assert log.recent_binds(10.0).bytes is None, "only the constant: no column"
    log.record_bind(node="b", pod="p2", at=11.0, bytes=5.0)
    log.record_bind(node="a", pod="p3", at=12.0)
    column = log.recent_binds(12.0).bytes
    assert column is not None
    assert [None if v != v else v for v in column.tolist()] == [None, 5.0, None]
