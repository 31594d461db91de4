"""Reads of the traffic prefetch for the dashboard and the API: refresh rows and traffic over time."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from django.db.models import QuerySet

from dashboard.traffic.models import TrafficRefresh


def traffic_refresh_list(*, query_key: str = "", failed_only: bool = False) -> QuerySet[TrafficRefresh]:
    """Newest first; the per-node values are deferred (they are large), use :func:`traffic_history` for them."""
    rows = TrafficRefresh.objects.defer("bytes_by_node")
    if query_key:
        rows = rows.filter(query_key=query_key)
    if failed_only:
        rows = rows.exclude(error="")
    return rows


def traffic_history(
    *, query_key: str, since: datetime, nodes: list[str] | None = None
) -> list[tuple[datetime, dict[str, float]]]:
    """(refresh time, bytes per node) for the sampled refreshes of one query since ``since``, oldest first."""
    rows = (
        TrafficRefresh.objects.filter(query_key=query_key, started_at__gte=since, bytes_by_node__isnull=False)
        .order_by("started_at", "id")
        .values_list("started_at", "bytes_by_node")
    )
    wanted = set(nodes) if nodes else None
    return [
        (started, {n: float(v) for n, v in cast("dict[str, Any]", values).items() if wanted is None or n in wanted})
        for started, values in rows  # (values: never null, filtered above)
    ]


def traffic_snapshot_list() -> QuerySet[TrafficRefresh]:
    """The refreshes whose per-node values were kept (one per history interval): traffic over time."""
    return TrafficRefresh.objects.filter(bytes_by_node__isnull=False)
