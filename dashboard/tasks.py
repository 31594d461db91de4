"""Celery tasks: explicit names, time limits, primitives in, one service call each.

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

from dashboard.services.retention import cycles_prune
from dashboard.traffic.services import traffic_refresh, traffic_refreshes_prune
from dashboard.traffic.snapshots import query_from_dict


@shared_task(name="schedlens.prefetch_traffic", soft_time_limit=45, time_limit=60, ignore_result=True)
def prefetch_traffic(query: dict[str, Any]) -> None:
    traffic_refresh(query=query_from_dict(query))


@shared_task(
    name="schedlens.prune_traffic_refreshes",
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
    name="schedlens.prune_cycles",
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
