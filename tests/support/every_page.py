"""One set of data that fills every dashboard page, for the browser tests that open them all.

Each part comes from the helper other tests record it with, through the real verbs and services:

- an outcome: the two placements of ``tests.dashboard.outcomes`` (``tests.support.kube_scheduler`` cycles bound 17
  and 16 minutes before the anchor of the Prometheus holding ``tests.support.outcome_data``'s series), followed by
  the outcome job three times, so the balance page has a sample per run and the herd estimate's error per workload;
- demo history: ``tests.support.history`` under the demo profiles, on both profiles;
- pods waiting for a node: ``tests.support.pending_pods``, watched into the live list from the tests' Kubernetes API;
- a finished history replay under ``gpu-aware``, with the learned traffic compared against the constant;
- two versions of a profile: ``tests.support.profile_versions``' rollout of ``web``; and of ``default`` and
  ``gpu-aware``, whose outcome cycles were decided under ``kube_scheduler``'s profiles, the rest under the demo
  profiles (the configured ones).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from dashboard.outcomes.services import outcomes_refresh
from dashboard.replays.services import history_replay_run, history_replay_start
from tests.support.fake_kube_api import FakeKubeAPI
from tests.support.history import History
from tests.support.kube_scheduler import TRAFFIC as KUBE_SCHEDULER_TRAFFIC
from tests.support.kube_scheduler import KubeScheduler
from tests.support.outcome_data import ATTRIBUTED_POD, NO_SERIES_POD
from tests.support.pending_pods import NAMESPACE, leave_waiting_pods, watch_into_the_list
from tests.support.profile_versions import store_rollout
from tests.support.recording import Recorder, use_demo_profiles

OUTCOME_WINDOWS_MINUTES = [1, 5, 15]


def every_page_settings(*, spool_dir: Path, prometheus_url: str) -> dict[str, Any]:
    """The settings the data is recorded and the pages are served under: the demo profiles, the outcome job reading
    ``prometheus_url``, replays run by the caller."""
    demo = SimpleNamespace()
    use_demo_profiles(demo, spool_dir)
    return {
        **vars(demo),
        "PROMETHEUS_URL": prometheus_url,
        "SCHEDLENS_OUTCOME_WINDOWS_MINUTES": OUTCOME_WINDOWS_MINUTES,
        "SCHEDLENS_OUTCOME_GRACE_SECONDS": 30.0,
        "SCHEDLENS_PROMETHEUS_RETRIES": 0,
        "SCHEDLENS_REPLAY_RUNNER": "none",
    }


@dataclass(frozen=True)
class EveryPage:
    outcome_cycle: int
    """A placement on node-2 with all three windows measured, a runner-up (node-3) ending quieter."""
    runner_up: str
    demo_cycle: int
    """The newest cycle of the demo history under the default profile."""
    replay: int
    pending_pod: str
    """``namespace/name`` of a pod refused both by kube-scheduler and by our filter."""


def _at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


def record_every_page(anchor: int) -> EveryPage:
    """Record the data (under :func:`every_page_settings`, ``anchor`` being the Prometheus series' anchor)."""
    kube_scheduler = KubeScheduler(dict(KUBE_SCHEDULER_TRAFFIC))
    outcome = kube_scheduler.schedule(
        at=_at(anchor - 17 * 60), name=ATTRIBUTED_POD, nodes=["node-2", "node-3", "node-4"]
    )
    kube_scheduler.schedule(at=_at(anchor - 16 * 60), name=NO_SERIES_POD, nodes=["node-3", "node-4"])
    for minutes_before in (10, 5, 0):  # the job's runs, each leaving a balance sample: a line on the chart
        outcomes_refresh(now=anchor - minutes_before * 60)

    history = History(nodes=12)
    demo = history.record(6)[-1]
    history.record(3, profile="gpu-aware")

    with FakeKubeAPI() as api:
        leave_waiting_pods(api, Recorder())
        watch_into_the_list(api)

    store_rollout()
    replay = history_replay_start(
        selection={"last": "20"}, candidate_profile="gpu-aware", created_by="olga", runner="none", compare_learning="on"
    )
    history_replay_run(replay.pk)
    return EveryPage(
        outcome_cycle=outcome.id,
        runner_up="node-3",
        demo_cycle=demo.id,
        replay=replay.pk,
        pending_pod=f"{NAMESPACE}/web-busy",
    )
