"""The scoring engine: run a profile's filter and score plugins over the candidates and keep every term."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from scheduler_core.cluster import NodeInfo
from scheduler_core.plugins import CycleContext, Verdict
from scheduler_core.plugins.traffic import TrafficArgs, read_traffic
from scheduler_core.profiles import Profile
from scheduler_core.record import FilterRecord, PluginScores, PrioritizeRecord
from scheduler_core.wire import MAX_EXTENDER_PRIORITY


def to_extender_score(final: float) -> int:
    """0..100 → 0..10, rounded half up (28.57 → 3, 14.29 → 1). The epsilon absorbs float noise at .5.

    ``run_prioritize`` inlines this expression: at 1000 nodes the call overhead alone is measurable.
    """
    return min(MAX_EXTENDER_PRIORITY, max(0, math.floor(final / 10 + 0.5 + 1e-9)))


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
    verdicts: list[tuple[str, Sequence[Verdict]]] = [(p.name, p.filter(ctx, nodes)) for p in profile.filters]
    passed: list[int] = []
    decision = FilterDecision(passed)
    record = FilterRecord(nodes=[n.name for n in nodes], passed=[])
    for index, node in enumerate(nodes):
        reasons: dict[str, str] = {}
        unresolvable = False
        for plugin_name, plugin_verdicts in verdicts:
            verdict = plugin_verdicts[index]
            if verdict.passed:
                continue
            reasons[plugin_name] = verdict.reason
            unresolvable = unresolvable or verdict.unresolvable
            if verdict.detail:
                record.details.setdefault(node.name, {})[plugin_name] = verdict.detail
        if not reasons:
            passed.append(index)
            record.passed.append(node.name)
            continue
        # One string per node; kube-scheduler counts identical strings together, so keep it name-free.
        reason = "; ".join(f"{plugin}: {text}" for plugin, text in reasons.items())
        record.failures[node.name] = reasons
        if unresolvable:
            decision.unresolvable[node.name] = reason
            record.unresolvable.append(node.name)
        else:
            decision.failed[node.name] = reason
    traffic_args = _traffic_args(profile)
    if traffic_args is not None:
        reading = read_traffic(ctx, traffic_args)
        record.metric_age_seconds = reading.age_seconds
        record.metric_note = reading.note
        if reading.snapshot is not None:
            values = reading.snapshot.bytes_by_node
            record.traffic_bytes = [values.get(node.name) for node in nodes]
    return decision, record


def run_prioritize(profile: Profile, ctx: CycleContext, nodes: Sequence[NodeInfo]) -> PrioritizeRecord:
    """Weighted mean of the applicable score plugins, then the extender's 0..10 scale."""
    plugin_records: list[PluginScores] = []
    totals = [0.0] * len(nodes)
    total_weight = 0
    for scorer in profile.scorers:
        result = scorer.plugin.score(ctx, nodes)
        scores = [s.score for s in result.scores]
        plugin_records.append(
            PluginScores(
                name=scorer.plugin.name,
                weight=scorer.weight,
                scores=[round(s, 4) for s in scores],
                raw=[s.raw for s in result.scores] if any(s.raw is not None for s in result.scores) else [],
                herd_bytes=[s.herd_bytes for s in result.scores] if any(s.herd_bytes for s in result.scores) else [],
                notes={
                    node.name: s.detail
                    for node, s in zip(nodes, result.scores, strict=True)
                    if s.raw is None and s.detail
                },
                applicable=result.applicable,
                note=result.note,
                metric_age_seconds=result.metric_age_seconds,
            )
        )
        if not result.applicable:
            continue
        total_weight += scorer.weight
        for index, score in enumerate(scores):
            totals[index] += score * scorer.weight
    final = [t / total_weight for t in totals] if total_weight else [0.0] * len(nodes)
    return PrioritizeRecord(
        nodes=[n.name for n in nodes],
        plugins=plugin_records,
        final=[round(f, 4) for f in final],
        extender=[min(MAX_EXTENDER_PRIORITY, max(0, math.floor(f / 10 + 0.5 + 1e-9))) for f in final],
    )
