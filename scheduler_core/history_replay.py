"""Replay a stretch of recorded history under a candidate profile, and report what would have changed.

Each recorded cycle is replayed twice from its recorded inputs (:mod:`scheduler_core.replay`: the recorded
candidates, filter verdicts, traffic figures and scores, never the cluster): under the scenario it was recorded with
("before") and under the candidate ("after"), so before and after compare like for like. The figures of both are
folded into one :class:`HistoryReplayReport` by a :class:`ReportBuilder`.

The report is plain data (msgspec Structs, JSON as they are): every figure a person reads comes with ``basis``
text naming what it follows from, and the counts it is made of are in the report too, so it can be recomputed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import msgspec
import numpy as np
from numpy.typing import NDArray

from scheduler_core.answer import DEFAULT_ANSWER_SCALE
from scheduler_core.plugins import SCORE_PLUGINS
from scheduler_core.plugins.base import NEUTRAL_SCORE
from scheduler_core.record import NODE_CACHE
from scheduler_core.replay import (
    DEFAULT_WINDOW_SECONDS,
    NOT_PRIORITIZED,
    TRAFFIC_FILTER,
    TRAFFIC_SCORE,
    RecordedInputs,
    ReplayResult,
    Scenario,
    replay,
    scenario_from_profile,
)
from scheduler_core.units import human_rate
from scheduler_core.wire import MAX_EXTENDER_PRIORITY as MAX_ANSWER

Floats = NDArray[np.float64]
Bools = NDArray[np.bool_]
Ints = NDArray[np.int64]

CAVEATS: tuple[str, ...] = (
    "Recorded inputs are reused: each cycle is replayed over the candidates kube-scheduler sent then, the traffic "
    "figures measured then and the other plugins' recorded verdicts and scores. Nothing is asked of the cluster or "
    "Prometheus, so a node that did not exist then, or traffic the candidate profile would have queried differently "
    "(another device or window), is not seen.",
    "The herd estimate is kept as recorded: NetworkTraffic adds the bytes assumed for the binds that were recent at "
    "that moment, whatever the candidate profile says. Which binds were recent is a fact of that moment; had the "
    "candidate placed pods differently, the later cycles' herd estimates (and the traffic those pods caused) would "
    "have differed too, and the replay does not model that feedback: every cycle is replayed independently.",
    "A filter plugin the recorded profile did not run has no recorded verdicts: under the candidate it passes every "
    "node. A score plugin that did not score a cycle has no recorded scores: its term is left out of the final "
    "scores (the nodes are counted as scored partially).",
    "Nodes our filters passed but kube-scheduler (or another extender) did not send to prioritize stay out: that "
    "exclusion was someone else's decision. kube-scheduler's own scores are not recorded, so the node it would "
    "have bound is not known: 'placements' are our preferred node (our highest final score).",
)
"""What a replay cannot know, stated in every report."""


class Basis(msgspec.Struct, frozen=True, gc=False):
    """A figure with what it follows from."""

    value: float | int | None
    basis: str


class Count(msgspec.Struct, gc=False):
    """``k`` of ``n``: how many of the counted cycles (or nodes) had the property."""

    k: int = 0
    n: int = 0
    basis: str = ""


class SkipReason(msgspec.Struct, gc=False):
    reason: str
    cycles: int


class NodePlacements(msgspec.Struct, gc=False):
    """One node's placements (our preferred node) before and after, and the traffic it had when it was chosen."""

    node: str
    before: int = 0
    after: int = 0
    before_rate_sum: float = 0.0
    """Σ of the node's recorded traffic (raw bytes / the recorded window, bytes per second) over the cycles it was
    preferred in before, those that had a figure for it."""
    before_with_rate: int = 0
    """How many of those cycles had a figure for it."""
    after_rate_sum: float = 0.0
    after_with_rate: int = 0


class Spread(msgspec.Struct, gc=False):
    """The spread across nodes of each node's mean traffic at placement (bytes per second over the window)."""

    nodes: int = 0
    """Nodes with at least one placement that had a traffic figure."""
    mean: float | None = None
    stdev: float | None = None
    """Population standard deviation of the nodes' means."""
    max: float | None = None
    max_node: str = ""
    min: float | None = None
    min_node: str = ""
    max_over_min: float | None = None
    """None when the smallest mean is 0."""
    basis: str = ""


class TrafficBalance(msgspec.Struct, gc=False):
    before: Spread = msgspec.field(default_factory=Spread)
    after: Spread = msgspec.field(default_factory=Spread)
    quietest_chosen_before: Count = msgspec.field(default_factory=Count)
    """Cycles whose preferred node had the lowest recorded traffic among the feasible nodes (before)."""
    quietest_chosen_after: Count = msgspec.field(default_factory=Count)


class Rejection(msgspec.Struct, gc=False):
    """Nodes a filter plugin rejects after but that passed before, by plugin and reason."""

    plugin: str
    reason: str
    nodes: int
    """Node-cycles (a node counted once per cycle)."""
    cycles: int


class ChangedDecision(msgspec.Struct, gc=False):
    """One cycle whose preferred node differs, with both nodes' final scores before and after (None: not
    feasible then)."""

    cycle_id: int
    started_at: str
    pod_namespace: str
    pod_name: str
    profile: str
    before_node: str
    after_node: str
    before_node_final_before: float | None
    before_node_final_after: float | None
    after_node_final_before: float | None
    after_node_final_after: float | None
    why: str = ""


class CandidateDescription(msgspec.Struct, gc=False):
    """The candidate scenario, as replayed, and the what-if form parameters that fill it in on a decision page."""

    label: str
    source: str
    """``profile`` (a configured profile by name) or ``yaml`` (profile YAML given with the replay)."""
    filters: list[str]
    weights: dict[str, int]
    max_bytes_per_second: float
    fail_on_missing: bool
    answer_scale: str
    what_if_params: dict[str, str]
    """GET parameters of the decision page's what-if (``mode=custom``) with these settings."""


class HistoryReplayReport(msgspec.Struct, gc=False):
    """What a candidate profile would have changed over a stretch of recorded history."""

    candidate: CandidateDescription | None = None
    cycles_selected: int = 0
    cycles_replayed: int = 0
    cycles_skipped: int = 0
    skipped: list[SkipReason] = msgspec.field(default_factory=list)
    decisions_changed: Count = msgspec.field(default_factory=Count)
    """Replayed cycles whose preferred node differs (``n``: cycles with a preferred node before or after)."""
    became_unschedulable: int = 0
    """Cycles with a feasible node before and none after."""
    became_schedulable: int = 0
    feasible_to_infeasible: int = 0
    """Node-cycles feasible (reaching prioritize) before and not after."""
    infeasible_to_feasible: int = 0
    ties_created: int = 0
    """Cycles whose preferred node answered the same 0..10 as a node that scored less after, not before."""
    ties_removed: int = 0
    ties_before: int = 0
    ties_after: int = 0
    partially_scored: int = 0
    """Node-cycles scored after without a recorded score of an active plugin (its term left out)."""
    recorded_preferred_differs: int = 0
    """Cycles whose replay under the recorded scenario prefers another node than the record names (profiles changed
    since, or a record the replay cannot reproduce): the "before" figures are the replay's."""
    placements: list[NodePlacements] = msgspec.field(default_factory=list)
    balance: TrafficBalance = msgspec.field(default_factory=TrafficBalance)
    new_rejections: list[Rejection] = msgspec.field(default_factory=list)
    sample: list[ChangedDecision] = msgspec.field(default_factory=list)
    sample_limit: int = 50
    figures: dict[str, str] = msgspec.field(default_factory=dict)
    """Figure name → what it follows from (text)."""
    caveats: list[str] = msgspec.field(default_factory=lambda: list(CAVEATS))
    seconds: float = 0.0
    """Wall time of the replay (decode and replay)."""


# --- the recorded inputs, columnar --------------------------------------------------------------------------------


class CycleShape:
    """What many cycles share: the candidates, the filter's failures, passed nodes and traffic figures (one
    snapshot's, for one kind of pod), and which candidates were sent to prioritize. Arrays are never written to once
    made; what a scenario makes of a shape (:class:`Stage`) is kept on it."""

    __slots__ = (
        "_sent_of",
        "_stages",
        "candidates",
        "failed_by",
        "failures",
        "filter_traffic",
        "has_filter",
        "positions",
        "prioritized",
        "recorded_passed",
    )

    def __init__(
        self,
        candidates: Sequence[str],
        *,
        has_filter: bool,
        failures: Mapping[str, Mapping[str, str]],
        failed_by: Mapping[str, Bools],
        recorded_passed: Bools,
        filter_traffic: Floats | None,
        positions: Ints | None,
    ) -> None:
        self.candidates = candidates
        self.has_filter = has_filter
        self.failures = failures
        """The filter's recorded failures: node → {plugin: reason}."""
        self.failed_by = failed_by
        """Recorded filter plugin → the candidates it failed (plugins in the order they first appear)."""
        self.recorded_passed = recorded_passed
        """The filter's ``passed`` (every candidate without a filter record)."""
        self.filter_traffic = filter_traffic
        """The filter's traffic figures (NaN: none for the node); None when it recorded none."""
        self.positions = positions
        """The candidate position of each node sent to prioritize, in the order sent; None without prioritize."""
        self.prioritized: Bools | None = None
        self._sent_of: Ints | None = None
        if positions is not None:
            self.prioritized = np.zeros(len(candidates), dtype=bool)
            self.prioritized[positions] = True
        self._stages: dict[tuple[Any, ...], tuple[Scenario, Stage]] = {}

    @property
    def sent_of(self) -> Ints:
        """Each candidate's place in the prioritize lists; ``len(positions)`` for a candidate not sent."""
        if self._sent_of is None:
            sent = len(self.positions) if self.positions is not None else 0
            found = np.full(len(self.candidates), sent, dtype=np.intp)
            if self.positions is not None:
                found[self.positions] = np.arange(sent, dtype=np.intp)
            self._sent_of = found
        return self._sent_of

    @property
    def filters_seen(self) -> list[str]:
        return list(self.failed_by)


@dataclass(slots=True)
class PluginColumns:
    """One score plugin of a cycle's prioritize record, aligned with the nodes sent to prioritize."""

    name: str
    weight: int
    applicable: bool
    scores: Floats | None
    """Normalized 0..100, one per node sent, never NaN; None for ``NetworkTraffic`` when not read (its scores are
    computed again from the raw figures)."""


@dataclass(slots=True)
class CycleColumns:
    """What one cycle recorded, as a history replay reads it: its :class:`CycleShape` and its own figures, in arrays
    (no object per node).

    Built by :func:`columns_from_inputs` from the records, or straight from the stored bodies
    (``dashboard.storage.replay_inputs``); replayed by :func:`replay_batch`, which gives what
    :func:`scheduler_core.replay.replay` gives for the same records (``tests/replays/test_fast_replay.py``).
    """

    shape: CycleShape
    plugins: list[PluginColumns]
    traffic_raw: Floats | None = None
    """``NetworkTraffic``'s raw figures, one per node sent (NaN: none); None when it recorded none, or when
    ``raw_is_filter``."""
    raw_is_filter: bool = False
    """``NetworkTraffic`` recorded raw figures, and they are the filter's for the same nodes."""
    herd: Floats | None = None
    """``NetworkTraffic``'s herd bytes, one per node sent; None: none."""
    answer_scale: str = DEFAULT_ANSWER_SCALE
    """The scale the cycle answered on (:attr:`RecordedInputs.answer_scale`)."""

    @property
    def candidates(self) -> Sequence[str]:
        return self.shape.candidates

    @property
    def has_traffic_plugin(self) -> bool:
        return any(p.name == TRAFFIC_SCORE for p in self.plugins)

    def traffic_key(self) -> tuple[Any, ...]:
        """Cycles of one shape with the same key read the same traffic figures (:func:`_traffic_arrays`)."""
        if self.raw_is_filter:
            return ("filter",)
        if self.traffic_raw is None:
            return ("none", self.has_traffic_plugin)
        return ("own", id(self))


def _traffic_arrays(columns: CycleColumns) -> tuple[Floats, Floats, bool, bool]:
    """``(filter raws, score raws, usable, neutral)`` per candidate, as :func:`scheduler_core.replay.replay` reads
    them: the threshold judges the filter's figure, else prioritize's; ``NetworkTraffic`` scores prioritize's, else
    the filter's; neutral when no snapshot was usable or ``NetworkTraffic`` recorded no raw figures."""
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


SMALLEST_BYTES = 1e-300
"""Traffic figures (bytes) the vectorized replay takes: 0 or at least this, finite. Anything else (never a byte
count) could overflow ``100 / max`` into a NaN score, which :func:`scheduler_core.replay.replay` orders by the
position it meets it at: such a cycle is replayed by that function itself."""


def byte_counts(values: Floats | None) -> bool:
    """``values`` (NaN: none) are byte counts the vectorized replay takes (:data:`SMALLEST_BYTES`)."""
    if values is None:
        return True
    return not (np.count_nonzero((values < SMALLEST_BYTES) & (values != 0)) or np.isinf(values).any())


def _floats_or_none(values: Sequence[float | None]) -> Floats | None:
    """``values`` as float64 (None → NaN); None when one is not a finite number or None."""
    try:
        array = np.array([np.nan if v is None else v for v in values], dtype=np.float64)
    except (TypeError, ValueError):
        return None
    if np.isinf(array).any() or any(v is not None and v != v for v in values):
        return None
    return array


def columns_from_inputs(inputs: RecordedInputs) -> CycleColumns | None:
    """The columns of ``inputs``; None when the cycle holds what only :func:`scheduler_core.replay.replay` handles
    (duplicate node names, nodes unknown to the node cache, prioritized nodes that were not candidates, lists not
    aligned with their nodes, figures that are not finite numbers)."""
    candidates = inputs.candidates
    count = len(candidates)
    index = {name: i for i, name in enumerate(candidates)}
    if len(index) != count:
        return None
    fr, pr = inputs.filter, inputs.prioritize
    failures: Mapping[str, Mapping[str, str]] = {}
    failed_by: dict[str, Bools] = {}
    filter_traffic: Floats | None = None
    recorded_passed = np.ones(count, dtype=bool)
    if fr is not None:
        failures = fr.failures
        for node, reasons in failures.items():
            if NODE_CACHE in reasons:
                return None
            position = index.get(node)
            for failing in reasons:
                mask = failed_by.get(failing)
                if mask is None:
                    mask = failed_by[failing] = np.zeros(count, dtype=bool)
                if position is not None:
                    mask[position] = True
        recorded_passed = np.zeros(count, dtype=bool)
        for node in fr.passed:
            if node in index:
                recorded_passed[index[node]] = True
        if fr.traffic_bytes:
            if len(fr.traffic_bytes) != count:
                return None
            filter_traffic = _floats_or_none(fr.traffic_bytes)
            if filter_traffic is None or not byte_counts(filter_traffic):
                return None
    positions: Ints | None = None
    plugins: list[PluginColumns] = []
    traffic_raw: Floats | None = None
    herd: Floats | None = None
    if pr is not None:
        found = [index.get(node, -1) for node in pr.nodes]
        if -1 in found or len(set(found)) != len(found):
            return None
        positions = np.asarray(found, dtype=np.intp)
        traffic_plugins = 0
        for plugin in pr.plugins:
            if plugin.name == NODE_CACHE or len(plugin.scores) != len(found):
                return None
            scores = _floats_or_none(plugin.scores)
            if scores is None or np.isnan(scores).any():
                return None
            plugins.append(PluginColumns(plugin.name, plugin.weight, plugin.applicable, scores))
            if plugin.name == TRAFFIC_SCORE:
                traffic_plugins += 1
                if plugin.raw:
                    if len(plugin.raw) != len(found):
                        return None
                    traffic_raw = _floats_or_none(plugin.raw)
                    if traffic_raw is None or not byte_counts(traffic_raw):
                        return None
                if plugin.herd_bytes:
                    if len(plugin.herd_bytes) != len(found):
                        return None
                    herd = _floats_or_none(plugin.herd_bytes)
                    if herd is None or np.isnan(herd).any() or not byte_counts(herd):
                        return None
        if traffic_plugins > 1:
            return None
    shape = CycleShape(
        candidates,
        has_filter=fr is not None,
        failures=failures,
        failed_by=failed_by,
        recorded_passed=recorded_passed,
        filter_traffic=filter_traffic,
        positions=positions,
    )
    raw_is_filter = (
        traffic_raw is not None
        and filter_traffic is not None
        and positions is not None
        and np.array_equal(traffic_raw, filter_traffic[positions], equal_nan=True)
    )
    return CycleColumns(
        shape,
        plugins,
        traffic_raw=None if raw_is_filter else traffic_raw,
        raw_is_filter=raw_is_filter,
        herd=herd,
        answer_scale=inputs.answer_scale,
    )


# --- the replay, vectorized ---------------------------------------------------------------------------------------


@dataclass(slots=True)
class Stage:
    """What a scenario makes of a shape and its traffic figures, the same for every cycle that shares them: who
    passes, and the figures the scores start from."""

    passed: Bools
    """Reached prioritize in the replay (passed every filter and was sent to prioritize)."""
    feasible: Ints
    """Candidate positions of the nodes that passed, in candidate order."""
    sent: Ints
    """Their places in the prioritize lists (``len(positions)``: not sent, no recorded scores)."""
    all_sent: bool
    """Every node that passed was sent to prioritize (has recorded scores)."""
    sent_identity: bool
    """``sent`` is every place in order: the prioritize lists need no gathering."""
    all_known: bool
    """Every node that passed has a traffic figure."""
    score_raws: Floats
    """Per candidate, the raw bytes ``NetworkTraffic`` scores (NaN: none)."""
    usable: bool
    neutral: bool
    traffic_missing: Bools | None
    traffic_above: Bools | None
    reason_above: str


def _stage(columns: CycleColumns, scenario: Scenario) -> Stage:
    shape = columns.shape
    key = (columns.traffic_key(), id(scenario))
    cached = shape._stages.get(key)
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
        if name == TRAFFIC_FILTER:
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
        shape._stages[key] = (scenario, stage)
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
"""``scheduler_core.answer``'s: absorbs float noise at .5."""


def _answers(finals: Floats, scale: str) -> Ints:
    """:func:`scheduler_core.answer.answers` (no forced positions) of each row, the same IEEE operations."""
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
    """:func:`scheduler_core.answer.answers` under ``fixed``, elementwise (the same IEEE operations)."""
    return np.clip(np.floor(values / 10 + 0.5 + _EPSILON), 0, MAX_ANSWER)


def _stacked(cycles: Sequence[CycleColumns], place: int, stage: Stage, sent_count: int) -> tuple[Floats, bool]:
    """(rows, feasible): each cycle's recorded scores of plugin ``place`` at the feasible nodes (NaN: not sent),
    and whether every one is known (recorded scores are never NaN: :class:`PluginColumns`)."""
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
    """:func:`scheduler_core.replay.replay` of cycles that share their shape, traffic figures and plugins (as
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
        if name == TRAFFIC_SCORE:
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
            if name == TRAFFIC_FILTER:
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
            if name == TRAFFIC_FILTER:
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
    """:func:`scheduler_core.replay.replay` of one cycle's columns (:func:`replay_batch` of one)."""
    return replay_batch([columns], scenario).outcome(0)


def outcome_of(result: ReplayResult) -> Outcome:
    """:class:`Outcome` of what :func:`scheduler_core.replay.replay` gave (the slow path, and the tests' reference)."""
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


# --- scenarios ----------------------------------------------------------------------------------------------------


def window_seconds_of(description: Mapping[str, Any] | None) -> int:
    """The traffic window a profile's recorded raw bytes cover (``NetworkTraffic``'s, else ``TrafficThreshold``'s
    ``timeRangeInMinutes``), as the decision page reads it."""
    if not description:
        return DEFAULT_WINDOW_SECONDS
    config: Mapping[str, Mapping[str, Any]] = description.get("pluginConfig", {})
    args = config.get(TRAFFIC_SCORE) or config.get(TRAFFIC_FILTER) or {}
    return int(args.get("timeRangeInMinutes", DEFAULT_WINDOW_SECONDS // 60)) * 60


def recorded_scenario(
    description: Mapping[str, Any] | None,
    weights: Sequence[tuple[str, int]] | None,
    filters_seen: Sequence[str],
    *,
    answer_scale: str | None = None,
) -> Scenario:
    """The scenario a cycle was recorded under, as the decision page's what-if builds it
    (``dashboard.ui.whatif.recorded_scenario`` with the page's window): the profile as configured now, else what
    the record says about filters; the weights the cycle's prioritize record used (``weights``: its plugins'
    (name, weight), None without one); the scale it answered on."""
    if description:
        scenario = scenario_from_profile(description, label=f"{description.get('name', '')} (as recorded)")
    else:
        scenario = Scenario(filters=tuple(filters_seen), weights={}, label="as recorded")
    if weights is not None:
        scenario = replace(scenario, weights=dict(weights))
    if answer_scale:
        scenario = replace(scenario, answer_scale=answer_scale)
    return replace(scenario, window_seconds=window_seconds_of(description))


MB = 1_000_000


def candidate_description(description: Mapping[str, Any], *, source: str) -> CandidateDescription:
    """What a report says about its candidate (``Profile.describe()`` of it), with the decision page's what-if
    parameters that fill the same settings in (``mode=custom``)."""
    scenario = scenario_from_profile(description)
    params: dict[str, str] = {"mode": "custom", "scale": scenario.answer_scale}
    for name in sorted(SCORE_PLUGINS):
        params[f"w_{name}"] = str(int(scenario.weights.get(name, 0)))
    for name in scenario.filters:
        params[f"f_{name}"] = "on"
    params["threshold_mbps"] = f"{scenario.max_bytes_per_second / MB:g}"
    if scenario.fail_on_missing:
        params["fail_on_missing"] = "on"
    return CandidateDescription(
        label=scenario.label,
        source=source,
        filters=list(scenario.filters),
        weights=dict(scenario.weights),
        max_bytes_per_second=scenario.max_bytes_per_second,
        fail_on_missing=scenario.fail_on_missing,
        answer_scale=scenario.answer_scale,
        what_if_params=params,
    )


# --- the report ---------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class RecordedCycle:
    """One recorded cycle as a replay reads it: the summary fields the report names, and its inputs as columns
    (the fast path), else as records (:func:`scheduler_core.replay.replay`), else why it cannot be replayed."""

    cycle_id: int
    started_at: str
    pod_namespace: str
    pod_name: str
    profile: str
    preferred_node: str
    """As recorded."""
    columns: CycleColumns | None = None
    inputs: RecordedInputs | None = None
    weights: Sequence[tuple[str, int]] | None = None
    """The prioritize record's plugins (name, weight); None without one."""
    skipped: str = ""
    """Why it cannot be replayed (then neither columns nor inputs)."""


def recorded_cycle_from_records(
    cycle_id: int,
    filter_record: Mapping[str, Any] | None,
    prioritize_record: Mapping[str, Any] | None,
    *,
    started_at: str = "",
    pod_namespace: str = "",
    pod_name: str = "",
    profile: str = "",
    preferred_node: str = "",
) -> RecordedCycle:
    """A :class:`RecordedCycle` from the records as stored (``VerbCall.record``): columns when the fast path reads
    them, else the records for :func:`scheduler_core.replay.replay`."""
    cycle = RecordedCycle(cycle_id, started_at, pod_namespace, pod_name, profile, preferred_node)
    fr = filter_record if filter_record and "nodes" in filter_record else None
    pr = prioritize_record if prioritize_record and "nodes" in prioritize_record else None
    if (filter_record or {}).get("$unreadable") or (prioritize_record or {}).get("$unreadable"):
        cycle.skipped = "a stored call body cannot be read"
        return cycle
    if fr is None and pr is None:
        cycle.skipped = "no filter or prioritize record (the cycle never reached our plugins)"
        return cycle
    try:
        inputs = RecordedInputs.from_records(fr, pr)
    except (msgspec.ValidationError, TypeError, ValueError) as exc:
        cycle.skipped = f"a record does not read as the engine's: {str(exc)[:120]}"
        return cycle
    return with_inputs(cycle, inputs)


def with_inputs(cycle: RecordedCycle, inputs: RecordedInputs) -> RecordedCycle:
    if not inputs.candidates:
        cycle.skipped = "no candidate nodes recorded"
        return cycle
    cycle.weights = [(p.name, p.weight) for p in inputs.prioritize.plugins] if inputs.prioritize is not None else None
    cycle.columns = columns_from_inputs(inputs)
    if cycle.columns is None:
        cycle.inputs = inputs
    return cycle


_FIGURES: dict[str, str] = {
    "cycles_replayed": "cycles with a readable filter or prioritize record among those selected; each replayed "
    "under its recorded scenario (before) and under the candidate (after)",
    "decisions_changed": "k: cycles whose preferred node (highest final score, first in candidate order on a tie) "
    "differs between before and after; n: replayed cycles with a preferred node before or after",
    "feasible_to_infeasible": "Σ over cycles of the nodes that reached prioritize before and not after",
    "infeasible_to_feasible": "Σ over cycles of the nodes that reached prioritize after and not before",
    "became_unschedulable": "cycles with at least one feasible node before and none after",
    "ties_created": "cycles whose preferred node answers the same 0..10 as a node that scored strictly less after "
    "but not before (ties_removed: the reverse)",
    "placements": "per node, the cycles that preferred it before and after; rate sums: the node's recorded traffic "
    "(raw bytes / recorded window) summed over those cycles that had a figure",
    "balance.spread": "per node with placements, its mean rate at placement = rate sum / placements with a rate; "
    "mean, population stdev, max and min of those means across nodes; max_over_min = max / min",
    "balance.quietest_chosen": "k: cycles whose preferred node had the lowest recorded traffic figure among the "
    "nodes that reached prioritize (in that replay); n: cycles with a preferred node and at least one figure",
    "new_rejections": "nodes that reached prioritize before and were rejected after, by the rejecting filter plugin "
    "and its reason (a node rejected by two plugins counts under both); cycles: cycles with at least one",
    "recorded_preferred_differs": "cycles whose recorded preferred node differs from the replay under the recorded "
    "scenario's (the profile's filters or threshold changed since it was recorded)",
    "partially_scored": "node-cycles that reached prioritize after without a recorded score of an active plugin",
}


class ReportBuilder:
    """Replays cycles under their recorded scenario and the candidate, and folds the figures into the report.

    :meth:`add` takes cycles one by one (oldest first); they are replayed in batches of cycles that share their
    shape (:func:`batch_key`), at the latest by :meth:`report`."""

    BATCH = 512
    """Cycles held before they are replayed."""

    def __init__(
        self,
        profile_descriptions: Mapping[str, Mapping[str, Any]],
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
        key = (cycle.profile, weights, tuple(filters_seen), scale if has_prioritize else None)
        before = self._before_scenarios.get(key)
        if before is None:
            description = self.profiles.get(cycle.profile)
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
        self.changed.basis = _FIGURES["decisions_changed"]
        for count in self.quietest:
            count.basis = _FIGURES["balance.quietest_chosen"]
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
            figures=dict(_FIGURES),
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
            if plugin.name == TRAFFIC_SCORE and plugin.raw:
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
    basis = _FIGURES["balance.spread"]
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


# --- the report as text -------------------------------------------------------------------------------------------


def _rate_text(value: float | None) -> str:
    return "—" if value is None else human_rate(value)


def _count_text(count: Count) -> str:
    share = f" ({100 * count.k / count.n:.1f} %)" if count.n else ""
    return f"{count.k:,} of {count.n:,}{share}"


def report_lines(report: HistoryReplayReport, *, placements_shown: int = 20, sample_shown: int = 10) -> list[str]:
    """The report as text (``manage.py replay_history``): each figure, then what it follows from."""
    lines: list[str] = []
    candidate = report.candidate
    if candidate is not None:
        weights = ", ".join(f"{name} {weight}" for name, weight in candidate.weights.items()) or "none"
        lines += [
            f"Candidate: {candidate.label} ({'configured profile' if candidate.source == 'profile' else 'YAML'})",
            f"  filters: {', '.join(candidate.filters) or 'none'}; weights: {weights}; "
            f"TrafficThreshold {human_rate(candidate.max_bytes_per_second)}"
            f"{', fails nodes without metrics' if candidate.fail_on_missing else ''}; "
            f"answers: {candidate.answer_scale}",
        ]
    lines += [
        f"Cycles: {report.cycles_selected:,} selected, {report.cycles_replayed:,} replayed, "
        f"{report.cycles_skipped:,} skipped ({report.seconds:.1f} s)",
        *(f"  skipped {s.cycles:,}: {s.reason}" for s in report.skipped),
        "",
        f"Decisions changed (preferred node differs): {_count_text(report.decisions_changed)}",
        f"Became unschedulable (no node reaches prioritize): {report.became_unschedulable:,}; "
        f"became schedulable: {report.became_schedulable:,}",
        f"Nodes feasible → infeasible: {report.feasible_to_infeasible:,}; "
        f"infeasible → feasible: {report.infeasible_to_feasible:,} (node-cycles)",
        f"Ties on the 0..10 answer: {report.ties_before:,} before, {report.ties_after:,} after "
        f"({report.ties_created:,} created, {report.ties_removed:,} removed)",
    ]
    if report.partially_scored:
        lines.append(f"Nodes scored without a recorded score of an active plugin: {report.partially_scored:,}")
    if report.recorded_preferred_differs:
        lines.append(
            f"Cycles whose replay under the recorded profile prefers another node than recorded: "
            f"{report.recorded_preferred_differs:,} (the profile changed since; 'before' is the replay's)"
        )
    balance = report.balance
    lines += ["", "Traffic balance (each node's mean traffic when preferred, across nodes):"]
    for label, found in (("before", balance.before), ("after", balance.after)):
        ratio = f"{found.max_over_min:.2f}" if found.max_over_min is not None else "—"
        lines.append(
            f"  {label:6s} {found.nodes:,} nodes: mean {_rate_text(found.mean)}, stdev {_rate_text(found.stdev)}, "
            f"max {_rate_text(found.max)} ({found.max_node or '—'}), min {_rate_text(found.min)} "
            f"({found.min_node or '—'}), max/min {ratio}"
        )
    lines += [
        f"  quietest feasible node preferred: before {_count_text(balance.quietest_chosen_before)}, "
        f"after {_count_text(balance.quietest_chosen_after)}",
        "",
        "Placements per node (preferred before → after):",
    ]
    for entry in report.placements[:placements_shown]:
        lines.append(f"  {entry.node:40s} {entry.before:8,} → {entry.after:8,}")
    if len(report.placements) > placements_shown:
        lines.append(f"  … {len(report.placements) - placements_shown} more nodes")
    if report.new_rejections:
        lines += ["", "New filter rejections (nodes feasible before, rejected after):"]
        for rejection in report.new_rejections:
            lines.append(
                f"  {rejection.plugin}: {rejection.reason}: {rejection.nodes:,} nodes in {rejection.cycles:,} cycles"
            )
    if report.sample:
        lines += ["", f"Changed decisions (first {min(sample_shown, len(report.sample))} of the sample):"]
        for change in report.sample[:sample_shown]:
            lines.append(
                f"  cycle {change.cycle_id} {change.pod_namespace}/{change.pod_name}: "
                f"{change.before_node or '(none)'} → {change.after_node or '(none)'}: {change.why}"
            )
    lines += ["", "What a replay cannot know:", *(f"- {caveat}" for caveat in report.caveats)]
    return lines
