"""The arithmetic of a placement's outcome: what the decision estimated, what followed, the error, the runner-ups.

The decision's estimate for a node is its prioritize record's ``NetworkTraffic`` figures: the bytes measured over the
profile's query window (``raw``) plus the bytes assumed for its recent binds (``herd_bytes``). An outcome window is
usually not the query window, so both are compared as rates: the estimate scaled to the outcome window is
``(measured + assumed) × window / query window``. The same goes for the pod: it is assumed to add
``assumedBytesPerPod`` over the query window, compared with what its own series counted.

A relative error is ``(outcome − estimate) / estimate``, as the Vertical Pod Autoscaler keeps
``usage_recommendation_relative_diffs``: 0 is exact, −0.5 half of what was estimated, 1.0 twice as much. It is None
when the estimate is 0 (nothing to be relative to) or the outcome is not known, never 0 in their place.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import msgspec

from scheduler_core.extender.record.structs import NETWORK_TRAFFIC, PrioritizeRecord

RUNNER_UPS = 2
"""How many runner-up nodes an outcome follows: the next best scored, enough to say whether another choice would
have ended quieter without reading every candidate's traffic."""
RELATIVE_ERROR_BUCKETS = (-0.9, -0.75, -0.5, -0.25, 0.0, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0)
"""Upper bounds of the relative-error histogram: finer near 0, and far enough above it to tell a workload ten times
busier than the constant from one twice as busy."""


class Estimate(msgspec.Struct, frozen=True, gc=False):
    """What a decision estimated for the node it chose, from its prioritize record."""

    node: str
    measured_bytes: float | None
    """``raw``: bytes the node received over the query window, as measured (None: no measurement)."""
    assumed_bytes: float
    """``herd_bytes``: bytes assumed on top for the node's recent binds."""
    query_window_seconds: int
    runner_ups: list[str]
    """The next best scored candidates, best first."""

    @property
    def total_bytes(self) -> float:
        return (self.measured_bytes or 0.0) + self.assumed_bytes

    def over(self, seconds: int) -> float:
        """The estimate scaled to an outcome window of ``seconds``."""
        return self.total_bytes * seconds / self.query_window_seconds


class WindowOutcome(msgspec.Struct, frozen=True, gc=False, omit_defaults=True):
    """The traffic of one window after the bind: ``(bound_at, bound_at + seconds]``."""

    seconds: int
    node_bytes: float | None
    """What the chosen node received in the window (None: its series missing)."""
    runner_up_bytes: dict[str, float | None] = msgspec.field(default_factory=dict)
    """What each runner-up received in the same window."""
    pod_bytes: float | None = None
    """What the pod itself received and sent in the window; None: not attributable (``pod_note`` says why)."""
    pod_note: str = ""


def estimate_of(
    prioritize: PrioritizeRecord | None, chosen: str, *, query_window_seconds: int, runner_ups: int = RUNNER_UPS
) -> Estimate | None:
    """The estimate a cycle's prioritize record made for ``chosen``; None when it has no NetworkTraffic figures for
    it (no prioritize call, the plugin not in the profile, or the chosen node not among its candidates)."""
    if prioritize is None or chosen not in prioritize.nodes or query_window_seconds <= 0:
        return None
    plugin = next((p for p in prioritize.plugins if p.name == NETWORK_TRAFFIC and p.applicable), None)
    if plugin is None or not plugin.raw:
        return None
    index = prioritize.nodes.index(chosen)
    herd = plugin.herd_bytes[index] if plugin.herd_bytes else 0.0
    order = sorted(range(len(prioritize.nodes)), key=lambda i: (-prioritize.final[i], prioritize.nodes[i]))
    others = [prioritize.nodes[i] for i in order if prioritize.nodes[i] != chosen][:runner_ups]
    return Estimate(
        node=chosen,
        measured_bytes=plugin.raw[index],
        assumed_bytes=float(herd),
        query_window_seconds=query_window_seconds,
        runner_ups=others,
    )


def relative_error(outcome: float | None, estimate: float | None) -> float | None:
    """``(outcome − estimate) / estimate``; None when either is unknown or the estimate is not positive."""
    if outcome is None or estimate is None or not estimate > 0 or not math.isfinite(outcome):
        return None
    return (outcome - estimate) / estimate


def pod_estimate_over(pod_assumed_bytes: float, *, seconds: int, query_window_seconds: int) -> float:
    """What the herd estimate assumed the pod adds over ``seconds`` (``assumedBytesPerPod`` is over the query
    window)."""
    return pod_assumed_bytes * seconds / query_window_seconds if query_window_seconds > 0 else 0.0


def quieter_runner_ups(window: WindowOutcome) -> list[str]:
    """The runner-ups that received strictly less than the chosen node in ``window``, quietest first."""
    if window.node_bytes is None:
        return []
    chosen = window.node_bytes
    quieter = [(b, n) for n, b in window.runner_up_bytes.items() if b is not None and b < chosen]
    return [n for _, n in sorted(quieter)]


def stayed_quietest(window: WindowOutcome) -> bool | None:
    """Whether the chosen node ended ``window`` no busier than every runner-up measured (None: not known)."""
    if window.node_bytes is None or not any(b is not None for b in window.runner_up_bytes.values()):
        return None
    return not quieter_runner_ups(window)


class Spread(msgspec.Struct, frozen=True, gc=False):
    """How evenly traffic is spread over nodes: the coefficient of variation (stdev / mean, population) and the
    ratio of the busiest to the quietest node."""

    nodes: int
    mean: float
    stdev: float
    cv: float | None
    """None when the mean is 0."""
    max: float
    min: float
    max_over_min: float | None
    """None when the quietest node received nothing."""


def spread(values: Iterable[float]) -> Spread | None:
    """The spread of per-node figures; None for no nodes."""
    figures = [float(v) for v in values if v is not None and math.isfinite(v)]
    if not figures:
        return None
    mean = sum(figures) / len(figures)
    stdev = math.sqrt(sum((v - mean) ** 2 for v in figures) / len(figures))
    top, bottom = max(figures), min(figures)
    return Spread(
        nodes=len(figures),
        mean=mean,
        stdev=stdev,
        cv=stdev / mean if mean > 0 else None,
        max=top,
        min=bottom,
        max_over_min=top / bottom if bottom > 0 else None,
    )


def bucket_counts(errors: Sequence[float], bounds: Sequence[float] = RELATIVE_ERROR_BUCKETS) -> list[int]:
    """Cumulative counts of ``errors`` at or below each bound, then the total (``+Inf``), as Prometheus keeps a
    histogram."""
    counts = [sum(1 for e in errors if e <= bound) for bound in bounds]
    return [*counts, len(errors)]
