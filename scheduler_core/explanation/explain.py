"""Why a pod went where it went: one cycle's record as a structured explanation and a plain-language summary.

Works on the records as ``scheduler_core.extender.record.structs`` types (``dashboard.selectors.cycles`` decodes them
once), so the audit API and the dashboard explain a cycle the same way without a database. A record that cannot be read
(a refused call's) is passed as None: absent.
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from dataclasses import dataclass, field
from functools import cached_property
from itertools import filterfalse

import numpy

from scheduler_core.explanation.figures import (
    ImageFigures,
    ResourceFigures,
    TrafficColumn,
    TrafficFigures,
    final_arithmetic,
    image_arithmetic,
    image_figures,
    measured_leader,
    resource_arithmetic,
    resource_figures,
)
from scheduler_core.explanation.nodes import FilterVerdict, NodeExplanation, ScoreTerm
from scheduler_core.explanation.summary import Summary, summarize
from scheduler_core.extender.record.structs import NODE_CACHE, FilterRecord, PluginScores, PrioritizeRecord
from scheduler_core.extender.scoring.answer import answer_arithmetic, answer_rule, preference_tied, spread_bounds
from scheduler_core.extender.scoring.plugins.image_locality import ImageLocality
from scheduler_core.extender.scoring.plugins.node_resources import NodeResourceFitByCR
from scheduler_core.extender.scoring.plugins.traffic import NetworkTraffic
from scheduler_core.extender.scoring.traffic_terms import TrafficTerms, staleness


@dataclass(frozen=True, slots=True)
class Explanation:
    chosen_node: str
    """The node the pod was bound to; empty when it was not (yet)."""
    preferred_node: str
    """Our highest-scored node (kube-scheduler adds its own scores to ours)."""
    runner_up: str
    """The node the winner is compared with: the next best, or our preferred one when kube-scheduler chose otherwise."""
    margin: float | None
    """Final score of the winner minus the runner-up's."""
    candidate_count: int
    excluded_count: int
    metric_age_seconds: float | None
    metric_note: str
    traffic_window_minutes: int | None
    """``traffic_terms.window_minutes``, where it was before the terms were explained."""
    nodes: tuple[NodeExplanation, ...]
    """Scored nodes by rank, then nodes that passed without a score, then the excluded ones."""
    summary: str
    answer_scale: str = ""
    """How final scores became answers: ``fixed`` or ``spread`` (``scheduler_core.extender.scoring.answer``); empty: not
    scored."""
    answer_rule: str = ""
    """The rule in words, with the figures it uses."""
    spread_min: float | None = None
    """The lowest and highest final score the spread maps onto 0..10 (``spread`` only)."""
    spread_max: float | None = None
    extender_weight: int | None = None
    """The extender's weight in kube-scheduler's configuration, as the profile states it."""
    answer_tie: bool = False
    """Our preferred node answered the same as a node that scored less: rounding to 0..10 erased our preference."""
    tied_nodes: tuple[str, ...] = ()
    """The other nodes that answered what our preferred node answered."""
    measured_leader: str = ""
    """The node that would score highest on measured traffic alone (without the herd estimate)."""
    herd_changed_ranking: bool = False
    """The herd estimate moved our preference away from ``measured_leader``."""
    traffic_terms: TrafficTerms = field(default_factory=TrafficTerms)
    """The traffic window and staleness limit the figures are read with, where they come from or why not known."""
    metric_stale: bool | None = None
    """Whether the traffic used was stale (``scheduler_core.extender.scoring.traffic_terms.staleness``); None: not
    known."""
    metric_staleness: str = ""
    """That verdict with the age and limit it follows from; empty without a measurement."""
    pod_assumed: PodAssumed | None = None
    """What the herd estimate assumes this pod adds to its node once bound, and where that comes from; None: the
    record does not say (no herd estimate, or recorded before it was kept)."""


@dataclass(frozen=True, slots=True)
class PodAssumed:
    """``PluginScores.pod_assumed`` with the figures it follows from, for an explanation."""

    bytes: float
    source: str
    """``constant``, ``learned`` or ``override``."""
    text: str
    """Where the bytes come from, in words: "learned from 12 pods of deployment shop/web, p90 over the last 7 days"."""
    workload: str
    pods: int
    bytes_per_second: float
    """The learned rate (learned only): ``bytes`` is it times ``window_seconds``, rounded."""
    window_seconds: int | None
    """The traffic window the bytes are over; None: not known."""


def pod_assumed_of(prioritize: PrioritizeRecord | None, window_minutes: int | None) -> PodAssumed | None:
    plugin = _traffic_plugin(prioritize)
    found = plugin.pod_assumed if plugin is not None else None
    if found is None:
        return None
    window = window_minutes * 60 if window_minutes is not None else None
    return PodAssumed(
        found.bytes, found.source, found.text(), found.workload, found.pods, found.bytes_per_second, window
    )


def contribution(normalized: float, weight: int, applicable_weight: int) -> float:
    """Points a score adds to a node's final score (here and on the decision page): score × weight / Σ weights."""
    return normalized * weight / applicable_weight if applicable_weight else 0.0


def _terms(
    prioritize: PrioritizeRecord, index: int, node: str, traffic: TrafficColumn | None, applicable_weight: int
) -> tuple[ScoreTerm, ...]:
    terms: list[ScoreTerm] = []
    for plugin in prioritize.plugins:
        normalized = plugin.scores[index] if index < len(plugin.scores) else 0.0
        weighted = normalized * plugin.weight
        share = contribution(normalized, plugin.weight, applicable_weight) if plugin.applicable else 0.0
        raw = plugin.raw[index] if index < len(plugin.raw) else None
        note = plugin.notes.get(node, "") or ("" if plugin.applicable else plugin.note)
        arithmetic, traffic_figures, resources, images = _figures(plugin, index, traffic, normalized, note)
        terms.append(
            ScoreTerm(
                plugin=plugin.name,
                weight=plugin.weight,
                applicable=plugin.applicable,
                normalized=normalized,
                weighted=round(weighted, 4),
                contribution=round(share, 4),
                raw=raw,
                note=note,
                arithmetic=arithmetic,
                traffic=traffic_figures,
                resources=resources,
                images=images,
            )
        )
    return tuple(terms)


def _figures(
    plugin: PluginScores, index: int, traffic: TrafficColumn | None, normalized: float, note: str
) -> tuple[str, TrafficFigures | None, ResourceFigures | None, ImageFigures | None]:
    """A term's arithmetic, and the figures its score follows from for the plugins that have them (traffic,
    resources, images; None for the others), so that the term is built once with everything it shows."""
    if not plugin.applicable:
        return f"{note or plugin.note or 'not applicable'}: carries no weight", None, None, None
    if plugin.name == NetworkTraffic.name and traffic is not None and traffic.plugin is plugin:
        figures = traffic.figures(index, note or ("" if plugin.raw else plugin.note))
        return traffic.arithmetic(figures, normalized), figures, None, None
    if plugin.name == NodeResourceFitByCR.name and (resources := resource_figures(plugin, index)) is not None:
        return resource_arithmetic(resources, normalized, note), None, resources, None
    if plugin.name == ImageLocality.name and (images := image_figures(plugin, index)) is not None:
        return image_arithmetic(images, normalized), None, None, images
    return "", None, None, None


def _forced(prioritize: PrioritizeRecord | None) -> dict[str, str]:
    """Nodes answered 0 whatever the plugins said (unknown to the node cache) → why."""
    if prioritize is None:
        return {}
    return {node: note for p in prioritize.plugins if p.name == NODE_CACHE for node, note in p.notes.items()}


def _traffic_plugin(prioritize: PrioritizeRecord | None) -> PluginScores | None:
    if prioritize is None:
        return None
    return next((p for p in prioritize.plugins if p.name == NetworkTraffic.name), None)


class _Cycle:
    """A cycle's records read once: what explaining any one of its nodes needs, and what every summary needs
    (our preferred node, the measured leader, the ranking), without explaining a node yet."""

    def __init__(self, filtered: FilterRecord | None, prioritize: PrioritizeRecord | None) -> None:
        self.filtered, self.prioritize = filtered, prioritize
        self.forced = _forced(prioritize)
        self.bounds: tuple[float, float] | None = None
        if prioritize is not None and prioritize.answer_scale == "spread":
            positions = [i for i, node in enumerate(prioritize.nodes) if node in self.forced]
            self.bounds = spread_bounds(prioritize.final, positions)
        self.scored: Sequence[str] = prioritize.nodes if prioritize is not None else []
        # Array work: a summary explains a handful of nodes, and an ``Explained`` Event is one per placement.
        finals = -numpy.asarray(prioritize.final if prioritize is not None else [], dtype=float)
        self.ranking: list[int] = numpy.argsort(finals, kind="stable").tolist()
        """Positions in ``scored``, best first (ties keep kube-scheduler's order)."""
        self.passed = set(filtered.passed) if filtered is not None else set()
        self.unresolvable = set(filtered.unresolvable) if filtered is not None else set()
        self.weight = prioritize.extender_weight if prioritize is not None else 0
        self.applicable_weight = (
            sum(p.weight for p in prioritize.plugins if p.applicable) if prioritize is not None else 0
        )
        self._traffic: TrafficColumn | None = None
        self.preferred = ""
        if prioritize is not None and prioritize.nodes:
            self.preferred = prioritize.nodes[prioritize.final.index(max(prioritize.final))]
        elif filtered is not None and len(filtered.passed) == 1:
            self.preferred = filtered.passed[0]  # kube-scheduler skips prioritize for a single feasible node
        self.leader = measured_leader(prioritize, self.forced) if prioritize is not None else ""
        self.traffic_plugin = traffic = _traffic_plugin(prioritize)
        notes = (filtered.metric_note if filtered else "", traffic.note if traffic else "")
        self.notes = list(dict.fromkeys(n for n in notes if n))

    @cached_property
    def candidates(self) -> list[str]:
        """The filter call's candidates, then any node only prioritize scored."""
        candidates = list(self.filtered.nodes) if self.filtered is not None else []
        return candidates + list(filterfalse(set(candidates).__contains__, self.scored))

    @cached_property
    def position(self) -> dict[str, int]:
        """Node → its position in the filter call (a node listed twice: the first), for its ``traffic_bytes``."""
        nodes = self.filtered.nodes if self.filtered is not None else []
        return dict(zip(reversed(nodes), range(len(nodes) - 1, -1, -1), strict=True))

    @cached_property
    def index(self) -> dict[str, int]:
        """Node → its position in the prioritize call."""
        return dict(zip(self.scored, range(len(self.scored)), strict=True))

    @cached_property
    def rank(self) -> dict[str, int]:
        """Node → its rank by final score (1: best)."""
        return dict(zip(map(self.scored.__getitem__, self.ranking), range(1, len(self.ranking) + 1), strict=True))

    def traffic(self) -> TrafficColumn | None:
        """The ``NetworkTraffic`` column, read the first time a node's terms need it."""
        plugin = self.traffic_plugin
        if plugin is not None and self._traffic is None:
            self._traffic = TrafficColumn(plugin, self.scored)
        return self._traffic

    def traffic_bytes(self, node: str) -> float | None:
        """The node's received bytes as the filter call recorded them, else as the prioritize call did."""
        filtered, plugin = self.filtered, self.traffic_plugin
        if filtered is not None and filtered.traffic_bytes:
            position = self.position.get(node, -1)
            if 0 <= position < len(filtered.traffic_bytes):
                return filtered.traffic_bytes[position]
        i = self.index.get(node)
        if plugin is not None and i is not None and i < len(plugin.raw):
            return plugin.raw[i]
        return None

    def place(self, node: str) -> tuple[int, int]:
        """Where ``node`` goes in the explanation: scored nodes by rank, then the ones that passed, then the rest."""
        rank = self.rank.get(node)
        if rank is not None:
            return (0, rank)
        return (1, 0) if self.filtered is None or node in self.passed else (2, 0)

    def node(self, node: str) -> NodeExplanation:
        filtered, prioritize = self.filtered, self.prioritize
        failures = filtered.failures.get(node, {}) if filtered is not None else {}
        details = filtered.details.get(node, {}) if filtered is not None else {}
        i = self.index.get(node)
        final_text = answer_text = ""
        points: int | None = None
        terms: tuple[ScoreTerm, ...] = ()
        if prioritize is not None and i is not None:
            if node in self.forced:
                final_text = answer_text = f"{self.forced[node]}: answered 0 whatever the plugins scored"
            else:
                final_text = final_arithmetic(prioritize, i)
                answer_text = answer_arithmetic(
                    prioritize.final[i], prioritize.extender[i], prioritize.answer_scale, self.bounds
                )
            points = prioritize.extender[i] * self.weight * 10 if self.weight else None
            terms = _terms(prioritize, i, node, self.traffic(), self.applicable_weight)
        return NodeExplanation(
            node=node,
            passed=None if filtered is None else node in self.passed,
            unresolvable=node in self.unresolvable,
            verdicts=tuple(FilterVerdict(p, r, details.get(p, "")) for p, r in failures.items()),
            traffic_bytes=self.traffic_bytes(node),
            terms=terms,
            final_score=prioritize.final[i] if prioritize is not None and i is not None else None,
            extender_score=prioritize.extender[i] if prioritize is not None and i is not None else None,
            rank=self.rank.get(node),
            final_arithmetic=final_text,
            answer_arithmetic=answer_text,
            kube_scheduler_points=points,
        )

    def explained(self) -> tuple[NodeExplanation, ...]:
        """Every candidate explained: scored nodes by rank, then nodes that passed, then the excluded ones."""
        return tuple(sorted((self.node(n) for n in self.candidates), key=lambda n: self.place(n.node)))


class _Nodes:
    """The nodes as the summary reads them (``SummaryNodes``): taken from ``explained`` when the whole explanation
    was built, else each explained the first time the summary names it."""

    def __init__(self, cycle: _Cycle, explained: tuple[NodeExplanation, ...] | None = None) -> None:
        self._cycle = cycle
        self._built = {n.node: n for n in explained} if explained is not None else {}
        self._known: Set[str] = set(cycle.candidates) if explained is None else self._built.keys()

    def get(self, name: str) -> NodeExplanation | None:
        node = self._built.get(name)
        if node is None and name in self._known:
            node = self._built[name] = self._cycle.node(name)
        return node

    def best_other_than(self, name: str) -> NodeExplanation | None:
        scored = self._cycle.scored
        return next((self.get(scored[i]) for i in self._cycle.ranking if scored[i] != name), None)

    def answering(self, answer: int | None) -> list[str]:
        prioritize, scored = self._cycle.prioritize, self._cycle.scored
        if prioritize is None:
            return []
        return [scored[i] for i in self._cycle.ranking if prioritize.extender[i] == answer]

    def excluded(self, listed: int) -> tuple[int, list[NodeExplanation]]:
        filtered = self._cycle.filtered
        if filtered is None or not filtered.failures:
            return 0, []
        failing = sorted(filter(filtered.failures.get, self._cycle.candidates), key=self._cycle.place)
        return len(failing), [node for n in failing[:listed] if (node := self.get(n)) is not None]


def explain(
    *,
    filter_record: FilterRecord | None,
    prioritize_record: PrioritizeRecord | None,
    chosen_node: str = "",
    error: str = "",
    traffic_window_minutes: int | None = None,
    traffic_terms: TrafficTerms | None = None,
) -> Explanation:
    """Explain one cycle from its filter and prioritize records (either may be missing).

    ``chosen_node`` is the bind's node. ``traffic_terms`` (the profile's window and staleness limit, which the record
    does not carry: ``dashboard.selectors.cycles.cycle_traffic_terms``) word the summary ("1.0 MB in 5 min") and
    judge the traffic's age; without them, ``traffic_window_minutes`` words the summary and staleness is not judged.
    """
    terms = traffic_terms if traffic_terms is not None else TrafficTerms(window_minutes=traffic_window_minutes)
    filtered, prioritize = filter_record, prioritize_record
    cycle = _Cycle(filtered, prioritize)
    nodes = cycle.explained()
    preferred, leader, bounds = cycle.preferred, cycle.leader, cycle.bounds
    summary = _summary(cycle, _Nodes(cycle, nodes), chosen_node, error, terms.window_minutes)

    ages = [filtered.metric_age_seconds if filtered else None]
    ages += [p.metric_age_seconds for p in (prioritize.plugins if prioritize else [])]
    known_ages = [a for a in ages if a is not None]
    age = max(known_ages) if known_ages else None
    stale = staleness(age, cycle.notes, terms)
    by_name = {n.node: n for n in nodes}
    top = by_name.get(preferred)
    tied: tuple[str, ...] = ()
    if top is not None and top.extender_score is not None:
        tied = tuple(
            n.node
            for n in nodes
            if n.rank is not None and n.node != preferred and n.extender_score == top.extender_score
        )
    return Explanation(
        chosen_node=chosen_node,
        preferred_node=preferred,
        runner_up=summary.runner_up,
        margin=summary.margin,
        candidate_count=len(nodes),
        excluded_count=summary.excluded_count,
        metric_age_seconds=age,
        metric_note=next(iter(cycle.notes), ""),
        traffic_window_minutes=terms.window_minutes,
        nodes=nodes,
        summary=summary.text,
        answer_scale=prioritize.answer_scale if prioritize is not None else "",
        answer_rule=answer_rule(prioritize.answer_scale, bounds) if prioritize is not None else "",
        spread_min=bounds[0] if bounds is not None else None,
        spread_max=bounds[1] if bounds is not None else None,
        extender_weight=(prioritize.extender_weight or None) if prioritize is not None else None,
        answer_tie=preference_tied(prioritize.final, prioritize.extender) if prioritize is not None else False,
        tied_nodes=tied,
        measured_leader=leader,
        herd_changed_ranking=bool(leader) and leader != preferred,
        traffic_terms=terms,
        metric_stale=stale.stale,
        metric_staleness=stale.text,
        pod_assumed=pod_assumed_of(prioritize, terms.window_minutes),
    )


def explain_summary(
    *,
    filter_record: FilterRecord | None,
    prioritize_record: PrioritizeRecord | None,
    chosen_node: str = "",
    error: str = "",
    traffic_window_minutes: int | None = None,
) -> str:
    """``explain(...).summary``, the same text, explaining only the nodes the sentence names (the winner, the
    runner-up or our preferred node, the measured leader, the first excluded nodes) instead of every candidate:
    for the ``Explained`` Event, which shows nothing else."""
    cycle = _Cycle(filter_record, prioritize_record)
    return _summary(cycle, _Nodes(cycle), chosen_node, error, traffic_window_minutes).text


def _summary(cycle: _Cycle, nodes: _Nodes, chosen: str, error: str, window: int | None) -> Summary:
    return summarize(
        nodes,
        filtered=cycle.filtered,
        prioritize=cycle.prioritize,
        chosen=chosen,
        preferred=cycle.preferred,
        leader=cycle.leader,
        notes=cycle.notes,
        error=error,
        window=window,
    )
