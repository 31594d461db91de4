"""The scoring engine: run a profile's filter and score plugins over the candidates and keep every term."""

from __future__ import annotations

import math
import struct
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import repeat
from operator import add, attrgetter, mul, truediv

from scheduler_core.cluster import NodeInfo
from scheduler_core.plugins import CycleContext, NodeScore, ScoreColumns, ScoreResult, Verdict
from scheduler_core.plugins.traffic import TrafficArgs, read_traffic
from scheduler_core.profiles import Profile
from scheduler_core.record import FilterRecord, PluginScores, PrioritizeRecord
from scheduler_core.wire import MAX_EXTENDER_PRIORITY


def to_extender_score(final: float) -> int:
    """0..100 → 0..10, rounded half up (28.57 → 3, 14.29 → 1). The epsilon absorbs float noise at .5.

    ``run_prioritize`` answers the same through :data:`_EXTENDER_THRESHOLDS` (one C call per node).
    """
    return min(MAX_EXTENDER_PRIORITY, max(0, math.floor(final / 10 + 0.5 + 1e-9)))


def _float_at(bits: int) -> float:
    return float(struct.unpack("<d", struct.pack("<q", bits))[0])


def _threshold(score: int) -> float:
    """The smallest non-negative float that :func:`to_extender_score` maps to ``score`` or more.

    ``to_extender_score`` is monotonic (IEEE division and addition round monotonically), and non-negative
    floats order like their bit patterns, so a bisection over the bit patterns finds the exact boundary.
    """
    low, high = 0, struct.unpack("<q", struct.pack("<d", 100.0))[0]  # maps below ``score`` / to ``score`` or more
    while high - low > 1:
        middle = (low + high) // 2
        if to_extender_score(_float_at(middle)) >= score:
            high = middle
        else:
            low = middle
    return _float_at(high)


_EXTENDER_THRESHOLDS = tuple(_threshold(score) for score in range(1, MAX_EXTENDER_PRIORITY + 1))
"""``bisect_right(_EXTENDER_THRESHOLDS, final) == to_extender_score(final)`` for every final score."""
_name = attrgetter("name")
_reason = attrgetter("reason")


def round4(values: Sequence[float]) -> list[float]:
    """``[round(v, 4) for v in values]``: each distinct value rounded once when there are few of them.

    ``round(v, 4)`` costs ~0.2 µs (a decimal conversion); most plugins give a handful of distinct scores
    (image shares, NodeResources scores, one note for all), so a 1000-node list is a few rounds and a lookup.
    """
    distinct = set(values)
    if len(distinct) * 4 > len(values):
        return list(map(round, values, repeat(4)))
    rounded = {value: round(value, 4) for value in distinct}
    return list(map(rounded.__getitem__, values))


@dataclass(frozen=True, slots=True)
class FilterDecision:
    passed: list[int]
    """Indices of the nodes that passed, in input order."""
    failed: dict[str, str] = field(default_factory=dict)
    unresolvable: dict[str, str] = field(default_factory=dict)


def _traffic_args(profile: Profile) -> TrafficArgs | None:
    candidates = [s.plugin for s in profile.scorers] + list(profile.filters)
    for plugin in candidates:
        args = getattr(plugin, "args", None)
        if isinstance(args, TrafficArgs):
            return args
    return None


def run_filter(profile: Profile, ctx: CycleContext, nodes: Sequence[NodeInfo]) -> tuple[FilterDecision, FilterRecord]:
    """Every filter plugin judges every node (no short-circuit), so the record holds each verdict."""
    names = list(map(_name, nodes))
    # Node index → the failing (plugin, verdict) pairs in plugin order; most nodes pass every plugin, so only
    # the failures are visited one by one.
    failing: dict[int, list[tuple[str, Verdict]]] = {}
    for plugin in profile.filters:
        verdicts = plugin.filter(ctx, nodes)
        for index, reason in enumerate(map(_reason, verdicts)):
            if reason:
                failing.setdefault(index, []).append((plugin.name, verdicts[index]))
    passed = [i for i in range(len(names)) if i not in failing] if failing else list(range(len(names)))
    decision = FilterDecision(passed)
    record = FilterRecord(nodes=names, passed=[names[i] for i in passed])
    for index in sorted(failing):
        name = names[index]
        reasons: dict[str, str] = {}
        unresolvable = False
        for plugin_name, verdict in failing[index]:
            reasons[plugin_name] = verdict.reason
            unresolvable = unresolvable or verdict.unresolvable
            if verdict.detail:
                record.details.setdefault(name, {})[plugin_name] = verdict.detail
        # One string per node; kube-scheduler counts identical strings together, so keep it name-free.
        reason = "; ".join(f"{plugin}: {text}" for plugin, text in reasons.items())
        record.failures[name] = reasons
        if unresolvable:
            decision.unresolvable[name] = reason
            record.unresolvable.append(name)
        else:
            decision.failed[name] = reason
    traffic_args = _traffic_args(profile)
    if traffic_args is not None:
        reading = read_traffic(ctx, traffic_args)
        record.metric_age_seconds = reading.age_seconds
        record.metric_note = reading.note
        if reading.snapshot is not None:
            record.traffic_bytes = list(map(reading.snapshot.bytes_by_node.get, names))
    return decision, record


def _columns(scores: Sequence[NodeScore]) -> ScoreColumns:
    """A plugin's per-node ``NodeScore`` objects as columns (plugins that build objects still work)."""
    if isinstance(scores, ScoreColumns):
        return scores
    return ScoreColumns(
        [s.score for s in scores],
        [s.raw for s in scores],
        [s.detail for s in scores],
        {i: s.herd_bytes for i, s in enumerate(scores) if s.herd_bytes},
    )


def _plugin_record(scorer_name: str, weight: int, result: ScoreResult, names: list[str]) -> PluginScores:
    columns = _columns(result.scores)
    raws = list(columns.raws) if columns.raws is not None else []
    herd_bytes: list[float] = []
    if any(columns.herd_bytes.values()):
        herd_bytes = [0.0] * len(names)
        for index, extra in columns.herd_bytes.items():
            herd_bytes[index] = extra
    notes: dict[str, str] = {}
    # A plugin that does not apply says why once (``note``); the explanation falls back to it for every node,
    # so the same sentence is not stored once per node (half the record of a 1000-node prioritize).
    same_as_note = result.note if not result.applicable else None
    if columns.details is not None and not (
        isinstance(columns.details, list) and columns.details.count(same_as_note) == len(columns.details)
    ):
        unmeasured: Sequence[int] = range(len(names))
        if raws:
            unmeasured = [i for i, raw in enumerate(raws) if raw is None] if raws.count(None) else []
        details = columns.details
        notes = {names[i]: details[i] for i in unmeasured if details[i] and details[i] != same_as_note}
    return PluginScores(
        name=scorer_name,
        weight=weight,
        scores=round4(columns.values),
        raw=raws if raws.count(None) != len(raws) else [],
        herd_bytes=herd_bytes,
        notes=notes,
        applicable=result.applicable,
        note=result.note,
        metric_age_seconds=result.metric_age_seconds,
    )


def run_prioritize(profile: Profile, ctx: CycleContext, nodes: Sequence[NodeInfo]) -> PrioritizeRecord:
    """Weighted mean of the applicable score plugins, then the extender's 0..10 scale."""
    names = list(map(_name, nodes))
    plugin_records: list[PluginScores] = []
    totals = [0.0] * len(nodes)
    total_weight = 0
    for scorer in profile.scorers:
        result = scorer.plugin.score(ctx, nodes)
        plugin_records.append(_plugin_record(scorer.plugin.name, scorer.weight, result, names))
        if not result.applicable:
            continue
        total_weight += scorer.weight
        # totals[i] += score * weight, in C.
        totals = list(map(add, totals, map(mul, _columns(result.scores).values, repeat(scorer.weight))))
    final = list(map(truediv, totals, repeat(total_weight))) if total_weight else [0.0] * len(nodes)
    return PrioritizeRecord(
        nodes=names,
        plugins=plugin_records,
        final=round4(final),
        extender=list(map(bisect_right, repeat(_EXTENDER_THRESHOLDS), final)),
    )
