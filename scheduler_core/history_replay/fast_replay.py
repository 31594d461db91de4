"""The history replay, vectorized: many recorded cycles replayed at once, equal to replaying each one by one.

:func:`scheduler_core.history_replay.what_if.replay` replays one cycle, node by node; a history replay runs it twice
over thousands of cycles. :func:`replay_batch` gives the same verdicts, final scores (bit for bit), answers, preferred
node and tie for cycles that share their shape (:func:`batch_key`), by the same floating-point operations per node, in
numpy passes over all of them (``tests/scheduler_core/history_replay/test_fast_replay.py`` holds it to that).
:func:`outcome_of` and
:func:`batch_of` put what the one-by-one replay gave in the same form, for the cycles the arrays cannot hold.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from scheduler_core.extender.protocol.wire import MAX_EXTENDER_PRIORITY as MAX_ANSWER
from scheduler_core.extender.scoring.plugins.base import NEUTRAL_SCORE
from scheduler_core.extender.scoring.plugins.traffic import NetworkTraffic, TrafficThreshold
from scheduler_core.extender.scoring.units import human_rate
from scheduler_core.history_replay.recorded_cycles import Bools, CycleColumns, CycleShape, Floats, Ints, Stage
from scheduler_core.history_replay.what_if import NOT_PRIORITIZED, ReplayResult, Scenario


def _traffic_arrays(columns: CycleColumns) -> tuple[Floats, Floats, bool, bool]:
    """``(filter raws, score raws, usable, neutral)`` per candidate, as
    :func:`scheduler_core.history_replay.what_if.replay` reads them: the threshold judges the filter's figure, else
    prioritize's; ``NetworkTraffic`` scores prioritize's, else the filter's; neutral when no snapshot was usable or
    ``NetworkTraffic`` recorded no raw figures."""
    shape = columns.shape
    fr = shape.filter_traffic
    if columns.raw_is_filter and fr is not None:
        return fr, fr, True, False  # prioritize's figures are the filter's: both coalesce to the filter's
    count = len(shape.candidates)
    nan = np.full(count, np.nan)
    usable = fr is not None
    sr = nan
    neutral = columns.has_traffic_plugin
    raw = columns.traffic_raw
    if columns.raw_is_filter and fr is None:  # (never made so: the reference needs the filter's figures)
        raise ValueError("raw figures referred to a filter without figures")
    if raw is not None and shape.positions is not None:
        usable, neutral = True, False
        sr = nan.copy()
        sr[shape.positions] = raw
    fr_full = fr if fr is not None else nan
    filter_raws = np.where(np.isnan(fr_full), sr, fr_full)
    score_raws = np.where(np.isnan(sr), fr_full, sr)
    return filter_raws, score_raws, usable, neutral or not usable


def _stage(columns: CycleColumns, scenario: Scenario) -> Stage:
    shape = columns.shape
    key = (columns.traffic_key(), id(scenario))
    cached = shape.stages.get(key)
    if cached is not None and cached[0] is scenario:
        return cached[1]
    count = len(shape.candidates)
    filter_raws, score_raws, usable, neutral = _traffic_arrays(columns)
    window = max(1, scenario.window_seconds)
    limit = scenario.max_bytes_per_second
    failed = np.zeros(count, dtype=bool)
    traffic_missing: Bools | None = None
    traffic_above: Bools | None = None
    for name in scenario.filters:
        if name == TrafficThreshold.name:
            if not usable:
                if scenario.fail_on_missing:
                    traffic_missing = np.ones(count, dtype=bool)
                    failed |= traffic_missing
            else:
                missing = np.isnan(filter_raws)
                if scenario.fail_on_missing and missing.any():
                    traffic_missing = missing
                    failed |= missing
                with np.errstate(invalid="ignore"):
                    above = filter_raws / window > limit
                if above.any():
                    traffic_above = above
                    failed |= above
        else:
            mask = shape.failed_by.get(name)
            if mask is not None:
                failed |= mask
    passed = ~failed
    if shape.prioritized is not None:
        passed &= ~(shape.recorded_passed & ~shape.prioritized)  # sent elsewhere's way: not ours to revisit
    feasible = np.flatnonzero(passed)
    sent = shape.sent_of[feasible]
    sent_count = len(shape.positions) if shape.positions is not None else 0
    all_sent = bool((sent < sent_count).all())
    stage = Stage(
        passed=passed,
        feasible=feasible,
        sent=sent,
        all_sent=all_sent,
        sent_identity=all_sent and len(sent) == sent_count and bool((sent == np.arange(sent_count)).all()),
        all_known=not bool(np.isnan(score_raws[feasible]).any()),
        score_raws=score_raws,
        usable=usable,
        neutral=neutral,
        traffic_missing=traffic_missing,
        traffic_above=traffic_above,
        reason_above=f"receive rate above {human_rate(limit)}",
    )
    if columns.traffic_key()[0] != "own":
        shape.stages[key] = (scenario, stage)
    return stage


@dataclass(slots=True)
class BatchOutcome:
    """Cycles of one shape replayed under one scenario: one row per cycle."""

    candidates: Sequence[str]
    passed: Bools
    """Per candidate: reached prioritize (the same for every row)."""
    feasible: Ints
    finals: Floats
    """(rows, feasible): final scores, rounded to 4 decimals."""
    scale: str
    """The scale the scenario answers on (:meth:`answers` gives the 0..10 answers)."""
    preferred: Ints
    """Per row: the candidate position with the highest final score (first on a tie); -1 when none passed."""
    tied: Bools
    """Per row: :attr:`ReplayResult.preference_tied`."""
    partial: Ints
    """Per row: nodes that passed without a recorded score of an active plugin."""
    reasons: Callable[[int], Mapping[str, str]]
    """Candidate position → why it did not pass (plugin → reason)."""
    rejections: Callable[[Bools], list[tuple[str, str, int]]]
    """Candidates (a mask) → (plugin, reason, how many of them it rejected), each node under every plugin that
    rejected it."""
    rates: Floats | None
    """Per candidate, recorded traffic in bytes per second (the score raws over the window); None: unusable."""

    def answers(self) -> Ints:
        """(rows, feasible): the 0..10 answers."""
        return _answers(self.finals, self.scale)

    def final(self, row: int, position: int) -> float | None:
        if position < 0 or not self.passed[position]:
            return None
        return float(self.finals[row, int(np.searchsorted(self.feasible, position))])

    def outcome(self, row: int) -> Outcome:
        count = len(self.candidates)
        finals = np.full(count, np.nan)
        finals[self.feasible] = self.finals[row]
        given = np.full(count, -1, dtype=np.int64)
        given[self.feasible] = self.answers()[row]
        return Outcome(
            passed=self.passed,
            finals=finals,
            answers=given,
            preferred=int(self.preferred[row]),
            tied=bool(self.tied[row]),
            partial=int(self.partial[row]),
            reasons=self.reasons,
        )


@dataclass(slots=True)
class Outcome:
    """A cycle replayed under one scenario, in arrays aligned with its candidates."""

    passed: Bools
    finals: Floats
    """Final score (rounded to 4 decimals) of each node that passed; NaN for the others."""
    answers: Ints
    """0..10 answer of each node that passed; -1 for the others."""
    preferred: int
    tied: bool
    partial: int
    reasons: Callable[[int], Mapping[str, str]]


_EPSILON = 1e-9
"""``scheduler_core.extender.scoring.answer``'s: absorbs float noise at .5."""


def _answers(finals: Floats, scale: str) -> Ints:
    """:func:`scheduler_core.extender.scoring.answer.answers` (no forced positions) of each row, the same IEEE
    operations."""
    rows, width = finals.shape
    if width == 0:
        return np.zeros((rows, 0), dtype=np.int64)
    if scale != "spread":
        return np.clip(np.floor(finals / 10 + 0.5 + _EPSILON), 0, MAX_ANSWER).astype(np.int64)
    low = finals.min(axis=1, keepdims=True)
    high = finals.max(axis=1, keepdims=True)
    spread = high > low
    span = np.where(spread, high - low, 1.0)
    rounded = np.floor(10 * (finals - low) / span + 0.5 + _EPSILON)
    top = np.where(finals < high, MAX_ANSWER - 1, MAX_ANSWER)
    given = np.clip(rounded, 0, top).astype(np.int64)
    return np.where(spread, given, MAX_ANSWER)


def _fixed_answer(values: Floats) -> Floats:
    """:func:`scheduler_core.extender.scoring.answer.answers` under ``fixed``, elementwise (the same IEEE
    operations)."""
    return np.clip(np.floor(values / 10 + 0.5 + _EPSILON), 0, MAX_ANSWER)


def _stacked(cycles: Sequence[CycleColumns], place: int, stage: Stage, sent_count: int) -> tuple[Floats, bool]:
    """(rows, feasible): each cycle's recorded scores of plugin ``place`` at the feasible nodes (NaN: not sent),
    and whether every one is known (recorded scores are never NaN:
    :class:`~scheduler_core.history_replay.recorded_cycles.PluginColumns`)."""
    columns = [cycle.plugins[place].scores for cycle in cycles]
    if stage.all_sent and all(c is not None for c in columns):
        matrix = np.stack(columns)  # type: ignore[arg-type]
        return (matrix if stage.sent_identity else matrix[:, stage.sent]), True
    padded = np.full((len(cycles), sent_count + 1), np.nan)
    for row, scores in enumerate(columns):
        if scores is not None:
            padded[row, : len(scores)] = scores
    gathered = padded[:, stage.sent]
    return gathered, not bool(np.isnan(gathered).any())


def replay_batch(cycles: Sequence[CycleColumns], scenario: Scenario) -> BatchOutcome:
    """:func:`scheduler_core.history_replay.what_if.replay` of cycles that share their shape, traffic figures and
    plugins (as
    :func:`batch_key` groups them) under ``scenario``: the same verdicts, final scores, answers, preferred node and
    tie for each, by the same floating-point operations per node, in numpy passes over all of them at once."""
    first = cycles[0]
    stage = _stage(first, scenario)
    shape = first.shape
    rows = len(cycles)
    feasible = stage.feasible
    width = len(feasible)
    sent_count = len(shape.positions) if shape.positions is not None else 0
    recorded = {p.name: i for i, p in enumerate(first.plugins)}
    total = np.zeros((rows, width))
    weight_sum: Any = 0
    unknown: Bools | None = None
    for name, weight in scenario.weights.items():
        if weight <= 0 or not width:
            continue
        if name == NetworkTraffic.name:
            if stage.neutral:
                total += NEUTRAL_SCORE * weight
                weight_sum = weight_sum + weight
                continue
            base = stage.score_raws[feasible]
            herds = [c.herd for c in cycles]
            estimates: Floats
            if any(h is not None for h in herds):
                if stage.all_sent:
                    extra = np.stack([h if h is not None else np.zeros(sent_count) for h in herds])
                    estimates = base + (extra if stage.sent_identity else extra[:, stage.sent])
                else:
                    padded = np.zeros((rows, sent_count + 1))
                    for row, herd in enumerate(herds):
                        if herd is not None:
                            padded[row, : len(herd)] = herd
                    estimates = base + padded[:, stage.sent]
            else:
                estimates = base[None, :]
            if stage.all_known:
                highest = estimates.max(axis=1)
                factor = np.divide(100.0, highest, out=np.zeros(len(highest)), where=highest > 0)
                term = (100.0 - estimates * factor[:, None]).round(4)
            else:
                known = ~np.isnan(estimates)
                highest = np.where(known, estimates, -np.inf).max(axis=1)
                factor = np.divide(100.0, highest, out=np.zeros(len(highest)), where=highest > 0)
                term = np.where(known, 100.0 - estimates * factor[:, None], NEUTRAL_SCORE).round(4)
            total += term * weight
            weight_sum = weight_sum + weight
            continue
        place = recorded.get(name)
        if place is not None and not first.plugins[place].applicable:
            continue
        if place is None:
            unknown = np.ones((rows, width), dtype=bool)
            continue
        gathered, complete = _stacked(cycles, place, stage, sent_count)
        if complete:
            total += gathered * weight
            weight_sum = weight_sum + weight
        else:
            known = ~np.isnan(gathered)
            unknown = ~known if unknown is None else unknown | ~known
            total += np.where(known, gathered * weight, 0.0)
            weight_sum = weight_sum + np.where(known, weight, 0)
    if isinstance(weight_sum, int):
        finals = (total / weight_sum if weight_sum else total).round(4)
    else:
        finals = np.divide(total, weight_sum, out=np.zeros((rows, width)), where=weight_sum > 0).round(4)
    if width:
        best_place = finals.argmax(axis=1)
        preferred = feasible[best_place].astype(np.int64)
        if scenario.answer_scale == "spread" or width < 2:
            # Spread: only the highest final score answers 10, every lower one at most 9: never a tie.
            tied = np.zeros(rows, dtype=bool)
        else:
            best = finals[np.arange(rows), best_place]
            below = np.where(finals < best[:, None], finals, -np.inf).max(axis=1)
            # The answer grows with the final score: a lower node ties with the best iff the next lower one does.
            tied = (below > -np.inf) & (_fixed_answer(np.where(below > -np.inf, below, 0.0)) == _fixed_answer(best))
    else:
        preferred = np.full(rows, -1, dtype=np.int64)
        tied = np.zeros(rows, dtype=bool)
    partial = unknown.sum(axis=1) if unknown is not None else np.zeros(rows, dtype=np.int64)
    window = max(1, scenario.window_seconds)
    return BatchOutcome(
        candidates=shape.candidates,
        passed=stage.passed,
        feasible=feasible,
        finals=finals,
        scale=scenario.answer_scale,
        preferred=preferred,
        tied=tied,
        partial=partial,
        reasons=partial_reasons(shape, scenario, stage),
        rejections=partial_rejections(shape, scenario, stage),
        rates=stage.score_raws / window if stage.usable else None,
    )


def partial_reasons(shape: CycleShape, scenario: Scenario, stage: Stage) -> Callable[[int], Mapping[str, str]]:
    def reasons(position: int) -> Mapping[str, str]:
        if stage.passed[position]:
            return {}
        found: dict[str, str] = {}
        for name in scenario.filters:
            if name == TrafficThreshold.name:
                if stage.traffic_missing is not None and stage.traffic_missing[position]:
                    found[name] = "traffic metrics unavailable" if not stage.usable else "no traffic series for node"
                elif stage.traffic_above is not None and stage.traffic_above[position]:
                    found[name] = stage.reason_above
            else:
                reason = shape.failures.get(shape.candidates[position], {}).get(name)
                if reason is not None:
                    found[name] = reason
        return found or {"kube-scheduler": NOT_PRIORITIZED}

    return reasons


def partial_rejections(
    shape: CycleShape, scenario: Scenario, stage: Stage
) -> Callable[[Bools], list[tuple[str, str, int]]]:
    def rejections(mask: Bools) -> list[tuple[str, str, int]]:
        found: list[tuple[str, str, int]] = []
        rejected = np.zeros(len(mask), dtype=bool)
        for name in scenario.filters:
            if name == TrafficThreshold.name:
                missing = stage.traffic_missing
                if missing is not None:
                    hit = mask & missing
                    if (n := int(np.count_nonzero(hit))) > 0:
                        text = "traffic metrics unavailable" if not stage.usable else "no traffic series for node"
                        found.append((name, text, n))
                        rejected |= hit
                    above = stage.traffic_above & ~missing if stage.traffic_above is not None else None
                else:
                    above = stage.traffic_above
                if above is not None:
                    hit = mask & above
                    if (n := int(np.count_nonzero(hit))) > 0:
                        found.append((name, stage.reason_above, n))
                        rejected |= hit
            else:
                failed = shape.failed_by.get(name)
                if failed is None:
                    continue
                hit = mask & failed
                if not hit.any():
                    continue
                rejected |= hit
                texts: dict[str, int] = {}
                for position in np.flatnonzero(hit).tolist():
                    text = shape.failures[shape.candidates[position]][name]
                    texts[text] = texts.get(text, 0) + 1
                found.extend((name, text, n) for text, n in texts.items())
        rest = int(np.count_nonzero(mask & ~rejected))
        if rest:
            found.append(("kube-scheduler", NOT_PRIORITIZED, rest))
        return found

    return rejections


def batch_key(columns: CycleColumns) -> tuple[Any, ...]:
    """Cycles with the same key (and the same scenario) are replayed together by :func:`replay_batch`."""
    return (id(columns.shape), columns.traffic_key(), tuple((p.name, p.applicable) for p in columns.plugins))


def replay_columns(columns: CycleColumns, scenario: Scenario) -> Outcome:
    """:func:`scheduler_core.history_replay.what_if.replay` of one cycle's columns (:func:`replay_batch` of one)."""
    return replay_batch([columns], scenario).outcome(0)


def outcome_of(result: ReplayResult) -> Outcome:
    """:class:`Outcome` of what :func:`scheduler_core.history_replay.what_if.replay` gave (the slow path, and the tests'
    reference)."""
    nodes = result.nodes
    passed = np.array([o.passed for o in nodes], dtype=bool)
    finals = np.array([np.nan if o.final is None else o.final for o in nodes], dtype=np.float64)
    given = np.array([-1 if o.extender is None else o.extender for o in nodes], dtype=np.int64)
    position = {o.node: i for i, o in reversed(list(enumerate(nodes)))}
    return Outcome(
        passed=passed.reshape(-1),
        finals=finals.reshape(-1),
        answers=given.reshape(-1),
        preferred=position.get(result.preferred, -1) if result.preferred else -1,
        tied=result.preference_tied,
        partial=sum(1 for o in nodes if o.passed and o.partial),
        reasons=lambda i: nodes[i].reasons,
    )


def batch_of(outcome: Outcome, candidates: Sequence[str], rates: Floats | None, scale: str = "fixed") -> BatchOutcome:
    """A :class:`BatchOutcome` of one row from an :class:`Outcome` (a cycle the slow path replayed)."""
    feasible = np.flatnonzero(outcome.passed)
    reasons = outcome.reasons

    def rejections(mask: Bools) -> list[tuple[str, str, int]]:
        counts: dict[tuple[str, str], int] = {}
        for position in np.flatnonzero(mask).tolist():
            for plugin, reason in reasons(position).items():
                counts[(plugin, reason)] = counts.get((plugin, reason), 0) + 1
        return [(plugin, reason, n) for (plugin, reason), n in counts.items()]

    return BatchOutcome(
        candidates=candidates,
        passed=outcome.passed,
        feasible=feasible,
        finals=outcome.finals[feasible][None, :],
        scale=scale,
        preferred=np.array([outcome.preferred], dtype=np.int64),
        tied=np.array([outcome.tied]),
        partial=np.array([outcome.partial], dtype=np.int64),
        reasons=reasons,
        rejections=rejections,
        rates=rates,
    )
