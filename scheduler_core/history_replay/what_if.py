"""Replay a recorded decision under another profile, weights or threshold: the "what-if" of the dashboard.

Only recorded inputs are used, never the cluster: the raw bytes each candidate received (the filter record's
``traffic_bytes``, or the ``NetworkTraffic`` plugin's ``raw``), the other score plugins' normalized scores,
and the other filter plugins' verdicts. The arithmetic is the engine's (:mod:`scheduler_core.extender.scoring.engine`):
``TrafficThreshold`` fails a node above ``maxBytesPerSecond`` over the window, ``NetworkTraffic`` is
``100 − (raw + herd)·100/max`` over the nodes that reach prioritize (so changing the threshold changes the others'
scores too), the final score is the weighted mean of the applicable plugins, answered on the 0..10 scale the
scenario names (``fixed`` or ``spread``: :mod:`scheduler_core.extender.scoring.answer`). Scores and finals are rounded
to the record's 4 decimals as the engine rounds them, so a replay under the recorded profile gives the recorded finals
and answers exactly.

The herd bytes ``NetworkTraffic`` assumed for recent binds (``herd_bytes``) are kept as recorded: which binds
were recent is a fact of the moment, not of the profile. ``TrafficThreshold`` judges the raw bytes alone, as
the engine's does.

What cannot be replayed is said, not guessed: a plugin the cycle never ran has no recorded verdicts or
scores, so its terms are left out and the affected nodes are marked ``partial``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scheduler_core.extender.record.structs import NODE_CACHE, FilterRecord, PrioritizeRecord
from scheduler_core.extender.scoring.answer import (
    DEFAULT_ANSWER_SCALE,
    answer_rule,
    answers,
    preference_tied,
    spread_bounds,
)
from scheduler_core.extender.scoring.engine import round4
from scheduler_core.extender.scoring.plugins.base import NEUTRAL_SCORE
from scheduler_core.extender.scoring.plugins.traffic import (
    DEFAULT_MAX_BYTES_PER_SECOND,
    NetworkTraffic,
    TrafficThreshold,
    traffic_scores,
)
from scheduler_core.extender.scoring.traffic_terms import window_seconds
from scheduler_core.extender.scoring.units import human_rate
from scheduler_core.traffic import DEFAULT_WINDOW_MINUTES

DEFAULT_WINDOW_SECONDS = DEFAULT_WINDOW_MINUTES * 60
NOT_PRIORITIZED = "not sent to prioritize (excluded by kube-scheduler or another extender)"


@dataclass(frozen=True, slots=True)
class Scenario:
    """The configuration a decision is replayed under: which plugins, with what weights and threshold."""

    filters: tuple[str, ...]
    """Filter plugins that judge the candidates."""
    weights: Mapping[str, int]
    """Score plugin → weight; a plugin absent or at 0 carries no weight."""
    max_bytes_per_second: float = DEFAULT_MAX_BYTES_PER_SECOND
    """``TrafficThreshold``'s limit (only used when it is among ``filters``)."""
    fail_on_missing: bool = False
    window_seconds: int = DEFAULT_WINDOW_SECONDS
    """The traffic window the recorded raw bytes cover; the rate is ``raw / window``."""
    label: str = ""
    answer_scale: str = DEFAULT_ANSWER_SCALE
    """How final scores become 0..10 answers: ``fixed`` or ``spread``
    (:func:`scheduler_core.extender.scoring.answer.answers`). A scenario of a recorded cycle takes the cycle's scale
    (:attr:`RecordedInputs.answer_scale`)."""


@dataclass(frozen=True, slots=True)
class RecordedInputs:
    """What a cycle recorded, as the engine wrote it."""

    filter: FilterRecord | None
    prioritize: PrioritizeRecord | None
    recorded_filters: tuple[str, ...] = ()
    """The filter plugins the recorded profile ran (a passing plugin leaves no trace in ``failures``)."""

    @classmethod
    def from_records(
        cls,
        filter_record: FilterRecord | None,
        prioritize_record: PrioritizeRecord | None,
        recorded_filters: Sequence[str] = (),
    ) -> RecordedInputs:
        """Build from a cycle's records (``scheduler_core.extender.record.structs.CycleRecords``'s)."""
        return cls(filter=filter_record, prioritize=prioritize_record, recorded_filters=tuple(recorded_filters))

    @property
    def candidates(self) -> list[str]:
        if self.filter is not None:
            return list(self.filter.nodes)
        return list(self.prioritize.nodes) if self.prioritize is not None else []

    @property
    def answer_scale(self) -> str:
        """The scale the cycle answered on; :data:`~scheduler_core.extender.scoring.answer.DEFAULT_ANSWER_SCALE` when it
        never reached prioritize (nothing was answered)."""
        return self.prioritize.answer_scale if self.prioritize is not None else DEFAULT_ANSWER_SCALE

    @property
    def unknown_nodes(self) -> dict[str, str]:
        """Nodes the node cache did not know (answered 0 whatever the plugins said, or failed in filter) → why."""
        unknown: dict[str, str] = {}
        if self.filter is not None:
            unknown.update((n, r[NODE_CACHE]) for n, r in self.filter.failures.items() if NODE_CACHE in r)
        if self.prioritize is not None:
            for plugin in self.prioritize.plugins:
                if plugin.name == NODE_CACHE:
                    unknown.update(plugin.notes)
        return unknown


@dataclass(frozen=True, slots=True)
class NodeOutcome:
    node: str
    passed: bool
    reasons: Mapping[str, str] = field(default_factory=dict)
    """Failed filter plugin → reason (empty when the node passed)."""
    terms: Mapping[str, float | None] = field(default_factory=dict)
    """Score plugin → normalized 0..100 score (``None``: not recorded for this node)."""
    final: float | None = None
    """Weighted mean, 0..100; ``None`` for a node that did not reach prioritize."""
    extender: int | None = None
    partial: tuple[str, ...] = ()
    """Score plugins left out of ``final`` because this node has no recorded score for them."""


@dataclass(frozen=True, slots=True)
class ReplayResult:
    scenario: Scenario
    nodes: list[NodeOutcome]
    """In candidate order."""
    preferred: str
    """The highest final score (first in candidate order on a tie); empty when no node is feasible."""
    notes: list[str]
    answer_bounds: tuple[float, float] | None = None
    """The lowest and highest final score the ``spread`` scale maps onto 0..10; None under ``fixed`` or when
    every scored node has the same final score (the fixed rule answers)."""

    def outcome(self, node: str) -> NodeOutcome | None:
        return next((n for n in self.nodes if n.node == node), None)

    @property
    def answer_rule(self) -> str:
        """How final scores became answers, in words with the figures
        (``scheduler_core.extender.scoring.answer.answer_rule``)."""
        return answer_rule(self.scenario.answer_scale, self.answer_bounds)

    @property
    def preference_tied(self) -> bool:
        """Our highest-scored node answers the same as a node that scored strictly less: kube-scheduler sees a tie."""
        scored = [(o.final, o.extender) for o in self.nodes if o.final is not None and o.extender is not None]
        return preference_tied([f for f, _ in scored], [a for _, a in scored])


@dataclass(frozen=True, slots=True)
class NodeChange:
    node: str
    before: NodeOutcome
    after: NodeOutcome

    @property
    def feasibility_changed(self) -> bool:
        return self.before.passed != self.after.passed

    @property
    def answer_changed(self) -> bool:
        return self.before.extender != self.after.extender

    @property
    def final_delta(self) -> float | None:
        if self.before.final is None or self.after.final is None:
            return None
        return self.after.final - self.before.final


def scenario_from_profile(description: Mapping[str, Any], *, label: str = "") -> Scenario:
    """A scenario equal to a profile, from :meth:`scheduler_core.extender.scoring.profiles.Profile.describe`."""
    config: Mapping[str, Mapping[str, Any]] = description.get("pluginConfig", {})
    threshold = config.get(TrafficThreshold.name, {})
    answer: Mapping[str, Any] = description.get("answer") or {}
    return Scenario(
        filters=tuple(description.get("filter", ())),
        weights={entry["name"]: int(entry["weight"]) for entry in description.get("score", ())},
        max_bytes_per_second=float(threshold.get("maxBytesPerSecond", DEFAULT_MAX_BYTES_PER_SECOND)),
        fail_on_missing=bool(threshold.get("failOnMissing", False)),
        window_seconds=window_seconds(config),
        label=label or str(description.get("name", "")),
        answer_scale=str(answer.get("scale") or DEFAULT_ANSWER_SCALE),
    )


@dataclass(frozen=True, slots=True)
class _Traffic:
    """The recorded traffic figures per candidate."""

    filter_raws: dict[str, float | None]
    """What ``TrafficThreshold`` judged: the filter's snapshot first, else prioritize's."""
    score_raws: dict[str, float | None]
    """What ``NetworkTraffic`` scored: prioritize's snapshot first (the filter's may be a refresh older), else the
    filter's for nodes that reach prioritize only in the replay."""
    herd: dict[str, float]
    """Bytes assumed for recent binds, as recorded by ``NetworkTraffic`` (nodes with none are absent)."""
    herd_binds: int
    usable: bool
    """Whether any traffic snapshot was usable in the cycle."""


def _recorded_traffic(inputs: RecordedInputs) -> _Traffic:
    filter_raws: dict[str, float | None] = {}
    score_raws: dict[str, float | None] = {}
    herd: dict[str, float] = {}
    herd_binds = 0
    usable = False
    if inputs.filter is not None and inputs.filter.traffic_bytes:
        filter_raws.update(zip(inputs.filter.nodes, inputs.filter.traffic_bytes, strict=False))
        usable = True
    if inputs.prioritize is not None:
        for plugin in inputs.prioritize.plugins:
            if plugin.name != NetworkTraffic.name:
                continue
            if plugin.raw:
                usable = True
                score_raws.update(zip(inputs.prioritize.nodes, plugin.raw, strict=False))
            herd.update((n, b) for n, b in zip(inputs.prioritize.nodes, plugin.herd_bytes, strict=False) if b)
            herd_binds = sum(plugin.herd_binds)
    for node, raw in score_raws.items():
        if filter_raws.get(node) is None:
            filter_raws[node] = raw
    for node, raw in filter_raws.items():
        if score_raws.get(node) is None:
            score_raws[node] = raw
    return _Traffic(filter_raws, score_raws, herd, herd_binds, usable)


def _verdicts(
    inputs: RecordedInputs, scenario: Scenario, raws: Mapping[str, float | None], usable: bool
) -> dict[str, dict[str, str]]:
    failures = inputs.filter.failures if inputs.filter is not None else {}
    unknown = {n: r for n, r in inputs.unknown_nodes.items() if NODE_CACHE in failures.get(n, {})}
    limit = scenario.max_bytes_per_second
    window = max(1, scenario.window_seconds)
    reasons: dict[str, dict[str, str]] = {}
    for node in inputs.candidates:
        node_reasons: dict[str, str] = {}
        if node in unknown:  # no plugin judged it, whatever the scenario's filters: nobody knew the node
            reasons[node] = {NODE_CACHE: unknown[node]}
            continue
        for name in scenario.filters:
            if name == TrafficThreshold.name:
                raw = raws.get(node)
                if not usable:
                    if scenario.fail_on_missing:
                        node_reasons[name] = "traffic metrics unavailable"
                elif raw is None:
                    if scenario.fail_on_missing:
                        node_reasons[name] = "no traffic series for node"
                elif raw / window > limit:
                    node_reasons[name] = f"receive rate above {human_rate(limit)}"
            elif name in failures.get(node, {}):
                node_reasons[name] = failures[node][name]
        reasons[node] = node_reasons
    return reasons


def replay(inputs: RecordedInputs, scenario: Scenario) -> ReplayResult:
    """Re-run filter and prioritize arithmetic over the recorded inputs under ``scenario``."""
    notes: list[str] = []
    traffic = _recorded_traffic(inputs)
    usable = traffic.usable
    recorded_filters = set(inputs.recorded_filters)
    if inputs.filter is not None:
        recorded_filters.update(p for reasons in inputs.filter.failures.values() for p in reasons)
    for name in scenario.filters:
        if name != TrafficThreshold.name and name not in recorded_filters and inputs.filter is not None:
            notes.append(f"{name} did not run in this cycle: its verdicts are unknown, so every node passes it.")
    verdicts = _verdicts(inputs, scenario, traffic.filter_raws, usable)

    # Nodes our filters passed but kube-scheduler did not send to prioritize stay out: their exclusion was
    # someone else's decision, which a replay of our plugins cannot revisit.
    prioritized = set(inputs.prioritize.nodes) if inputs.prioritize is not None else None
    recorded_passed = set(inputs.filter.passed) if inputs.filter is not None else set(inputs.candidates)
    excluded_elsewhere = {n for n in recorded_passed if prioritized is not None and n not in prioritized}
    feasible = [n for n in inputs.candidates if not verdicts[n] and n not in excluded_elsewhere]
    # Sent to prioritize but unknown to the node cache: answered 0 whatever the plugins said, as recorded.
    forced_nodes = {n: why for n, why in inputs.unknown_nodes.items() if n in feasible}

    recorded_scores: dict[str, dict[str, float]] = {}
    applicable: dict[str, bool] = {}
    traffic_neutral = not usable
    if inputs.prioritize is not None:
        for plugin in inputs.prioritize.plugins:
            if plugin.name == NODE_CACHE:
                continue
            applicable[plugin.name] = plugin.applicable
            recorded_scores[plugin.name] = dict(zip(inputs.prioritize.nodes, plugin.scores, strict=False))
            if plugin.name == NetworkTraffic.name and not plugin.raw:
                traffic_neutral = True

    active = {name: weight for name, weight in scenario.weights.items() if weight > 0}
    for name in active:
        if name == NetworkTraffic.name:
            continue
        if name not in recorded_scores:
            notes.append(f"{name} did not score this cycle: its term is left out of every final score.")
        elif not applicable.get(name, True):
            notes.append(f"{name} did not apply to this pod (it carries no weight, as in the cycle).")
    if NetworkTraffic.name in active and traffic_neutral:
        notes.append("No usable traffic snapshot was recorded: NetworkTraffic scores every node 50 (neutral).")
    elif NetworkTraffic.name in active and traffic.herd:
        notes.append(
            f"Herd bytes are kept as recorded: NetworkTraffic adds the bytes assumed for {traffic.herd_binds} recent "
            f"bind(s) on {len(traffic.herd)} node(s) to their raw bytes, as in the cycle (TrafficThreshold judges "
            "the raw bytes alone)."
        )

    traffic_terms: dict[str, float] = {}
    if NetworkTraffic.name in active:
        traffic_terms = _traffic_terms([n for n in feasible if n not in forced_nodes], traffic, traffic_neutral)

    finals: dict[str, float] = {}
    scored: dict[str, tuple[dict[str, float | None], tuple[str, ...]]] = {}
    for node in feasible:
        if node in forced_nodes:
            finals[node] = 0.0
            scored[node] = ({}, ())
            continue
        terms: dict[str, float | None] = {}
        total = 0.0
        weight_sum = 0
        partial: list[str] = []
        # The engine's arithmetic: Σ score·weight in the profile's plugin order, over the scores as recorded.
        for name, weight in active.items():
            if name == NetworkTraffic.name:
                score: float | None = traffic_terms[node]
            else:
                if not applicable.get(name, True):
                    continue
                score = recorded_scores.get(name, {}).get(node)
            terms[name] = score
            if score is None:
                partial.append(name)
                continue
            total += score * weight
            weight_sum += weight
        finals[node] = total / weight_sum if weight_sum else 0.0
        scored[node] = (terms, tuple(partial))
    # Rounded to the record's 4 decimals and answered from those, as the engine answers (``run_prioritize``); the
    # spread needs every final, so the answers come after them all.
    rounded = round4([finals[n] for n in feasible])
    forced_positions = [i for i, n in enumerate(feasible) if n in forced_nodes]
    extender = answers(rounded, scenario.answer_scale, forced_positions)
    bounds = spread_bounds(rounded, forced_positions) if scenario.answer_scale == "spread" else None
    by_node = {node: (final, answer) for node, final, answer in zip(feasible, rounded, extender, strict=True)}
    if forced_nodes:
        notes.append(
            f"{len(forced_nodes)} node(s) were unknown to the node cache: they answer 0 whatever the plugins say, "
            "as in the cycle."
        )

    outcomes: list[NodeOutcome] = []
    for node in inputs.candidates:
        if node in excluded_elsewhere and not verdicts[node]:
            outcomes.append(NodeOutcome(node, False, {"kube-scheduler": NOT_PRIORITIZED}))
            continue
        if verdicts[node]:
            outcomes.append(NodeOutcome(node, False, verdicts[node]))
            continue
        terms, partial_terms = scored[node]
        final, answer = by_node[node]
        outcomes.append(NodeOutcome(node, True, {}, terms, final, answer, partial_terms))
    if any(o.partial for o in outcomes):
        notes.append("Some nodes reach prioritize only in this replay; scores never recorded for them are left out.")

    best: NodeOutcome | None = None
    for outcome in outcomes:
        if outcome.final is not None and (best is None or outcome.final > (best.final or 0.0) + 1e-9):
            best = outcome
    return ReplayResult(scenario, outcomes, best.node if best is not None else "", notes, bounds)


def _traffic_terms(nodes: Sequence[str], traffic: _Traffic, neutral: bool) -> dict[str, float]:
    """NetworkTraffic over ``nodes`` as the engine scores it (``traffic_scores`` of raw + herd), the maximum over
    the nodes' estimates, each rounded to the record's 4 decimals (the final score is a mean of recorded scores)."""
    if neutral:
        return dict.fromkeys(nodes, NEUTRAL_SCORE)
    estimates: dict[str, float | None] = {}
    for node in nodes:
        raw = traffic.score_raws.get(node)
        # A node without a series gets no herd bytes (the engine scores it as missing).
        estimates[node] = None if raw is None else raw + traffic.herd.get(node, 0.0)
    known = [e for e in estimates.values() if e is not None]
    scored = iter(traffic_scores(known, max(known, default=0.0)).tolist())
    values = [NEUTRAL_SCORE if e is None else next(scored) for e in estimates.values()]
    return dict(zip(nodes, round4(values), strict=True))


def compare(before: ReplayResult, after: ReplayResult) -> list[NodeChange]:
    """Per candidate, the outcome before and after; the ones that differ first, then in candidate order."""
    after_by_node = {o.node: o for o in after.nodes}
    changes = [NodeChange(o.node, o, after_by_node[o.node]) for o in before.nodes if o.node in after_by_node]

    def differs(change: NodeChange) -> bool:
        delta = change.final_delta
        return change.feasibility_changed or change.answer_changed or (delta is not None and abs(delta) >= 0.005)

    return sorted(changes, key=lambda c: not differs(c))
