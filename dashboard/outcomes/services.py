"""The outcome job: for each bound cycle, once each window after its bind has passed, what its chosen node, its
runner-ups and its pod did in it, beside what the decision estimated; and a balance sample per profile.

One function, :func:`outcomes_refresh`, called by the Celery task or the background loop, never by a verb.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import close_old_connections, connections
from django.db.models import QuerySet

from dashboard.models import Outcome
from dashboard.outcomes.codec import estimate_decode, estimate_encode, windows_decode, windows_encode
from dashboard.outcomes.learning import learn_and_publish
from dashboard.outcomes.models import BalanceSample, OutcomeStatus, PlacementOutcome
from dashboard.outcomes.sources import outcome_source
from dashboard.selectors.cycles import cycle_list_with_calls, cycle_read
from dashboard.selectors.profiles import profile_configuration
from dashboard.traffic.sources import prometheus_address
from scheduler_core.extender.scoring.plugins.traffic import NetworkTrafficArgs
from scheduler_core.outcomes.arithmetic import (
    Estimate,
    WindowOutcome,
    estimate_of,
    pod_estimate_over,
    relative_error,
    spread,
    stayed_quietest,
)
from scheduler_core.outcomes.sources import NodeAsk, OutcomeSource, PodAsk, Readings
from scheduler_core.traffic import TrafficQuery, TrafficSourceError

log = logging.getLogger(__name__)

HOST_NETWORK = "host network: its traffic is the node's (kube_pod_info)"
NO_SERIES = "no traffic series for the pod"
PRUNE_EVERY_SECONDS = 3600.0
"""Retention of outcomes and balance samples runs once an hour per process, not every run: a run with nothing to do
then writes nothing (on SQLite, ``make run``'s database, every write takes the lock the ingester needs)."""
_pruned_at = -PRUNE_EVERY_SECONDS
_last_error = ""
"""The failure the last run logged, so that one lasting for hours is logged once."""
BALANCE_NODES_SINCE = timedelta(hours=1)
"""The nodes a balance sample covers: those the profile placed pods on in the last hour."""


@dataclass(frozen=True, slots=True)
class RefreshResult:
    started: int
    """Cycles the run began following."""
    updated: int
    """Outcomes that gained a window."""
    balance_samples: int
    error: str = ""


def _when(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


def _windows_seconds() -> list[int]:
    return sorted({int(m) * 60 for m in settings.SCHEDLENS_OUTCOME_WINDOWS_MINUTES if int(m) > 0})


def _traffic_args(profile: str) -> NetworkTrafficArgs | None:
    configured = profile_configuration().profiles.get(profile)
    if configured is None:
        return None
    found = (getattr(s.plugin, "args", None) for s in configured.scorers)
    return next((args for args in found if isinstance(args, NetworkTrafficArgs)), None)


def _node_query(profile: str) -> TrafficQuery:
    args = _traffic_args(profile)
    return args.query() if args is not None else TrafficQuery()


def _start_following(*, now: float, windows: Sequence[int], limit: int) -> int:
    """Rows for the bound cycles whose first window has passed and that have none yet."""
    first_due = _when(now - windows[0] - settings.SCHEDLENS_OUTCOME_GRACE_SECONDS)
    since = _when(now - settings.SCHEDLENS_OUTCOME_LOOKBACK_HOURS * 3600)
    cycles = (
        cycle_list_with_calls()
        .filter(outcome=Outcome.BOUND, started_at__gte=since, finished_at__lte=first_due)
        .exclude(id__in=PlacementOutcome.objects.filter(bound_at__gte=since).values("cycle_id"))
        .exclude(chosen_node="")
        .order_by("started_at", "id")[:limit]
    )
    rows = []
    for cycle in cycles:
        args = _traffic_args(cycle.profile)
        query_window = args.query().window_seconds if args is not None else 0
        records = cycle_read(cycle=cycle).records
        estimate = estimate_of(records.prioritize, cycle.chosen_node, query_window_seconds=query_window)
        rows.append(
            PlacementOutcome(
                cycle_id=cycle.id,
                bound_at=cycle.finished_at,
                profile=cycle.profile,
                node=cycle.chosen_node,
                pod_namespace=cycle.pod_namespace,
                pod_name=cycle.pod_name,
                estimate=estimate_encode(estimate) if estimate is not None else None,
                pod_assumed_bytes=args.assumed_bytes_per_pod if args is not None else None,
                status=OutcomeStatus.WAITING if estimate is not None else OutcomeStatus.NO_ESTIMATE,
                # Without an estimate there is nothing to compare: the row says so and is not read again.
                complete=estimate is None,
                updated_at=_when(now),
            )
        )
    PlacementOutcome.objects.bulk_create(rows, ignore_conflicts=True)
    return len(rows)


def _due(row: PlacementOutcome, *, now: float, windows: Sequence[int]) -> list[int]:
    done = {w.seconds for w in windows_decode(row.windows)}
    passed = now - settings.SCHEDLENS_OUTCOME_GRACE_SECONDS - row.bound_at.timestamp()
    return [w for w in windows if w not in done and w <= passed]


def _window_of(
    row: PlacementOutcome, estimate: Estimate, seconds: int, readings: Readings, unattributable: str
) -> WindowOutcome:
    key = f"{row.id}:{seconds}"
    nodes = readings.node_bytes.get(key, {})
    pod_bytes = None if unattributable else readings.pod_bytes.get(key)
    return WindowOutcome(
        seconds=seconds,
        node_bytes=nodes.get(row.node),
        runner_up_bytes={n: nodes.get(n) for n in estimate.runner_ups},
        pod_bytes=pod_bytes,
        pod_note=unattributable or ("" if pod_bytes is not None else NO_SERIES),
    )


def _update_outcomes(*, rows: list[PlacementOutcome], source: OutcomeSource, now: float, windows: Sequence[int]) -> int:
    due = {row.id: _due(row, now=now, windows=windows) for row in rows}
    rows = [row for row in rows if due[row.id]]
    if not rows:
        return 0
    estimates = {row.id: estimate_decode(row.estimate) for row in rows}
    unknown = [(r.pod_namespace, r.pod_name) for r in rows if not r.workload_kind and r.status == OutcomeStatus.WAITING]
    facts = source.pod_facts(unknown, now) if unknown else {}
    node_asks: list[NodeAsk] = []
    pod_asks: list[PodAsk] = []
    for row in rows:
        estimate = estimates[row.id]
        assert estimate is not None  # rows without one are complete from the start
        query = _node_query(row.profile)
        for seconds in due[row.id]:
            end = row.bound_at.timestamp() + seconds
            key = f"{row.id}:{seconds}"
            node_asks.append(NodeAsk(key, query, (row.node, *estimate.runner_ups), end, seconds))
            pod_asks.append(PodAsk(key, row.pod_namespace, row.pod_name, end, seconds))
    readings = source.read(node_asks, pod_asks)
    for row in rows:
        estimate = estimates[row.id]
        assert estimate is not None
        found = facts.get((row.pod_namespace, row.pod_name))
        if found is not None:
            row.workload_kind, row.workload_name = found.workload_kind, found.workload_name
            if found.host_network:
                row.unattributable_reason = HOST_NETWORK
        passed = windows_decode(row.windows)
        passed += [_window_of(row, estimate, s, readings, row.unattributable_reason) for s in due[row.id]]
        passed.sort(key=lambda w: w.seconds)
        row.windows = windows_encode(passed)
        longest = passed[-1]
        row.stayed_quietest = stayed_quietest(longest)
        pod_estimate = pod_estimate_over(
            row.pod_assumed_bytes or 0.0, seconds=longest.seconds, query_window_seconds=estimate.query_window_seconds
        )
        row.pod_relative_error = relative_error(longest.pod_bytes, pod_estimate)
        attributed = any(w.pod_bytes is not None for w in passed)
        if not attributed and not row.unattributable_reason:
            row.unattributable_reason = NO_SERIES
        if attributed:
            row.unattributable_reason = ""
        row.status = OutcomeStatus.MEASURED if attributed else OutcomeStatus.UNATTRIBUTABLE
        row.complete = len(passed) == len(windows)
        row.updated_at = _when(now)
        row.error = ""
    fields = [
        "workload_kind",
        "workload_name",
        "unattributable_reason",
        "windows",
        "stayed_quietest",
        "pod_relative_error",
        "status",
        "complete",
        "updated_at",
        "error",
    ]
    # An upsert on the cycle: one INSERT … ON CONFLICT, where bulk_update's CASE per field and row cost five times more.
    PlacementOutcome.objects.bulk_create(rows, update_conflicts=True, unique_fields=["cycle"], update_fields=fields)
    return len(rows)


def _profile_address(profile: str) -> str:
    """The Prometheus a profile's cycles are read from (its NetworkTraffic plugin's address, else PROMETHEUS_URL)."""
    return prometheus_address(_node_query(profile))


def _balance_samples(*, source: OutcomeSource, now: float, profiles: set[str] | None = None) -> int:
    """One sample per profile (of ``profiles``; None: all): the spread of the traffic of the nodes it placed pods on
    in the last hour."""
    at = now - settings.SCHEDLENS_OUTCOME_GRACE_SECONDS
    recent = PlacementOutcome.objects.filter(bound_at__gte=_when(now) - BALANCE_NODES_SINCE)
    nodes_by_profile: dict[str, set[str]] = {}
    for profile, node in recent.values_list("profile", "node").distinct():
        if profiles is None or profile in profiles:
            nodes_by_profile.setdefault(profile, set()).add(node)
    asks = []
    for profile, nodes in sorted(nodes_by_profile.items()):
        query = _node_query(profile)
        asks.append(NodeAsk(profile, query, tuple(sorted(nodes)), at, query.window_seconds))
    if not asks:
        return 0
    readings = source.read(asks, [])
    samples = []
    for ask in asks:
        figures = spread(readings.node_bytes.get(ask.key, {}).values())
        if figures is None:
            continue
        samples.append(
            BalanceSample(
                at=_when(at),
                profile=ask.key,
                nodes=figures.nodes,
                mean_bytes=figures.mean,
                stdev_bytes=figures.stdev,
                cv=figures.cv,
                max_bytes=figures.max,
                min_bytes=figures.min,
                max_over_min=figures.max_over_min,
                window_seconds=ask.seconds,
            )
        )
    BalanceSample.objects.bulk_create(samples)
    return len(samples)


def _incomplete(*, now: float, windows: Sequence[int], limit: int) -> QuerySet[PlacementOutcome]:
    first_due = _when(now - windows[0] - settings.SCHEDLENS_OUTCOME_GRACE_SECONDS)
    return PlacementOutcome.objects.filter(complete=False, bound_at__lte=first_due).order_by("bound_at", "id")[:limit]


def outcomes_prune(*, older_than: datetime) -> int:
    """Outcomes and balance samples of the pruned history (retention), in bounded deletes."""
    deleted = PlacementOutcome.objects.filter(bound_at__lt=older_than).delete()[0]
    return deleted + BalanceSample.objects.filter(at__lt=older_than).delete()[0]


def outcomes_refresh(*, now: float | None = None, source: OutcomeSource | None = None) -> RefreshResult:
    """Start following the newly bound cycles, add the windows that have passed, sample the balance.

    Each profile's cycles are read from its own Prometheus (:func:`_profile_address`), one source per address
    (``source``: one for every profile, the tests' and benchmarks'). A read that fails leaves that address's rows as
    they were (with the error) for the next run: an outcome is only written from what Prometheus answered, never
    guessed.
    """
    global _pruned_at, _last_error
    now = time.time() if now is None else now
    windows = _windows_seconds()
    if not windows:
        return RefreshResult(0, 0, 0, error="SCHEDLENS_OUTCOME_WINDOWS_MINUTES names no window")
    limit = settings.SCHEDLENS_OUTCOME_BATCH
    started = _start_following(now=now, windows=windows, limit=limit)
    rows = list(_incomplete(now=now, windows=windows, limit=limit))
    by_address: dict[str, list[PlacementOutcome]] = {}
    addresses: dict[str, str] = {}
    for profile in {row.profile for row in rows} | _recent_profiles(now=now):
        addresses[profile] = "" if source is not None else _profile_address(profile)
    for row in rows:
        by_address.setdefault(addresses[row.profile], []).append(row)
    for address in set(addresses.values()):
        by_address.setdefault(address, [])
    updated = samples = 0
    errors: list[str] = []
    for address, group in sorted(by_address.items()):
        reader = source if source is not None else outcome_source(address or None)
        profiles = {p for p, a in addresses.items() if a == address}
        try:
            updated += _update_outcomes(rows=group, source=reader, now=now, windows=windows)
            samples += _balance_samples(source=reader, now=now, profiles=None if source is not None else profiles)
        except TrafficSourceError as exc:
            errors.append(str(exc))
            PlacementOutcome.objects.filter(id__in=[r.id for r in group]).update(error=str(exc)[:1000])
    error = "; ".join(errors)
    if error and error != _last_error:  # once while the same failure lasts (no Prometheus: every run)
        log.warning("placement outcomes: the traffic read failed: %s", error)
    _last_error = error
    if updated:  # the table changes only with new measurements
        learn_and_publish(now=now)
    if time.monotonic() - _pruned_at >= PRUNE_EVERY_SECONDS:
        outcomes_prune(older_than=_when(now) - timedelta(days=settings.SCHEDLENS_RETENTION_DAYS))
        _pruned_at = time.monotonic()
    return RefreshResult(started, updated, samples, error=error)


def _recent_profiles(*, now: float) -> set[str]:
    """The profiles a balance sample covers (placed a pod in the last hour)."""
    recent = PlacementOutcome.objects.filter(bound_at__gte=_when(now) - BALANCE_NODES_SINCE)
    return set(recent.values_list("profile", flat=True).distinct())


def outcomes_follow(*, stop: threading.Event, interval: float) -> None:
    """:func:`outcomes_refresh` every ``interval`` seconds until ``stop`` is set (``SCHEDLENS_OUTCOME_RUNNER=process``:
    a thread of the background command ``make run`` or ``make serve`` already runs). A failed run is logged and
    the next one tries again."""
    try:
        while not stop.is_set():
            try:
                outcomes_refresh()
            except Exception:  # the database away, a bug in one run: the loop outlives it
                log.exception("placement outcomes: the run failed")
            finally:
                close_old_connections()
            stop.wait(interval)
    finally:
        connections.close_all()  # this thread's own connections: they would outlive it otherwise


def outcomes_follow_start(*, stop: threading.Event) -> threading.Thread | None:
    """Start :func:`outcomes_follow` in a daemon thread when this process is the one that runs the job."""
    if settings.SCHEDLENS_OUTCOME_RUNNER != "process":
        return None
    thread = threading.Thread(
        target=outcomes_follow,
        kwargs={"stop": stop, "interval": settings.SCHEDLENS_OUTCOME_INTERVAL_SECONDS},
        name="schedlens-placement-outcomes",
        daemon=True,
    )
    thread.start()
    return thread
