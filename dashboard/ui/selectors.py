"""Reads for the health page: the verbs' latency and errors, the traffic the recorded calls and this process saw,
the prefetch's refreshes and the spool. Every query here is bounded: the latest N rows, no COUNT(*).

The history pages' reads are in ``dashboard.selectors.cycles``, the nodes page's in ``dashboard.selectors.nodes``.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.utils import timezone

from dashboard.runtime import running_runtime
from dashboard.selectors.cycles import call_filter_record, call_list_recent
from scheduler_core.extender.record.structs import FILTER, PRIORITIZE, VERBS, FilterRecord

# --- health --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class VerbHealth:
    verb: str
    calls: int
    p50_ms: float | None
    p95_ms: float | None
    errors: int
    last_at: datetime | None
    last_error: str


def _percentile(values: Sequence[float], q: int) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def verb_health(*, recent: int = 500) -> list[VerbHealth]:
    """Latency percentiles and errors over each verb's latest ``recent`` calls (among the newest 20,000)."""
    report = []
    window = call_list_recent()
    for verb in VERBS:
        rows = list(
            window.filter(verb=verb)
            .order_by("-id")
            .values_list("duration_ms", "http_status", "error", "started_at")[:recent]
        )
        durations = sorted(r[0] for r in rows)
        failed = [r for r in rows if r[1] != 200 or (r[2] and verb != PRIORITIZE)]
        report.append(
            VerbHealth(
                verb=verb,
                calls=len(rows),
                p50_ms=_percentile(durations, 50),
                p95_ms=_percentile(durations, 95),
                errors=len(failed),
                last_at=max((r[3] for r in rows), default=None),
                last_error=failed[0][2] if failed else "",
            )
        )
    return report


@dataclass(frozen=True, slots=True)
class RecordedTraffic:
    """What the latest filter call of a profile says about its traffic snapshot."""

    profile: str
    at: datetime
    age_seconds: float | None
    note: str
    nodes: int
    missing: int


def recorded_traffic(*, recent: int = 200) -> list[RecordedTraffic]:
    rows = call_list_recent().filter(verb=FILTER, http_status=200).order_by("-id")
    seen: dict[str, RecordedTraffic] = {}
    for profile, at, body, record_json in rows.values_list("cycle__profile", "started_at", "body", "record_json")[
        :recent
    ]:
        if profile in seen:
            continue
        record = call_filter_record(body=body, record_json=record_json) or FilterRecord(nodes=[], passed=[])
        seen[profile] = RecordedTraffic(
            profile=profile,
            at=at,
            age_seconds=record.metric_age_seconds,
            note=record.metric_note,
            nodes=len(record.nodes),
            missing=sum(1 for v in record.traffic_bytes if v is None),
        )
    return sorted(seen.values(), key=lambda r: r.profile)


@dataclass(frozen=True, slots=True)
class ProcessTraffic:
    """A traffic snapshot held by this web process's runtime (when the extender runs in it)."""

    query: str
    source: str
    fetched_at: datetime
    age_seconds: float
    nodes: int
    error: str
    unmatched: Sequence[str]


def process_traffic() -> list[ProcessTraffic] | None:
    """This process's in-memory snapshots, without starting the runtime; ``None`` when it is not running."""
    runtime = running_runtime()
    if runtime is None:
        return None
    now = timezone.now().timestamp()
    report = []
    for query in runtime.refresher.queries:
        snapshot = runtime.traffic.latest(query)
        error = runtime.traffic.last_errors.get(query, "")
        label = f"{query.query_mode}({query.device_name}[{query.time_range_minutes}m]) by {query.node_label}"
        if query.address:
            label += f" @ {query.address}"
        if snapshot is None:
            report.append(ProcessTraffic(label, "—", timezone.now(), float("nan"), 0, error or "no snapshot yet", ()))
            continue
        report.append(
            ProcessTraffic(
                query=label,
                source=snapshot.source,
                fetched_at=datetime.fromtimestamp(snapshot.fetched_at, tz=UTC),
                age_seconds=max(0.0, now - snapshot.fetched_at),
                nodes=len(snapshot.bytes_by_node),
                error=error or snapshot.error,
                unmatched=snapshot.unmatched_series,
            )
        )
    return report


@dataclass(frozen=True, slots=True)
class RefreshRow:
    """The latest traffic refresh of one query (a row the prefetch worker leaves for every run)."""

    query_key: str
    query: dict[str, Any]
    source: str
    finished_at: datetime
    age_seconds: float
    duration_ms: float
    status: str
    error: str
    nodes_matched: int
    nodes_without_metrics: int | None
    unmatched_series: list[str]
    worker: str
    recent_errors: int


def traffic_refreshes(*, recent: int = 500) -> list[RefreshRow]:
    """The newest refresh per query among the latest ``recent`` rows, with how many of those failed."""
    from dashboard.traffic.selectors import traffic_refresh_list

    now = timezone.now()
    latest: dict[str, Any] = {}
    errors: Counter[str] = Counter()
    for row in traffic_refresh_list()[:recent]:
        latest.setdefault(row.query_key, row)
        if row.error:
            errors[row.query_key] += 1
    return [
        RefreshRow(
            query_key=key,
            query=row.query,
            source=row.source,
            finished_at=row.finished_at,
            age_seconds=(now - row.finished_at).total_seconds(),
            duration_ms=row.duration_ms,
            status=row.status,
            error=row.error,
            nodes_matched=row.nodes_matched,
            nodes_without_metrics=row.nodes_without_metrics,
            unmatched_series=list(row.unmatched_series or []),
            worker=row.worker,
            recent_errors=errors[key],
        )
        for key, row in sorted(latest.items())
    ]


@dataclass(frozen=True, slots=True)
class Liveness:
    name: str
    status: str
    """``alive``, ``late`` or ``not seen``."""
    detail: str
    seen_at: datetime | None


def worker_liveness(refreshes: Sequence[RefreshRow]) -> list[Liveness] | None:
    """Inferred from the refresh rows: beat queues a refresh every interval and a worker runs it.

    ``None`` when traffic is refreshed in-process (no worker or beat is configured). Neither process reports
    a heartbeat of its own, so a late refresh says "the worker or beat is down", not which one.
    """
    if settings.SCHEDLENS_TRAFFIC_BACKEND != "redis":
        return None
    interval = settings.SCHEDLENS_TRAFFIC_REFRESH_SECONDS
    newest = min(refreshes, key=lambda r: r.age_seconds, default=None)
    if newest is None:
        return [
            Liveness("worker", "not seen", "no traffic refresh recorded yet", None),
            Liveness("beat", "not seen", "no traffic refresh recorded yet", None),
        ]
    late = newest.age_seconds > 3 * interval
    status = "late" if late else "alive"
    expected = f"expected every {interval:.0f} s"
    return [
        Liveness("worker", status, f"last refresh by {newest.worker or 'unknown'}, {expected}", newest.finished_at),
        Liveness("beat", status, f"schedules the refreshes, {expected}", newest.finished_at),
    ]


def spool_depth() -> tuple[int | None, str]:
    """Records waiting in this process's spool: its runtime's handle (opening one per page load set the spool up
    again each time) and its backlog figure, as the probes and /metrics show it (a count reads every row)."""
    runtime = running_runtime()
    if runtime is None:  # every web process builds it at start (dashboard/wsgi.py); a shell or a test may not
        return None, "this process runs no extender, so it holds no spool"
    try:
        return runtime.spool.backlog(), ""
    except Exception as exc:  # An unreadable spool is exactly what the health page must show.
        return None, str(exc)
