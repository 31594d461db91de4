"""The herd estimate's reconciliation arithmetic, the bind log's pod names, the option's profile version, and a bind
recording its own profile's assumed bytes when profiles differ in learning (issue 32, item 3).

Against a real Prometheus: ``tests/dashboard/traffic/test_herd_reconciliation.py``.
"""

from __future__ import annotations

import math
import time

import numpy as np

from scheduler_core.extender.protocol.binding import SimulatedBinder
from scheduler_core.extender.protocol.cluster import StaticCluster
from scheduler_core.extender.protocol.wire import encode
from scheduler_core.extender.scoring.herd import HerdEstimator, InMemoryBindLog
from scheduler_core.extender.scoring.profiles import load_profiles
from scheduler_core.extender.scoring.workload_traffic import LearnedTrafficStore, learn
from scheduler_core.extender.verbs import Extender
from tests.scheduler_core.extender.scoring.test_workload_traffic import MB, pod, profile_yaml, samples
from tests.support.inputs import Inputs, traffic_store


def test_an_observed_bind_counts_what_the_measurement_does_not_hold_and_an_unobserved_one_decays() -> None:
    herd = HerdEstimator(bytes_per_pod=300 * MB, decay_seconds=300.0)
    times = np.array([100.0, 100.0, 100.0, 100.0, -250.0])
    observed = np.array([math.nan, 0.0, 120 * MB, 400 * MB, 10 * MB])
    counted = herd.counted(herd.assumed(None, 5), observed, times, now=160.0)
    assert counted.tolist() == [
        300 * MB * (1 - 60 / 300),  # no series: the linear decay
        300 * MB,  # observed, none of it in the window yet: all of it still counts
        180 * MB,  # 120 MB of it measured
        0.0,  # more measured than assumed: nothing on top
        0.0,  # past herdDecaySeconds: its weight has ended either way
    ]
    positions = np.array([0, 1, 1, 1, 1])
    assert herd.extra_bytes_at(positions, times, 160.0, 2, None, observed).tolist() == [240 * MB, 480 * MB]


def test_the_bind_log_keeps_each_binds_pod_name_to_read_its_traffic_by() -> None:
    log = InMemoryBindLog(60.0)
    log.record_bind(node="a", pod="uid-1", at=10.0)
    assert log.recent_binds(10.0).pods == (), "no name known: no column"
    log.recent_binds(10.0)
    log.record_bind(node="b", pod="uid-2", at=11.0, name="shop/web-2")
    assert log.recent_binds(11.0).pods == ("", "shop/web-2")
    log.record_bind(node="a", pod="uid-1", at=12.0, name="shop/web-1")  # the watcher's sighting of the same bind
    assert log.recent_binds(12.0).pods == ("shop/web-1", "shop/web-2")


def test_the_reconcile_option_gives_the_profile_a_new_version_and_leaving_it_off_keeps_the_old() -> None:
    plain = load_profiles(profile_yaml("assumedBytesPerPod: 100000000"))["default"]
    off = load_profiles(profile_yaml("assumedBytesPerPod: 100000000, reconcileHerd: false"))["default"]
    on = load_profiles(profile_yaml("assumedBytesPerPod: 100000000, reconcileHerd: true"))["default"]
    assert plain.version() == off.version() != on.version()


TWO_PROFILES = """
profiles:
- name: learning
  pluginConfig:
  - {name: NetworkTraffic, args: {assumedBytesPerPod: 100000000, learnWorkloadTraffic: true}}
- name: constant
  pluginConfig:
  - {name: NetworkTraffic, args: {assumedBytesPerPod: 100000000}}
"""


def test_a_bind_records_its_own_profiles_assumed_bytes_when_profiles_differ_in_learning() -> None:
    now = time.time()
    traffic = traffic_store({"quiet": 1 * MB, "busy": 400 * MB})
    ext = Extender(
        load_profiles(TWO_PROFILES),
        cluster=StaticCluster(),
        traffic=traffic,
        binder=SimulatedBinder(),
        inputs=Inputs(traffic, InMemoryBindLog(15.0)),
        learned=LearnedTrafficStore(learn(samples(12, 2 * MB, now), now)),
        clock=lambda: now,
    )
    body = encode({"Pod": pod(), "Nodes": None, "NodeNames": ["quiet", "busy"]})
    learned = ext.prioritize("learning", body).event.prioritize
    assert learned is not None
    assert learned.plugins[0].pod_assumed is not None
    assert learned.plugins[0].pod_assumed.bytes == 600 * MB
    ext.prioritize("constant", body)
    bound = encode({"PodName": "web-5d8f7c9b4-x2x7q", "PodNamespace": "shop", "PodUID": "uid-1", "Node": "quiet"})
    assert ext.bind("constant", bound).status == 200

    after = ext.prioritize("constant", body).event.prioritize
    assert after is not None
    assert after.plugins[0].herd_bytes == [100 * MB, 0.0], "the constant profile's bind: its own 100 MB, not 600"
