"""Replays recorded cycles under their recorded scenario and the candidate, and folds the figures into the report.

:class:`ReportBuilder` is the one accumulator of a history replay: it takes cycles one at a time (a replay reads
them in chunks), groups them for :mod:`~scheduler_core.history_replay.fast_replay` (or replays a cycle the arrays
cannot hold with :func:`scheduler_core.history_replay.what_if.replay`), and keeps running counts rather than the cycles:
at most
:attr:`ReportBuilder.BATCH` cycles are held before they are replayed and folded in.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from scheduler_core.extender.scoring.plugins.traffic import NetworkTraffic
from scheduler_core.extender.scoring.traffic_terms import NOT_VERSIONED
from scheduler_core.history_replay.fast_replay import BatchOutcome, batch_key, batch_of, outcome_of, replay_batch
from scheduler_core.history_replay.recorded_cycles import Floats, RecordedCycle
from scheduler_core.history_replay.report import (
    FIGURES,
    CandidateDescription,
    ChangedDecision,
    Count,
    HistoryReplayReport,
    NodePlacements,
    Rejection,
    SkipReason,
    Spread,
    TrafficBalance,
)
from scheduler_core.history_replay.scenarios import candidate_description, recorded_scenario
from scheduler_core.history_replay.what_if import RecordedInputs, Scenario, replay, scenario_from_profile


class ReportBuilder:
    """Replays cycles under their recorded scenario and the candidate, and folds the figures into the report.

    :meth:`add` takes cycles one by one (oldest first); they are replayed in batches of cycles that share their
    shape (:func:`batch_key`), at the latest by :meth:`report`."""

    BATCH = 512
    """Cycles held before they are replayed."""

    def __init__(
        self,
        profile_descriptions: Mapping[str, Mapping[str, Any]],  # the recorded versions' normalized forms, by digest
        candidate: Mapping[str, Any],
        *,
        description: CandidateDescription | None = None,
        sample_limit: int = 50,
    ) -> None:
        self.profiles = profile_descriptions
        self.candidate = scenario_from_profile(candidate)
        self.description = description or candidate_description(candidate, source="profile")
        self.sample_limit = sample_limit
        self._before_scenarios: dict[tuple[Any, ...], Scenario] = {}
        self._after_scenarios: dict[int, Scenario] = {}
        self._pending: list[RecordedCycle] = []
        self._samples: list[tuple[int, ChangedDecision]] = []
        self._order = 0
        self.replayed = 0
        self.skips: dict[str, int] = {}
        self.changed = Count()
        self.to_infeasible = 0
        self.to_feasible = 0
        self.unschedulable = 0
        self.schedulable = 0
        self.ties = [0, 0, 0, 0]  # before, after, created, removed
        self.partial = 0
        self.recorded_differs = 0
        self.placements: dict[str, NodePlacements] = {}
        self.quietest = [Count(), Count()]
        self.rejections: dict[tuple[str, str], list[int]] = {}

    def scenarios(self, cycle: RecordedCycle) -> tuple[Scenario, Scenario]:
        """(before, after) for ``cycle``: its recorded scenario, and the candidate over the recorded window."""
        columns = cycle.columns
        filters_seen: Sequence[str]
        if columns is not None:
            filters_seen, scale = columns.shape.filters_seen, columns.answer_scale
            has_prioritize = columns.shape.positions is not None
        else:
            assert cycle.inputs is not None
            inputs = cycle.inputs
            seen = dict.fromkeys(p for r in (inputs.filter.failures.values() if inputs.filter else ()) for p in r)
            filters_seen, scale, has_prioritize = list(seen), inputs.answer_scale, inputs.prioritize is not None
        weights = tuple(cycle.weights) if cycle.weights is not None else None
        key = (cycle.profile_version, weights, tuple(filters_seen), scale if has_prioritize else None)
        before = self._before_scenarios.get(key)
        if before is None:
            description = self.profiles.get(cycle.profile_version)
            profile_filters = list((description or {}).get("filter", []))
            seen_all = profile_filters + [p for p in filters_seen if p not in profile_filters]
            before = recorded_scenario(description, weights, seen_all, answer_scale=key[3])
            self._before_scenarios[key] = before
        after = self._after_scenarios.get(before.window_seconds)
        if after is None:
            after = replace(self.candidate, window_seconds=before.window_seconds)
            self._after_scenarios[before.window_seconds] = after
        return before, after

    def add(self, cycle: RecordedCycle) -> None:
        if not cycle.skipped and cycle.profile_version not in self.profiles:
            # Its baseline is the version it recorded: without it, a "before" from today's file would be a guess.
            cycle.skipped = (
                f"its profile version {cycle.profile_version} is not stored" if cycle.profile_version else NOT_VERSIONED
            )
        if cycle.skipped:
            self.skips[cycle.skipped] = self.skips.get(cycle.skipped, 0) + 1
            return
        self._pending.append(cycle)
        if len(self._pending) >= self.BATCH:
            self.flush()

    def flush(self) -> None:
        """Replay the cycles held."""
        pending, self._pending = self._pending, []
        groups: dict[tuple[Any, ...], list[tuple[int, RecordedCycle]]] = {}
        for cycle in pending:
            order = self._order
            self._order += 1
            if cycle.columns is None:
                self._fold_one_slowly(order, cycle)
                continue
            before, after = self.scenarios(cycle)
            key = (*batch_key(cycle.columns), id(before))
            groups.setdefault(key, []).append((order, cycle))
        for members in groups.values():
            cycles = [cycle for _, cycle in members]
            columns = [cycle.columns for cycle in cycles]
            before, after = self.scenarios(cycles[0])
            self._fold(
                [order for order, _ in members],
                cycles,
                replay_batch(columns, before),  # type: ignore[arg-type]
                replay_batch(columns, after),  # type: ignore[arg-type]
            )

    def _fold_one_slowly(self, order: int, cycle: RecordedCycle) -> None:
        assert cycle.inputs is not None
        before_scenario, after_scenario = self.scenarios(cycle)
        inputs = cycle.inputs
        if not inputs.recorded_filters:
            seen = list((self.profiles.get(cycle.profile) or {}).get("filter", []))
            inputs = replace(inputs, recorded_filters=tuple(seen))
        raws = _traffic_only(inputs)
        rates = raws / max(1, before_scenario.window_seconds) if raws is not None else None
        candidates = inputs.candidates
        before = batch_of(outcome_of(replay(inputs, before_scenario)), candidates, rates)
        after = batch_of(outcome_of(replay(inputs, after_scenario)), candidates, rates)
        self._fold([order], [cycle], before, after)

    def _fold(self, orders: list[int], cycles: list[RecordedCycle], before: BatchOutcome, after: BatchOutcome) -> None:
        rows = len(cycles)
        names = before.candidates
        self.replayed += rows
        lost = before.passed & ~after.passed
        lost_count = int(np.count_nonzero(lost))
        self.to_infeasible += lost_count * rows
        self.to_feasible += int(np.count_nonzero(after.passed & ~before.passed)) * rows
        if lost_count:
            for plugin, reason, nodes in after.rejections(lost):
                counts = self.rejections.setdefault((plugin, reason), [0, 0])
                counts[0] += nodes * rows
                counts[1] += rows
        pb, pa = before.preferred, after.preferred
        self.unschedulable += int(np.count_nonzero((pb >= 0) & (pa < 0)))
        self.schedulable += int(np.count_nonzero((pb < 0) & (pa >= 0)))
        self.ties[0] += int(np.count_nonzero(before.tied))
        self.ties[1] += int(np.count_nonzero(after.tied))
        self.ties[2] += int(np.count_nonzero(after.tied & ~before.tied))
        self.ties[3] += int(np.count_nonzero(before.tied & ~after.tied))
        self.partial += int(after.partial.sum())
        preferred_before = pb.tolist()
        for cycle, position in zip(cycles, preferred_before, strict=True):
            node = names[position] if position >= 0 else ""
            if (cycle.preferred_node or node) and cycle.preferred_node != node:
                self.recorded_differs += 1
        self.changed.n += int(np.count_nonzero((pb >= 0) | (pa >= 0)))
        changed = np.flatnonzero(pb != pa)
        self.changed.k += len(changed)
        for row in changed.tolist():
            if len(self._samples) >= self.sample_limit and orders[row] > self._samples[-1][0]:
                break
            self._samples.append((orders[row], self._changed(cycles[row], row, before, after)))
            self._samples.sort(key=lambda s: s[0])
            del self._samples[self.sample_limit :]
        for which, batch in ((0, before), (1, after)):
            chosen = batch.preferred[batch.preferred >= 0]
            if not len(chosen):
                continue
            placed, placed_counts = np.unique(chosen, return_counts=True)
            sums: Any = None
            with_rate: Any = None
            if batch.rates is not None:
                rates = batch.rates[chosen]
                known = ~np.isnan(rates)
                sums = np.bincount(chosen[known], weights=rates[known], minlength=len(names))
                with_rate = np.bincount(chosen[known], minlength=len(names))
                figures = batch.rates[batch.passed]
                figures = figures[~np.isnan(figures)]
                if len(figures):
                    self.quietest[which].n += len(chosen)
                    self.quietest[which].k += int(np.count_nonzero(known & (rates <= figures.min())))
            for position, count in zip(placed.tolist(), placed_counts.tolist(), strict=True):
                name = names[position]
                entry = self.placements.get(name)
                if entry is None:
                    entry = self.placements[name] = NodePlacements(name)
                rate_sum = float(sums[position]) if sums is not None else 0.0
                rated = int(with_rate[position]) if with_rate is not None else 0
                if which == 0:
                    entry.before += count
                    entry.before_rate_sum += rate_sum
                    entry.before_with_rate += rated
                else:
                    entry.after += count
                    entry.after_rate_sum += rate_sum
                    entry.after_with_rate += rated

    def _changed(self, cycle: RecordedCycle, row: int, before: BatchOutcome, after: BatchOutcome) -> ChangedDecision:
        b, a = int(before.preferred[row]), int(after.preferred[row])
        names = before.candidates
        why = ""
        rejected = (
            "; ".join(f"{plugin}: {reason}" for plugin, reason in after.reasons(b).items())
            if b >= 0 and not after.passed[b]
            else ""
        )
        if a < 0:
            why = "no node reaches prioritize under the candidate" + (f" ({rejected})" if rejected else "")
        elif rejected:
            why = rejected
        elif b >= 0 and after.final(row, a) == after.final(row, b):
            why = "another node scores the same under the candidate and comes first in the order sent"
        elif b >= 0:
            why = "another node scores higher under the candidate"
        else:
            why = "a node reaches prioritize under the candidate"
        return ChangedDecision(
            cycle_id=cycle.cycle_id,
            started_at=cycle.started_at,
            pod_namespace=cycle.pod_namespace,
            pod_name=cycle.pod_name,
            profile=cycle.profile,
            before_node=names[b] if b >= 0 else "",
            after_node=names[a] if a >= 0 else "",
            before_node_final_before=before.final(row, b),
            before_node_final_after=after.final(row, b),
            after_node_final_before=before.final(row, a),
            after_node_final_after=after.final(row, a),
            why=why,
        )

    def report(self, *, cycles_selected: int | None = None) -> HistoryReplayReport:
        self.flush()
        skipped = sum(self.skips.values())
        placements = sorted(self.placements.values(), key=lambda p: (-max(p.before, p.after), p.node))
        rejections = [
            Rejection(plugin, reason, nodes, cycles)
            for (plugin, reason), (nodes, cycles) in sorted(self.rejections.items(), key=lambda kv: (-kv[1][0], kv[0]))
        ]
        self.changed.basis = FIGURES["decisions_changed"]
        for count in self.quietest:
            count.basis = FIGURES["balance.quietest_chosen"]
        return HistoryReplayReport(
            candidate=self.description,
            cycles_selected=cycles_selected if cycles_selected is not None else self.replayed + skipped,
            cycles_replayed=self.replayed,
            cycles_skipped=skipped,
            skipped=[SkipReason(r, n) for r, n in sorted(self.skips.items(), key=lambda kv: -kv[1])],
            decisions_changed=self.changed,
            became_unschedulable=self.unschedulable,
            became_schedulable=self.schedulable,
            feasible_to_infeasible=self.to_infeasible,
            infeasible_to_feasible=self.to_feasible,
            ties_created=self.ties[2],
            ties_removed=self.ties[3],
            ties_before=self.ties[0],
            ties_after=self.ties[1],
            partially_scored=self.partial,
            recorded_preferred_differs=self.recorded_differs,
            placements=placements,
            balance=TrafficBalance(
                before=spread(placements, after=False),
                after=spread(placements, after=True),
                quietest_chosen_before=self.quietest[0],
                quietest_chosen_after=self.quietest[1],
            ),
            new_rejections=rejections,
            sample=[decision for _, decision in self._samples],
            sample_limit=self.sample_limit,
            figures=dict(FIGURES),
        )


def _traffic_only(inputs: RecordedInputs) -> Floats | None:
    """The score raws of a cycle the fast path does not read (aligned with its candidates, NaN: none)."""
    candidates = inputs.candidates
    raws: dict[str, float | None] = {}
    if inputs.filter is not None and inputs.filter.traffic_bytes:
        raws.update(zip(inputs.filter.nodes, inputs.filter.traffic_bytes, strict=False))
    usable = bool(raws)
    if inputs.prioritize is not None:
        for plugin in inputs.prioritize.plugins:
            if plugin.name == NetworkTraffic.name and plugin.raw:
                usable = True
                for node, raw in zip(inputs.prioritize.nodes, plugin.raw, strict=False):
                    if raw is not None:
                        raws[node] = raw
    if not usable:
        return None
    values = []
    for node in candidates:
        value = raws.get(node)
        values.append(float(value) if isinstance(value, int | float) and math.isfinite(value) else math.nan)
    return np.array(values, dtype=np.float64)


def spread(placements: Sequence[NodePlacements], *, after: bool) -> Spread:
    """The spread across nodes of their mean traffic at placement (``balance.spread`` in the figures)."""
    means: list[tuple[float, str]] = []
    for entry in placements:
        total, counted = (
            (entry.after_rate_sum, entry.after_with_rate) if after else (entry.before_rate_sum, entry.before_with_rate)
        )
        if counted:
            means.append((total / counted, entry.node))
    basis = FIGURES["balance.spread"]
    if not means:
        return Spread(basis=basis)
    values = [m for m, _ in means]
    mean = sum(values) / len(values)
    stdev = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    high = max(means)
    low = min(means)
    return Spread(
        nodes=len(means),
        mean=mean,
        stdev=stdev,
        max=high[0],
        max_node=high[1],
        min=low[0],
        min_node=low[1],
        max_over_min=high[0] / low[0] if low[0] > 0 else None,
        basis=basis,
    )
