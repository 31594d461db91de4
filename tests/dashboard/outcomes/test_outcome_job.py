"""The outcome of each placement, read from a real Prometheus once its windows have passed (issue 32, item 1).

kube-scheduler's cycles choose node-2 (1.0 MB measured over the 5-minute query window, the quietest), with node-3
and node-4 the runner-ups. After the binds Prometheus holds node-2 at 10 kB/s, node-3 at 5 kB/s and node-4 at
50 kB/s (``tests.support.outcome_data``): node-2 ended busier than node-3. The pod ``web-1`` received 2 kB/s and sent
1 kB/s on its sandbox's series; the herd estimate assumed 300 MB per 5 minutes (1 MB/s) for it.
"""

from __future__ import annotations

import pytest

from dashboard.outcomes.models import OutcomeStatus, PlacementOutcome
from dashboard.outcomes.services import HOST_NETWORK, NO_SERIES, outcomes_refresh
from tests.dashboard.outcomes.conftest import at
from tests.support.kube_scheduler import PROFILES, KubeScheduler
from tests.support.outcome_data import (
    ATTRIBUTED_POD,
    HOST_NETWORK_POD,
    NO_SERIES_POD,
    NODE_RATES,
    POD_RECEIVE_RATE,
    POD_TRANSMIT_RATE,
)

pytestmark = [pytest.mark.prometheus, pytest.mark.usefixtures("outcome_settings")]

MEASURED_NODE_2 = 1.0e6
ASSUMED_PER_POD = 300e6
QUERY_WINDOW = 300


def bound(kube_scheduler: KubeScheduler, *, name: str, seconds: float):
    cycle = kube_scheduler.schedule(at=at(seconds), name=name, nodes=["node-1", "node-2", "node-3", "node-4"])
    assert cycle.chosen_node == "node-2"
    return cycle


def windows(outcome: PlacementOutcome) -> dict[int, dict]:
    return {w["seconds"]: w for w in outcome.windows}


def test_an_outcome_holds_every_window_after_the_bind_beside_the_estimate_and_the_runner_ups(
    db, kube_scheduler, anchor
):
    cycle = bound(kube_scheduler, name=ATTRIBUTED_POD, seconds=anchor - 17 * 60)

    result = outcomes_refresh(now=anchor)

    assert (result.started, result.updated, result.error) == (1, 1, "")
    outcome = PlacementOutcome.objects.get(cycle=cycle)
    assert outcome.complete
    assert outcome.status == OutcomeStatus.MEASURED
    assert outcome.estimate == {
        "node": "node-2",
        "measured_bytes": MEASURED_NODE_2,
        "assumed_bytes": 0.0,
        "query_window_seconds": QUERY_WINDOW,
        "runner_ups": ["node-3", "node-4"],
    }
    found = windows(outcome)
    assert sorted(found) == [60, 300, 900]
    for seconds, window in found.items():
        assert window["node_bytes"] == pytest.approx(NODE_RATES["node-2"] * seconds)
        assert window["runner_up_bytes"] == {
            "node-3": pytest.approx(NODE_RATES["node-3"] * seconds),
            "node-4": pytest.approx(NODE_RATES["node-4"] * seconds),
        }
        # Both sandbox series count: the one with container="POD" and the one with container="".
        assert window["pod_bytes"] == pytest.approx((POD_RECEIVE_RATE + POD_TRANSMIT_RATE) * seconds)
    assert outcome.stayed_quietest is False  # node-3 received less in the window
    assert (outcome.workload_kind, outcome.workload_name) == ("Deployment", "web")
    pod_estimate = ASSUMED_PER_POD * 900 / QUERY_WINDOW
    assert outcome.pod_relative_error == pytest.approx((3_000.0 * 900 - pod_estimate) / pod_estimate)


def test_no_window_is_read_before_it_has_passed(db, kube_scheduler, anchor):
    cycle = bound(kube_scheduler, name=ATTRIBUTED_POD, seconds=anchor - 3 * 60)

    outcomes_refresh(now=anchor - 3 * 60 + 60)  # the first minute ended, but not its scrape's grace
    assert not PlacementOutcome.objects.filter(cycle=cycle).exists()

    outcomes_refresh(now=anchor)
    outcome = PlacementOutcome.objects.get(cycle=cycle)
    assert sorted(windows(outcome)) == [60]
    assert not outcome.complete

    outcomes_refresh(now=anchor + 3 * 60)
    outcome.refresh_from_db()
    assert sorted(windows(outcome)) == [60, 300]
    assert not outcome.complete
    assert windows(outcome)[300]["node_bytes"] == pytest.approx(NODE_RATES["node-2"] * 300)


def test_a_host_network_pod_is_marked_unattributable_never_counted_as_zero(db, kube_scheduler, anchor):
    cycle = bound(kube_scheduler, name=HOST_NETWORK_POD, seconds=anchor - 17 * 60)

    outcomes_refresh(now=anchor)

    outcome = PlacementOutcome.objects.get(cycle=cycle)
    assert outcome.status == OutcomeStatus.UNATTRIBUTABLE
    assert outcome.unattributable_reason == HOST_NETWORK
    assert all(w.get("pod_bytes") is None for w in outcome.windows)
    assert outcome.pod_relative_error is None
    # The node's own outcome is still read.
    assert windows(outcome)[60]["node_bytes"] == pytest.approx(NODE_RATES["node-2"] * 60)


def test_a_pod_without_series_is_marked_unattributable(db, kube_scheduler, anchor):
    cycle = bound(kube_scheduler, name=NO_SERIES_POD, seconds=anchor - 17 * 60)

    outcomes_refresh(now=anchor)

    outcome = PlacementOutcome.objects.get(cycle=cycle)
    assert (outcome.status, outcome.unattributable_reason) == (OutcomeStatus.UNATTRIBUTABLE, NO_SERIES)
    assert outcome.workload_kind == ""  # kube-state-metrics knows nothing of it either


def test_a_failed_read_leaves_the_outcome_for_the_next_run(db, kube_scheduler, anchor, settings, closed_port_url):
    cycle = bound(kube_scheduler, name=ATTRIBUTED_POD, seconds=anchor - 17 * 60)
    prometheus = settings.PROMETHEUS_URL
    settings.PROMETHEUS_URL = closed_port_url

    result = outcomes_refresh(now=anchor)

    assert "connection refused" in result.error
    outcome = PlacementOutcome.objects.get(cycle=cycle)
    assert outcome.windows == []
    assert not outcome.complete
    assert "connection refused" in outcome.error
    settings.PROMETHEUS_URL = prometheus
    outcomes_refresh(now=anchor)
    outcome.refresh_from_db()
    assert outcome.complete
    assert outcome.error == ""


def test_outside_the_demo_without_prometheus_no_outcome_is_invented(db, kube_scheduler, anchor, settings):
    """The demo's synthetic traffic never stands in for a real cluster's: without a Prometheus the job reads nothing,
    writes no window, and says why."""
    cycle = bound(kube_scheduler, name=ATTRIBUTED_POD, seconds=anchor - 17 * 60)
    settings.PROMETHEUS_URL = ""
    settings.SCHEDLENS_SYNTHETIC_TRAFFIC = False

    result = outcomes_refresh(now=anchor)

    assert "no Prometheus configured" in result.error
    outcome = PlacementOutcome.objects.get(cycle=cycle)
    assert outcome.windows == []
    assert "no Prometheus configured" in outcome.error


def test_a_profile_naming_its_own_prometheus_has_its_outcomes_read_there(
    db, kube_scheduler, anchor, settings, tmp_path, closed_port_url
):
    """NetworkTraffic's ``address`` answers the traffic refresh of its profile; the outcome job reads that profile's
    cycles there too, not from PROMETHEUS_URL (here a port where nothing listens)."""
    cycle = bound(kube_scheduler, name=ATTRIBUTED_POD, seconds=anchor - 17 * 60)
    own = tmp_path / "own-prometheus.yaml"
    own.write_text(
        PROFILES.replace(
            "- name: gpu-aware",
            f"  pluginConfig:\n  - {{name: NetworkTraffic, args: {{address: '{settings.PROMETHEUS_URL}'}}}}\n"
            "- name: gpu-aware",
        ),
        encoding="utf-8",
    )
    settings.SCHEDLENS_CONFIG = str(own)
    settings.PROMETHEUS_URL = closed_port_url

    result = outcomes_refresh(now=anchor)

    assert result.error == ""
    outcome = PlacementOutcome.objects.get(cycle=cycle)
    assert (outcome.status, outcome.complete, outcome.error) == (OutcomeStatus.MEASURED, True, "")
    assert windows(outcome)[60]["node_bytes"] == pytest.approx(NODE_RATES["node-2"] * 60)
    assert windows(outcome)[60]["pod_bytes"] == pytest.approx((POD_RECEIVE_RATE + POD_TRANSMIT_RATE) * 60)
