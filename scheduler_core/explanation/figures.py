"""The figures each score follows from, and the arithmetic written out, so that a person can recompute it.

Works on a decoded :class:`~scheduler_core.extender.record.structs.PrioritizeRecord`. Every score plugin's normalized
score is shown beside what it is computed from (the engine's formulas, in the engine's order of operations):

- ``NetworkTraffic``: ``100 − estimate × 100 / max estimate``, where a node's estimate is its measured bytes plus
  the bytes assumed for its recent binds (the herd estimate) and the maximum is over the candidates with a
  measurement; a node without one scores the neutral value (or 0 under ``missingPolicy: fail``) and says why;
- ``NodeResourceFitByCR``: the mean of the node's ``resourcesScore`` over the requested resources, clamped to 0..100;
- ``ImageLocality``: ``present × 100 / requested`` images;
- the final score: the weighted mean of the applicable plugins' scores as recorded (4 decimals), and the answer:
  :mod:`scheduler_core.extender.scoring.answer`.

Numbers in the arithmetic are exact: bytes in full (the record's figures), scores to the record's 4 decimals.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy

from scheduler_core.extender.record.structs import PluginScores, PrioritizeRecord
from scheduler_core.extender.scoring.answer import answer_arithmetic
from scheduler_core.extender.scoring.plugins.base import NEUTRAL_SCORE
from scheduler_core.extender.scoring.plugins.traffic import NetworkTraffic, traffic_scores
from scheduler_core.extender.scoring.units import score_text


@dataclass(frozen=True, slots=True)
class ReconciledFigures:
    """A recent bind counted by its pod's own traffic (``reconcileHerd``): ``counted = max(0, assumed − observed)``."""

    pod: str
    assumed_bytes: float
    observed_bytes: float
    """The pod's own bytes over the query window, read with the node's measurement."""
    counted_bytes: float


@dataclass(frozen=True, slots=True)
class TrafficFigures:
    """What a node's ``NetworkTraffic`` score follows from."""

    measured_bytes: float | None
    """Bytes received over the query window (None: no usable measurement)."""
    herd_bytes: float
    """Bytes assumed on top for pods bound there recently (the herd estimate; 0 when none)."""
    herd_binds: int | None
    """How many recent binds ``herd_bytes`` come from (None: a record from before schedlens counted them)."""
    herd_newest_bind_age_seconds: float | None
    """How long before the call the newest of them was bound."""
    estimate_bytes: float | None
    """``measured_bytes + herd_bytes``: what the score is computed from."""
    max_estimate_bytes: float | None
    """The largest estimate among the candidates: the one that scores 0."""
    max_estimate_node: str
    metric_age_seconds: float | None
    missing_reason: str
    """Why the node has no usable measurement (it then scores the neutral value, or 0 under ``missingPolicy: fail``)."""
    missing_score: float | None
    """What a node without a usable measurement scores under the profile's policy (None: an older record)."""
    herd_reconciled: tuple[ReconciledFigures, ...] = ()
    """The node's recent binds counted by their pods' own traffic; ``herd_bytes`` is their ``counted_bytes`` plus
    what its other binds (``herd_binds`` in all) add decaying, rounded to whole bytes."""


@dataclass(frozen=True, slots=True)
class ResourceFigures:
    """What a node's ``NodeResourceFitByCR`` score follows from."""

    requested: tuple[str, ...]
    """The extended resources the pod requests."""
    resource_scores: dict[str, float | None]
    """The node's ``resourcesScore`` for each (None: the node has no NodeResources object)."""
    mean: float | None
    """Their mean, before clamping to 0..100."""


@dataclass(frozen=True, slots=True)
class ImageFigures:
    """What a node's ``ImageLocality`` score follows from."""

    requested: int
    """How many images the pod names."""
    present: int | None
    """How many of them the node already holds."""
    images: tuple[str, ...]


def _exact(value: float) -> str:
    """A byte figure in full: ``1,712,345,678`` (a fraction only when the figure has one)."""
    return f"{int(value):,}" if float(value).is_integer() else f"{value:,}"


def _binds_text(count: int | None) -> str:
    if count is None:
        return "recent binds, not counted in this record"
    return f"{count} recent bind" + ("" if count == 1 else "s")


def _reconciled_text(figures: TrafficFigures) -> str:
    """``: shop/web-a max(0, 300,000,000 assumed − 125,000,000 observed) = 175,000,000, the other 1 decayed``."""
    if not figures.herd_reconciled:
        return ""
    parts = [
        f"{bind.pod} max(0, {_exact(bind.assumed_bytes)} assumed − {_exact(bind.observed_bytes)} observed) = "
        f"{_exact(bind.counted_bytes)}"
        for bind in figures.herd_reconciled
    ]
    others = (figures.herd_binds or 0) - len(figures.herd_reconciled)
    rest = f", the other {others} decayed" if others > 0 else ""
    return ": " + "; ".join(parts) + rest


def seconds_text(value: float) -> str:
    """An age as a person reads it: ``2.2 s``, ``35 ms``."""
    return f"{value:.1f} s" if value >= 0.1 else f"{value * 1000:.0f} ms"


def _at(column: Sequence[float | None] | Sequence[float] | Sequence[int], index: int) -> float | None:
    return column[index] if index < len(column) else None


class TrafficColumn:
    """The ``NetworkTraffic`` record read once per cycle: estimates and their maximum over the candidates."""

    def __init__(self, plugin: PluginScores, nodes: Sequence[str]) -> None:
        self.plugin = plugin
        self.nodes = nodes
        # A column at a time (None: NaN): an ``Explained`` Event reads this once per placement.
        raw = numpy.array(plugin.raw, dtype=float)
        herd = numpy.zeros(len(raw))
        herd[: len(plugin.herd_bytes)] = plugin.herd_bytes[: len(raw)]
        self._estimates = raw + herd
        self.reconciled: dict[int, list[ReconciledFigures]] = {}
        for bind in plugin.herd_reconciled:
            figures = ReconciledFigures(bind.pod, bind.assumed, bind.observed, bind.counted)
            self.reconciled.setdefault(bind.node, []).append(figures)
        self.max_estimate: float | None = None
        self.max_node = ""
        if len(raw) and not numpy.isnan(self._estimates).all():
            index = int(numpy.nanargmax(self._estimates))  # the first node at the maximum
            self.max_estimate, self.max_node = float(self._estimates[index]), nodes[index]

    def estimate(self, index: int) -> float | None:
        """The node's estimate, measured + assumed bytes (None: not measured)."""
        if index >= len(self._estimates) or numpy.isnan(self._estimates[index]):
            return None
        return float(self._estimates[index])

    def figures(self, index: int, missing_reason: str) -> TrafficFigures:
        plugin = self.plugin
        binds = _at(plugin.herd_binds, index)
        newest_ms = _at(plugin.herd_newest_age_ms, index)
        return TrafficFigures(
            measured_bytes=_at(plugin.raw, index),
            herd_bytes=_at(plugin.herd_bytes, index) or 0.0,
            herd_binds=int(binds) if binds is not None else None if plugin.herd_bytes else 0,
            herd_newest_bind_age_seconds=None if newest_ms is None else newest_ms / 1000,
            estimate_bytes=self.estimate(index),
            max_estimate_bytes=self.max_estimate,
            max_estimate_node=self.max_node,
            metric_age_seconds=plugin.metric_age_seconds,
            missing_reason=missing_reason,
            missing_score=plugin.missing_score,
            herd_reconciled=tuple(self.reconciled.get(index, ())),
        )

    def arithmetic(self, figures: TrafficFigures, normalized: float) -> str:
        """``100 − 694,123,456 × 100 / 1,712,345,678 = 59.4632``, with where the estimate comes from."""
        if figures.estimate_bytes is None or figures.measured_bytes is None:
            reason = figures.missing_reason or "no traffic measurement"
            policy = ""
            if figures.missing_score == NEUTRAL_SCORE:
                policy = "the neutral score "
            elif figures.missing_score == 0.0:
                policy = "missingPolicy fail scores it "
            return f"{reason}: {policy}{score_text(normalized)}"
        if not figures.max_estimate_bytes:
            return f"every candidate's estimate is 0 B: {score_text(normalized)}"
        estimate = _exact(figures.estimate_bytes)
        origin = ""
        if figures.herd_bytes:
            binds = _binds_text(figures.herd_binds)
            if figures.herd_newest_bind_age_seconds is not None:
                binds += f", the newest {seconds_text(figures.herd_newest_bind_age_seconds)} before"
            origin = (
                f"estimate {estimate} = {_exact(figures.measured_bytes)} measured + "
                f"{_exact(figures.herd_bytes)} assumed ({binds}{_reconciled_text(figures)}); "
            )
        largest = f"{_exact(figures.max_estimate_bytes)} ({figures.max_estimate_node})"
        return f"{origin}100 − {estimate} × 100 / {largest} = {score_text(normalized)}"


def resource_figures(plugin: PluginScores, index: int) -> ResourceFigures | None:
    if not plugin.requested:
        return None
    scores = {name: _at(column, index) for name, column in plugin.inputs.items()}
    return ResourceFigures(tuple(plugin.requested), scores, _at(plugin.raw, index))


def resource_arithmetic(figures: ResourceFigures, normalized: float, note: str) -> str:
    if figures.mean is None or any(score is None for score in figures.resource_scores.values()):
        return f"{note or 'no NodeResources object for node'}: {score_text(normalized)}"
    terms = " + ".join(score_text(score or 0.0) for score in figures.resource_scores.values())
    count = len(figures.resource_scores)
    mean = score_text(figures.mean)
    text = f"({terms}) / {count} = {mean}" if count > 1 else f"resourcesScore {mean}"
    if figures.mean != normalized:
        text += f", clamped to 0..100: {score_text(normalized)}"
    return text


def image_figures(plugin: PluginScores, index: int) -> ImageFigures | None:
    if not plugin.requested:
        return None
    present = _at(plugin.raw, index)
    return ImageFigures(len(plugin.requested), None if present is None else int(present), tuple(plugin.requested))


def image_arithmetic(figures: ImageFigures, normalized: float) -> str:
    if figures.present is None:
        return score_text(normalized)
    present, requested = figures.present, figures.requested
    return f"{present} of {requested} images present: {present} × 100 / {requested} = {score_text(normalized)}"


def final_arithmetic(prioritize: PrioritizeRecord, index: int) -> str:
    """``(59.4632 × 3 + 80 × 1) / 4 = 64.5974``: the weighted mean of the applicable plugins' scores."""
    applicable = [p for p in prioritize.plugins if p.applicable and p.weight]
    final = prioritize.final[index]
    if not applicable:
        return f"no plugin applied: {score_text(final)}"
    parts = [f"{score_text(_at(p.scores, index) or 0.0)} × {p.weight}" for p in applicable]
    weights = sum(p.weight for p in applicable)
    summed = parts[0] if len(parts) == 1 else f"({' + '.join(parts)})"
    return f"{summed} / {weights} = {score_text(final)}"


def answer_text(prioritize: PrioritizeRecord, index: int, bounds: tuple[float, float] | None) -> str:
    return answer_arithmetic(prioritize.final[index], prioritize.extender[index], prioritize.answer_scale, bounds)


def measured_leader(prioritize: PrioritizeRecord, forced: Mapping[str, str]) -> str:
    """The node that would have the highest final score were ``NetworkTraffic`` scored on measured bytes alone (the
    other terms as recorded); empty without herd bytes."""
    plugin = next((p for p in prioritize.plugins if p.name == NetworkTraffic.name), None)
    if plugin is None or not plugin.applicable or not plugin.herd_bytes or not plugin.raw:
        return ""
    raw = numpy.array(plugin.raw, dtype=float)
    known = ~numpy.isnan(raw)
    measured_scores = numpy.full(len(raw), numpy.nan)
    measured_scores[known] = traffic_scores(raw[known], float(raw[known].max()) if known.any() else 0.0)
    weights = sum(p.weight for p in prioritize.plugins if p.applicable)
    count = min(len(prioritize.nodes), len(plugin.raw))
    # Each node's final score with NetworkTraffic's on measured bytes (its recorded score where none was measured),
    # summed plugin by plugin in the record's order, as the engine sums them: the same floats, a column at a time.
    total = numpy.zeros(count)
    for p in prioritize.plugins:
        if not p.applicable:
            continue
        scores = numpy.asarray(p.scores[:count], dtype=float)
        if p is plugin:
            measured_column = measured_scores[:count]
            scores = numpy.where(numpy.isnan(measured_column), scores, measured_column)
        total = total + scores * p.weight
    finals = (total / weights if weights else numpy.zeros(count)).tolist()
    best, leader = -1.0, ""
    for node, final in zip(prioritize.nodes, finals, strict=False):
        if node in forced:
            continue
        if final > best + 1e-9:
            best, leader = final, node
    return leader
