"""Celery tasks: explicit names, time limits, primitives in, one service call each.

``run_history_replay`` does not retry either: the replay's row says it failed and why, and whoever started it
starts another; a message delivered twice (a worker lost) runs once, the service taking the row first.

``prefetch_traffic`` does not retry: the next beat tick, ``SCHEDLENS_TRAFFIC_REFRESH_SECONDS`` later, is the
retry, and a failed refresh already left its row and kept the last good snapshot. Pruning retries on a
database hiccup because nothing else would run it for another hour.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from celery import shared_task
from django.conf import settings
from django.db import OperationalError
from django.utils import timezone

from dashboard.outcomes.services import outcomes_refresh
from dashboard.replays.services import REPLAY_TASK, history_replay_run
from dashboard.services.partitions import partitions_ensure
from dashboard.services.retention import cycles_prune
from dashboard.traffic.schedule import (
    ENSURE_PARTITIONS_TASK,
    OUTCOMES_TASK,
    PREFETCH_TASK,
    PRUNE_CYCLES_TASK,
    PRUNE_TASK,
)
from dashboard.traffic.services import traffic_refresh, traffic_refreshes_prune
from dashboard.traffic.snapshots import query_from_dict


@shared_task(
    name=PREFETCH_TASK,
    soft_time_limit=settings.CELERY_TASK_SOFT_TIME_LIMIT,
    time_limit=settings.CELERY_TASK_TIME_LIMIT,
    ignore_result=True,
)
def prefetch_traffic(query: dict[str, Any]) -> None:
    traffic_refresh(query=query_from_dict(query))


@shared_task(
    name=PRUNE_TASK,
    soft_time_limit=240,
    time_limit=300,
    ignore_result=True,
    autoretry_for=(OperationalError,),
    retry_backoff=30,
    max_retries=3,
)
def prune_traffic_refreshes() -> None:
    traffic_refreshes_prune()


@shared_task(
    name=PRUNE_CYCLES_TASK,
    soft_time_limit=1500,
    time_limit=1800,
    ignore_result=True,
    autoretry_for=(OperationalError,),
    retry_backoff=60,
    max_retries=3,
)
def prune_cycles() -> None:
    """Retention: cycles older than SCHEDLENS_RETENTION_DAYS go, behind a chain checkpoint."""
    cycles_prune(older_than=timezone.now() - timedelta(days=settings.SCHEDLENS_RETENTION_DAYS))


@shared_task(name=ENSURE_PARTITIONS_TASK, soft_time_limit=240, time_limit=300, ignore_result=True)
def ensure_partitions() -> None:
    """PostgreSQL: the day partitions of the record, created ahead (``dashboard.services.partitions``)."""
    partitions_ensure()


@shared_task(
    name=REPLAY_TASK,
    soft_time_limit=max(1, settings.SCHEDLENS_REPLAY_TIME_LIMIT_SECONDS - 30),
    time_limit=settings.SCHEDLENS_REPLAY_TIME_LIMIT_SECONDS,
    ignore_result=True,
)
def run_history_replay(replay_id: int) -> None:
    """A history replay started from the dashboard or the API (``SCHEDLENS_REPLAY_RUNNER=celery``)."""
    history_replay_run(replay_id)


@shared_task(name=OUTCOMES_TASK, soft_time_limit=240, time_limit=300, ignore_result=True)
def refresh_placement_outcomes() -> None:
    """What each placement did to traffic (``SCHEDLENS_OUTCOME_RUNNER=celery``): no retry, the next beat is one."""
    outcomes_refresh()
