"""Who runs the outcome job: a Celery worker on the beat's task, or a thread of a background command; never a verb."""

from __future__ import annotations

import threading

import pytest

from dashboard.outcomes.models import PlacementOutcome
from dashboard.outcomes.services import outcomes_follow_start
from dashboard.tasks import refresh_placement_outcomes
from tests.dashboard.outcomes.conftest import at
from tests.support.outcome_data import ATTRIBUTED_POD
from tests.support.processes import wait_for

pytestmark = [pytest.mark.prometheus, pytest.mark.usefixtures("outcome_settings")]


def bound(kube_scheduler, anchor):
    return kube_scheduler.schedule(at=at(anchor - 17 * 60), name=ATTRIBUTED_POD, nodes=["node-2", "node-3"])


def test_a_celery_worker_runs_the_outcome_task(transactional_db, kube_scheduler, anchor, celery_worker):
    cycle = bound(kube_scheduler, anchor)

    refresh_placement_outcomes.delay()

    outcome = wait_for(
        lambda: PlacementOutcome.objects.filter(cycle=cycle, complete=True).first(), what="the outcome task"
    )
    assert [w["seconds"] for w in outcome.windows] == [60, 300, 900]


def test_the_background_thread_follows_outcomes_until_stopped(transactional_db, kube_scheduler, anchor, settings):
    cycle = bound(kube_scheduler, anchor)
    settings.SCHEDLENS_OUTCOME_RUNNER = "process"
    stop = threading.Event()

    thread = outcomes_follow_start(stop=stop)
    try:
        assert thread is not None
        wait_for(lambda: PlacementOutcome.objects.filter(cycle=cycle, complete=True).exists(), what="the loop's run")
    finally:
        stop.set()
    thread.join(timeout=30)
    assert not thread.is_alive()


def test_no_thread_when_celery_runs_the_job(settings):
    settings.SCHEDLENS_OUTCOME_RUNNER = "celery"
    assert outcomes_follow_start(stop=threading.Event()) is None
