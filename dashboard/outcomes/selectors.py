"""Reads of placement outcomes and the balance series, for the decision page, the API, the exports and /metrics.

An outcome is served with every figure it follows from (:func:`outcome_figures`): the estimate over each window is
``(measured + assumed) × window / query window``, the relative error ``(outcome − estimate) / estimate``, so a reader
recomputes both from the figures beside them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from dashboard.outcomes.codec import estimate_decode, windows_decode
from dashboard.outcomes.models import BalanceSample, PlacementOutcome
from scheduler_core.outcomes.arithmetic import (
    RELATIVE_ERROR_BUCKETS,
    Estimate,
    bucket_counts,
    pod_estimate_over,
    quieter_runner_ups,
    relative_error,
    stayed_quietest,
)

SERIES_LIMIT = 2000
"""The most balance samples one series answer holds (newest kept): a day of one profile at the default interval."""
UNKNOWN_KIND = "unknown"


def outcome_get(*, cycle_id: int) -> PlacementOutcome | None:
    return PlacementOutcome.objects.filter(cycle_id=cycle_id).first()


def outcomes_for_cycles(*, cycle_ids: Iterable[int]) -> dict[int, PlacementOutcome]:
    """The outcomes of some cycles (an export's chunk), by cycle id, in one query."""
    return {o.cycle_id: o for o in PlacementOutcome.objects.filter(cycle_id__in=list(cycle_ids))}


def _ranked(runner_up_bytes: dict[str, float | None], estimate: Estimate | None) -> dict[str, float | None]:
    """Each runner-up's bytes in the order the decision ranked them (the estimate's, the page's columns): the stored
    window is JSON whose keys PostgreSQL's jsonb keeps in its own order (shortest, then bytewise), not ours."""
    if estimate is None:
        return runner_up_bytes
    return {node: runner_up_bytes.get(node) for node in estimate.runner_ups}


def outcome_figures(outcome: PlacementOutcome) -> dict[str, Any]:
    """An outcome as plain data, each derived figure beside the figures it follows from."""
    estimate = estimate_decode(outcome.estimate)
    windows = []
    for window in windows_decode(outcome.windows):
        node_estimate = estimate.over(window.seconds) if estimate is not None else None
        pod_estimate = (
            pod_estimate_over(
                outcome.pod_assumed_bytes or 0.0,
                seconds=window.seconds,
                query_window_seconds=estimate.query_window_seconds,
            )
            if estimate is not None and outcome.pod_assumed_bytes is not None
            else None
        )
        windows.append(
            {
                "seconds": window.seconds,
                "node_bytes": window.node_bytes,
                "node_estimated_bytes": node_estimate,
                "node_relative_error": relative_error(window.node_bytes, node_estimate),
                "runner_up_bytes": _ranked(window.runner_up_bytes, estimate),
                "quieter_runner_ups": quieter_runner_ups(window),
                "stayed_quietest": stayed_quietest(window),
                "pod_bytes": window.pod_bytes,
                "pod_estimated_bytes": pod_estimate,
                "pod_relative_error": relative_error(window.pod_bytes, pod_estimate),
                "pod_note": window.pod_note,
            }
        )
    return {
        "cycle": outcome.cycle_id,
        "status": outcome.status,
        "complete": outcome.complete,
        "bound_at": outcome.bound_at,
        "profile": outcome.profile,
        "node": outcome.node,
        "pod": {"namespace": outcome.pod_namespace, "name": outcome.pod_name},
        "workload": {"kind": outcome.workload_kind, "name": outcome.workload_name},
        "unattributable_reason": outcome.unattributable_reason,
        "estimate": None
        if estimate is None
        else {
            "measured_bytes": estimate.measured_bytes,
            "assumed_bytes": estimate.assumed_bytes,
            "total_bytes": estimate.total_bytes,
            "query_window_seconds": estimate.query_window_seconds,
            "runner_ups": estimate.runner_ups,
        },
        "pod_assumed_bytes": outcome.pod_assumed_bytes,
        "windows": windows,
        "error": outcome.error,
    }


def balance_series(*, since: datetime, profile: str = "") -> list[BalanceSample]:
    """Balance samples since ``since``, oldest first (at most :data:`SERIES_LIMIT`, the newest)."""
    rows: QuerySet[BalanceSample] = BalanceSample.objects.filter(at__gte=since)
    if profile:
        rows = rows.filter(profile=profile)
    return list(reversed(rows.order_by("-at", "-id")[:SERIES_LIMIT]))


def balance_latest() -> list[BalanceSample]:
    """Each profile's newest balance sample (of the last hour)."""
    recent = BalanceSample.objects.filter(at__gte=timezone.now() - timedelta(hours=1)).order_by("profile", "-at", "-id")
    newest: dict[str, BalanceSample] = {}
    for sample in recent[:SERIES_LIMIT]:
        newest.setdefault(sample.profile, sample)
    return list(newest.values())


@dataclass(frozen=True, slots=True)
class Quietest:
    profile: str
    stayed: int
    """Outcomes whose chosen node ended its longest window no busier than any runner-up."""
    known: int
    """Outcomes where that is known (the chosen node and a runner-up measured)."""

    @property
    def share(self) -> float | None:
        return self.stayed / self.known if self.known else None


def quietest_shares(*, since: datetime, profile: str = "") -> list[Quietest]:
    rows = PlacementOutcome.objects.filter(bound_at__gte=since, stayed_quietest__isnull=False)
    if profile:
        rows = rows.filter(profile=profile)
    counts: dict[str, list[int]] = {}
    for name, stayed in rows.values_list("profile", "stayed_quietest").iterator():
        entry = counts.setdefault(name, [0, 0])
        entry[0] += int(bool(stayed))
        entry[1] += 1
    return [Quietest(name, stayed, known) for name, (stayed, known) in sorted(counts.items())]


@dataclass(frozen=True, slots=True)
class ErrorHistogram:
    """The herd estimate's relative error for pods of one workload kind and profile (VPA-style)."""

    workload_kind: str
    profile: str
    bounds: tuple[float, ...]
    cumulative: list[int]
    """Outcomes at or below each bound, then all of them (``+Inf``)."""
    total: float
    """The sum of the errors (a Prometheus histogram's ``_sum``)."""

    @property
    def count(self) -> int:
        return self.cumulative[-1]


def pod_error_histograms(*, since: datetime | None = None) -> list[ErrorHistogram]:
    """Per workload kind and profile, never per pod: a pod name would make a series per pod."""
    rows = PlacementOutcome.objects.filter(pod_relative_error__isnull=False)
    if since is not None:
        rows = rows.filter(bound_at__gte=since)
    errors: dict[tuple[str, str], list[float]] = {}
    for kind, profile, error in rows.values_list("workload_kind", "profile", "pod_relative_error").iterator():
        if error is not None:
            errors.setdefault((kind or UNKNOWN_KIND, profile), []).append(error)
    return [
        ErrorHistogram(kind, profile, RELATIVE_ERROR_BUCKETS, bucket_counts(values), sum(values))
        for (kind, profile), values in sorted(errors.items())
    ]
