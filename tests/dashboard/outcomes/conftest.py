"""A real Prometheus holding the node and pod series of ``tests.support.outcome_data``, and cycles recorded like
kube-scheduler's (``tests.support.kube_scheduler``) bound at times placed around its anchor."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from dashboard.outcomes.services import outcomes_refresh
from tests.support.outcome_data import ATTRIBUTED_POD, NO_SERIES_POD, outcome_series
from tests.support.prometheus_server import PrometheusServer, start_prometheus


@pytest.fixture(scope="module")
def anchor() -> int:
    return int(time.time())


@pytest.fixture(scope="module")
def outcome_prometheus(anchor: int, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    server = start_prometheus(outcome_series(anchor), tmp_path_factory.mktemp("outcome-prometheus"))
    yield server
    server.stop()


@pytest.fixture
def outcome_settings(settings, api_settings, outcome_prometheus: PrometheusServer) -> None:
    settings.PROMETHEUS_URL = outcome_prometheus.url
    settings.SCHEDLENS_OUTCOME_WINDOWS_MINUTES = [1, 5, 15]
    settings.SCHEDLENS_OUTCOME_GRACE_SECONDS = 30.0
    settings.SCHEDLENS_PROMETHEUS_RETRIES = 0


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


@pytest.fixture
def placed(db, kube_scheduler, anchor) -> dict[str, int]:
    first = kube_scheduler.schedule(at=at(anchor - 17 * 60), name=ATTRIBUTED_POD, nodes=["node-2", "node-3", "node-4"])
    second = kube_scheduler.schedule(at=at(anchor - 16 * 60), name=NO_SERIES_POD, nodes=["node-3", "node-4"])
    assert (first.chosen_node, second.chosen_node) == ("node-2", "node-3")
    outcomes_refresh(now=anchor)
    return {"node-2": first.id, "node-3": second.id}
