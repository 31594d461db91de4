"""The scoring engine: run a profile's filter and score plugins over the candidates and keep every term."""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import compress, filterfalse, repeat
from operator import attrgetter, is_, itemgetter, not_

import numpy as np
from numpy.typing import NDArray

from scheduler_core.extender.protocol.cluster import NodeInfo
from scheduler_core.extender.record.structs import FilterRecord, PluginScores, PrioritizeRecord
from scheduler_core.extender.scoring.answer import answers
from scheduler_core.extender.scoring.plugins import CycleContext, NodeScore, ScoreColumns, ScoreResult, Verdict
from scheduler_core.extender.scoring.plugins.base import SharedColumns, candidate_names, shared_column
from scheduler_core.extender.scoring.plugins.traffic import TrafficArgs, node_bytes, read_traffic
from scheduler_core.extender.scoring.profiles import Profile


def _float_at(bits: int) -> float:
    return float(struct.unpack("<d", struct.pack("<q", bits))[0])


def score_thresholds(rule: Callable[[float], int], top: int) -> tuple[float, ...]:
    """For each score 1..``top``, the smallest non-negative float that ``rule`` maps to that score or more.

    ``rule`` must be monotonic (as 0..100 → 0..10 rounding is: IEEE division and addition round monotonically);
    non-negative floats order like their bit patterns, so a bisection over the bit patterns finds each exact
    boundary, and ``bisect_right(thresholds, x) == rule(x)`` for every x in 0..100.
    """

    def threshold(score: int) -> float:
        low, high = 0, struct.unpack("<q", struct.pack("<d", 100.0))[0]  # maps below ``score`` / to it or more
        while high - low > 1:
            middle = (low + high) // 2
            if rule(_float_at(middle)) >= score:
                high = middle
            else:
                low = middle
        return _float_at(high)

    return tuple(threshold(score) for score in range(1, top + 1))


_name = attrgetter("name")
Floats = NDArray[np.float64]
_reason = attrgetter("reason")
_detail = attrgetter("detail")
_verdict_key = attrgetter("reason", "unresolvable")


def round4(values: Sequence[float] | Floats) -> Floats:
    """Each value to the record's 4 decimals, in one vectorized pass (``np.round``: ``rint(v · 10⁴) / 10⁴``).

    The result is the float nearest to k / 10⁴ for the integer k nearest to v · 10⁴, which is what
    ``round(v, 4)`` gives except on a value within float noise of a tie (…5 in the fifth decimal): there the
    two may pick different neighbours, both within 0.00005 of v. ``round(v, 4)`` converts each value to decimal
    text, which a 5000-node column would pay per call; this is one vectorized pass. NaN and ±inf stay as they are.
    """
    return np.asarray(values, dtype=np.float64).round(4)


@dataclass(frozen=True, slots=True)
class FilterDecision:
    passed: list[int]
    """Indices of the nodes that passed, in input order."""
    failed: dict[str, str] = field(default_factory=dict)
    unresolvable: dict[str, str] = field(default_factory=dict)
    outcome: object = None
    """What the decision was copied from: the same object for the same verdicts (memoize answers by it)."""


def _traffic_args(profile: Profile) -> TrafficArgs | None:
    candidates = [s.plugin for s in profile.scorers] + list(profile.filters)
    for plugin in candidates:
        args = getattr(plugin, "args", None)
        if isinstance(args, TrafficArgs):
            return args
    return None


@dataclass(frozen=True, slots=True)
class _FilterOutcome:
    """What the plugins' verdicts on a candidate list come to: the same verdict lists, the same outcome."""

    passed: list[int]
    passed_names: list[str]
    failures: dict[str, dict[str, str]]
    details: dict[str, dict[str, str]]
    unresolvable: list[str]
    failed_reasons: dict[str, str]
    unresolvable_reasons: dict[str, str]


def run_filter(profile: Profile, ctx: CycleContext, nodes: Sequence[NodeInfo]) -> tuple[FilterDecision, FilterRecord]:
    """Every filter plugin judges every node (no short-circuit), so the record holds each verdict.

    The outcome is a function of the plugins' verdict lists alone, which plugins keep per candidate list while
    their inputs are unchanged (a traffic snapshot, a NodeResources table): then it is worked out once and each
    call gets copies of it.
    """
    names = candidate_names(ctx, nodes)
    outcome = _judged_outcome(profile, ctx, nodes)
    decision = FilterDecision(
        list(outcome.passed), dict(outcome.failed_reasons), dict(outcome.unresolvable_reasons), outcome
    )
    # The outcome's own lists, shared by every call with the same verdicts and never mutated (the spool compresses
    # each once: ``spool_codec.encode_event``); a verb that changes the record's lists replaces them.
    record = FilterRecord(
        nodes=names,
        passed=outcome.passed_names,
        failures=outcome.failures,
        details=outcome.details,
        unresolvable=outcome.unresolvable,
    )
    _record_traffic(profile, ctx, record, nodes)
    return decision, record


def judges_nodes_alone(profile: Profile) -> bool:
    """Whether every filter of ``profile`` judges each node without regard to the other candidates."""
    return all(getattr(plugin, "judges_nodes_alone", False) for plugin in profile.filters)


def run_filter_window(
    profile: Profile, ctx: CycleContext, everyone: Sequence[NodeInfo], names: list[str], at: Sequence[int]
) -> tuple[FilterDecision, FilterRecord]:
    """:func:`run_filter` over the nodes at positions ``at`` of ``everyone`` (every node of the cluster), which are
    named ``names``: the same decision and record, taken from the outcome on every node.

    kube-scheduler sends each pod's filter a new window of its node list (at 1000 nodes, 420 of them from a rotating
    start), so an outcome kept per candidate list is never met again. When every filter judges each node alone
    (:func:`judges_nodes_alone`), a node's verdicts are the same in any window: the plugins judge ``everyone`` (kept
    in ``ctx.shared`` with that list until an input changes, as for any candidate list) and each window picks its
    nodes' share, failing nodes and reasons in its own order.
    """
    outcome = _judged_outcome(profile, ctx, everyone)
    failing = shared_column(ctx.shared, ("failing", id(outcome)), (outcome,), partial(_failing, outcome, everyone))
    window_failing = failing[np.asarray(at, dtype=np.intp)]
    if not window_failing.any():
        passed, passed_names = list(range(len(names))), list(names)
        failed_names: list[str] = []
    else:
        passed = np.flatnonzero(~window_failing).tolist()
        passed_names = list(map(names.__getitem__, passed))
        failed_names = list(map(names.__getitem__, np.flatnonzero(window_failing).tolist()))
    unresolvable = [name for name in failed_names if name in outcome.unresolvable_reasons]
    decision = FilterDecision(
        passed,
        {name: outcome.failed_reasons[name] for name in failed_names if name in outcome.failed_reasons},
        {name: outcome.unresolvable_reasons[name] for name in unresolvable},
    )
    record = FilterRecord(
        nodes=names,
        passed=passed_names,
        failures={name: outcome.failures[name] for name in failed_names},
        details={name: outcome.details[name] for name in failed_names if name in outcome.details},
        unresolvable=unresolvable,
    )
    _record_traffic(profile, ctx, record, everyone, at)
    return decision, record


def _failing(outcome: _FilterOutcome, everyone: Sequence[NodeInfo]) -> NDArray[np.bool_]:
    failing = np.ones(len(everyone), dtype=np.bool_)
    failing[outcome.passed] = False
    return failing


def _judged_outcome(profile: Profile, ctx: CycleContext, nodes: Sequence[NodeInfo]) -> _FilterOutcome:
    names = candidate_names(ctx, nodes)
    judged = [(plugin.name, plugin.filter(ctx, nodes)) for plugin in profile.filters]
    sources = (names, *(verdicts for _, verdicts in judged))
    # One outcome per combination of verdict lists (pods asking for different resources alternate): keyed by them.
    key = ("filter outcome", profile.name, *map(id, sources))
    return shared_column(ctx.shared, key, sources, partial(_outcome, names, judged))


def _outcome(names: list[str], judged: list[tuple[str, Sequence[Verdict]]]) -> _FilterOutcome:
    """Column-wise, in C (``map``/``compress``/``zip``): failing nodes share a handful of reason combinations
    ("no NodeResources object", one threshold), so each combination is worded once and the per-node work is
    lookups. At 5000 nodes with a fifth failing, a loop over the failing nodes was half the filter's time.
    """
    count = len(names)
    failing: set[int] = set()
    failed_by: list[tuple[str, Sequence[Verdict], list[int]]] = []  # the plugins that failed some node
    for plugin_name, verdicts in judged:
        failed_here = list(compress(range(count), map(_reason, verdicts)))
        if failed_here:
            failing.update(failed_here)
            failed_by.append((plugin_name, verdicts, failed_here))
    passed = list(filterfalse(failing.__contains__, range(count))) if failing else list(range(count))
    passed_names = list(map(names.__getitem__, passed))
    if not failing:
        return _FilterOutcome(passed, passed_names, {}, {}, [], {}, {})
    order = sorted(failing)
    failed_names = list(map(names.__getitem__, order))
    # Per failing node, one (reason, unresolvable) per judging plugin: the key of its combination.
    columns = [list(map(_verdict_key, map(verdicts.__getitem__, order))) for _, verdicts, _ in failed_by]
    keys = list(zip(*columns, strict=True))
    plugin_names = [name for name, _, _ in failed_by]
    combinations = {key: _combination(plugin_names, key) for key in set(keys)}
    picked = list(map(combinations.__getitem__, keys))
    failures = dict(zip(failed_names, map(itemgetter(0), picked), strict=True))
    flags = list(map(itemgetter(2), picked))
    reasons = list(map(itemgetter(1), picked))
    unresolvable = list(compress(failed_names, flags))
    resolvable = list(map(not_, flags))
    # Node-specific figures (a threshold's measured rate): few nodes, found per plugin among its own failures,
    # then kept in node order (a stable sort keeps the plugins' order within a node).
    found = []
    for plugin_name, verdicts, failed_here in failed_by:
        with_detail = list(compress(failed_here, map(_detail, map(verdicts.__getitem__, failed_here))))
        found += [(index, plugin_name, verdicts[index].detail) for index in with_detail]
    details: dict[str, dict[str, str]] = {}
    for index, plugin_name, detail in sorted(found, key=itemgetter(0)):
        details.setdefault(names[index], {})[plugin_name] = detail
    return _FilterOutcome(
        passed,
        passed_names,
        failures,
        details,
        unresolvable,
        dict(zip(compress(failed_names, resolvable), compress(reasons, resolvable), strict=True)),
        dict(zip(unresolvable, compress(reasons, flags), strict=True)),
    )


def _combination(plugin_names: list[str], key: tuple[tuple[str, bool], ...]) -> tuple[dict[str, str], str, bool]:
    """{plugin: reason}, the joined reason and whether it is unresolvable, for one combination of verdicts.

    Shared by every node with that combination, so never mutated afterwards.
    """
    reasons = {plugin: reason for plugin, (reason, _) in zip(plugin_names, key, strict=True) if reason}
    # One string per node; kube-scheduler counts identical strings together, so keep it name-free.
    joined = "; ".join(f"{plugin}: {reason}" for plugin, reason in reasons.items())
    return reasons, joined, any(unresolvable for reason, unresolvable in key if reason)


def _record_traffic(
    profile: Profile,
    ctx: CycleContext,
    record: FilterRecord,
    nodes: Sequence[NodeInfo],
    at: Sequence[int] | None = None,
) -> None:
    """The traffic figures of the candidates: ``nodes``', or those at positions ``at`` of ``nodes`` when given."""
    traffic_args = _traffic_args(profile)
    if traffic_args is not None:
        reading = read_traffic(ctx, traffic_args)
        record.metric_age_seconds = reading.age_seconds
        record.metric_note = reading.note
        if reading.snapshot is not None:
            column = node_bytes(ctx, reading.snapshot, nodes)
            record.traffic_bytes = column if at is None else list(map(column.__getitem__, at))


def _columns(scores: Sequence[NodeScore]) -> ScoreColumns:
    """A plugin's per-node ``NodeScore`` objects as columns (plugins that build objects still work)."""
    if isinstance(scores, ScoreColumns):
        return scores
    return ScoreColumns(
        [s.score for s in scores],
        [s.raw for s in scores],
        [s.detail for s in scores],
        [s.herd_bytes for s in scores] if any(s.herd_bytes for s in scores) else [],
    )


def _recorded_scores(
    shared: SharedColumns, scorer_name: str, values: Sequence[float] | Floats
) -> tuple[Floats, list[float]]:
    """A plugin's scores rounded to the record's 4 decimals, as an array and as the record's list: the same list
    object while the plugin answers with the same column (a candidate list's NodeResources scores), so the spool
    compresses it once (``spool_codec.encode_event``)."""

    def rounded() -> tuple[Floats, list[float]]:
        scores = round4(values)
        return scores, scores.tolist()

    return shared_column(shared, ("recorded scores", scorer_name), (values,), rounded)


def _plugin_record(
    scorer_name: str, weight: int, result: ScoreResult, names: list[str], scores: list[float], shared: SharedColumns
) -> PluginScores:
    """``scores``: the plugin's normalized scores, already rounded to the record's 4 decimals (never mutated)."""
    columns = _columns(result.scores)
    # A plugin's raw column is shared with later calls as it is (never mutated): see ``run_filter``.
    raws = columns.raws if type(columns.raws) is list else list(columns.raws) if columns.raws is not None else []
    # Counted once (comparing each float with None is the slow path), or not at all when the plugin knows.
    unmeasured_count = columns.unmeasured if columns.unmeasured is not None and raws else raws.count(None)
    herd_bytes = list(columns.herd_bytes) if any(columns.herd_bytes) else []
    herd_binds = list(columns.herd_binds) if herd_bytes and columns.herd_binds else []
    herd_newest = list(columns.herd_newest_age_ms) if herd_binds else []
    # A plugin that does not apply says why once (``note``); the explanation falls back to it for every node,
    # so the same sentence is not stored once per node (half the record of a 1000-node prioritize).
    same_as_note = result.note if not result.applicable else None
    notes: dict[str, str] = {}
    if columns.details is not None:
        # A function of columns a plugin may keep per candidate list (NodeResourceFitByCR's): made once with them.
        make = partial(_notes, columns.details, raws, unmeasured_count, same_as_note, names)
        sources = (columns.details, columns.raws, names, same_as_note)
        notes = shared_column(shared, ("notes", scorer_name), sources, make)
    return PluginScores(
        name=scorer_name,
        weight=weight,
        scores=scores,
        raw=raws if unmeasured_count != len(raws) else [],
        herd_bytes=herd_bytes,
        notes=notes,
        applicable=result.applicable,
        note=result.note,
        metric_age_seconds=result.metric_age_seconds,
        missing_score=result.missing_score,
        herd_binds=herd_binds,
        herd_newest_age_ms=herd_newest,
        requested=list(result.requested),
        inputs={name: list(column) for name, column in result.inputs.items()},
        pod_assumed=result.pod_assumed,
    )


def _notes(
    details: Sequence[str], raws: list[float | None], unmeasured_count: int, same_as_note: str | None, names: list[str]
) -> dict[str, str]:
    """Node → why it scored what it did, for the nodes without a raw figure (every node, for a plugin without raws)
    whose reason is not the plugin's own ``note``; shared with the records: never mutated."""
    if isinstance(details, list) and details.count(same_as_note) == len(details):
        return {}
    unmeasured: Sequence[int] = range(len(names))
    if raws:
        unmeasured = list(compress(range(len(raws)), map(is_, raws, repeat(None)))) if unmeasured_count else []
    return {names[i]: details[i] for i in unmeasured if details[i] and details[i] != same_as_note}


def run_prioritize(profile: Profile, ctx: CycleContext, nodes: Sequence[NodeInfo]) -> PrioritizeRecord:
    """Weighted mean of the applicable score plugins, then the extender's 0..10 scale."""
    names = candidate_names(ctx, nodes)
    plugin_records: list[PluginScores] = []
    # Vectorized: ``totals[i] += score · weight`` per plugin, then ``/ Σ weight``: the same IEEE operations in
    # the same order as the scalar formula, so the same floats. The mean is of the scores as recorded (4 decimals):
    # whoever recomputes it from the record (an auditor, ``dashboard.storage.columns``) gets the recorded final exactly.
    totals = np.zeros(len(nodes))
    total_weight = 0
    for scorer in profile.scorers:
        result = scorer.plugin.score(ctx, nodes)
        scores, recorded = _recorded_scores(ctx.shared, scorer.plugin.name, _columns(result.scores).values)
        record = _plugin_record(scorer.plugin.name, scorer.weight, result, names, recorded, ctx.shared)
        plugin_records.append(record)
        if not result.applicable:
            continue
        total_weight += scorer.weight
        totals += scores * scorer.weight
    # Answered from the final score as recorded (4 decimals), so that recomputing an answer from the record gives it.
    final = round4(totals / total_weight if total_weight else totals)
    return PrioritizeRecord(
        nodes=names,
        plugins=plugin_records,
        final=final.tolist(),
        extender=answers(final, profile.answer_scale),
        answer_scale=profile.answer_scale,
        extender_weight=profile.extender_weight or 0,
    )
