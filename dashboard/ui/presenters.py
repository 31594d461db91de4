"""Turn a recorded cycle (its verb calls' columnar records) into what the decision page shows.

Pure functions of the records: the candidates table (chosen node first), the plain-language explanation,
"why not node X?" term by term, and the chart series. Nothing here queries the database.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dashboard.models import Outcome, SchedulingCycle
from dashboard.selectors.cycles import CallRead
from scheduler_core.explanation.explain import Explanation, contribution, explain
from scheduler_core.explanation.figures import TrafficFigures
from scheduler_core.explanation.nodes import NodeExplanation
from scheduler_core.extender.record.structs import FILTER, PRIORITIZE, FilterRecord, PrioritizeRecord
from scheduler_core.extender.scoring.plugins.traffic import NetworkTraffic
from scheduler_core.extender.scoring.traffic_terms import TrafficTerms
from scheduler_core.extender.scoring.units import human_bytes

CHART_NODES = 30


@dataclass(frozen=True, slots=True)
class Verdict:
    plugin: str
    reason: str
    """Empty when the node passed this plugin."""
    detail: str = ""

    @property
    def passed(self) -> bool:
        return not self.reason


@dataclass(frozen=True, slots=True)
class Term:
    plugin: str
    weight: int
    score: float | None
    """Normalized 0..100."""
    points: float | None
    """score × weight / Σ applicable weights: the share of the final score this plugin contributed."""
    applicable: bool
    raw: float | None = None
    note: str = ""


@dataclass
class Candidate:
    node: str
    index: int
    chosen: bool = False
    preferred: bool = False
    passed: bool | None = None
    """``None`` when the cycle has no filter record (kube-scheduler called prioritize only)."""
    unresolvable: bool = False
    verdicts: list[Verdict] = field(default_factory=list)
    traffic_bytes: float | None = None
    terms: list[Term] = field(default_factory=list)
    final: float | None = None
    extender: int | None = None
    prioritized: bool = False
    explained: NodeExplanation | None = None
    """The figures and arithmetic the explanation shows for this node (``scheduler_core.explanation.explain``)."""

    @property
    def traffic(self) -> TrafficFigures | None:
        """The ``NetworkTraffic`` figures of this node's explanation: measured and assumed bytes, the estimate."""
        terms = self.explained.terms if self.explained is not None else ()
        return next((t.traffic for t in terms if t.traffic is not None), None)

    @property
    def failed_verdicts(self) -> list[Verdict]:
        return [v for v in self.verdicts if not v.passed]


@dataclass(frozen=True, slots=True)
class VerbAnswer:
    verb: str
    status: int
    duration_ms: float
    error: str
    server: str
    started_at: Any
    response_json: str


@dataclass
class Decision:
    cycle: SchedulingCycle
    candidates: list[Candidate]
    filter_plugins: list[str]
    score_plugins: list[tuple[str, int, bool]]
    """(name, weight, applicable) in profile order."""
    plugin_notes: list[tuple[str, str]]
    traffic_terms: TrafficTerms
    """The window and staleness limit the traffic is read with (``dashboard.selectors.cycles.cycle_traffic_terms``)."""
    traffic_age_seconds: float | None
    traffic_note: str
    answers: list[VerbAnswer]
    reference: str
    """The node the decision is explained against: the bound node, else our preferred node."""
    filter_record: FilterRecord | None
    prioritize_record: PrioritizeRecord | None
    explanation: Explanation
    """The cycle explained as the audit API explains it: the summary, and every figure each score follows from."""

    def candidate(self, node: str) -> Candidate | None:
        return next((c for c in self.candidates if c.node == node), None)

    @property
    def excluded(self) -> list[Candidate]:
        return [c for c in self.candidates if c.passed is False]

    @property
    def table_columns(self) -> int:
        """The candidates table's columns: node, filters, traffic, score plugins, final, answer, compare."""
        return len(self.filter_plugins) + len(self.score_plugins) + 5

    @property
    def window_seconds(self) -> int | None:
        """The traffic window in seconds; None when not known (then no rate is derived from the raw bytes)."""
        minutes = self.traffic_terms.window_minutes
        return None if minutes is None else minutes * 60

    @property
    def stale(self) -> bool:
        """The explanation's verdict (``scheduler_core.extender.scoring.traffic_terms.staleness``), as the audit API
        gives it."""
        return self.explanation.metric_stale is True


def build_decision(
    cycle: SchedulingCycle,
    calls: Sequence[CallRead],
    profile_description: Mapping[str, Any] | None,
    *,
    traffic_terms: TrafficTerms,
) -> Decision:
    """Assemble the table from the newest call of each verb (a retried verb keeps its latest answer)."""
    by_verb: dict[str, CallRead] = {}
    for read in calls:
        by_verb[read.call.verb] = read
    filter_read, prioritize_read = by_verb.get(FILTER), by_verb.get(PRIORITIZE)
    fr = filter_read.recorded.filter if filter_read is not None and filter_read.call.http_status == 200 else None
    pr = (
        prioritize_read.recorded.prioritize
        if prioritize_read is not None and prioritize_read.call.http_status == 200
        else None
    )

    filter_plugins: list[str] = list((profile_description or {}).get("filter", []))
    if fr is not None:
        for reasons in fr.failures.values():
            for plugin in reasons:
                if plugin not in filter_plugins:
                    filter_plugins.append(plugin)

    names: list[str] = list(fr.nodes) if fr is not None else list(pr.nodes) if pr is not None else []
    candidates = {name: Candidate(name, index) for index, name in enumerate(names)}
    if fr is not None:
        failures, details = fr.failures, fr.details
        unresolvable = set(fr.unresolvable)
        traffic = fr.traffic_bytes
        for index, name in enumerate(fr.nodes):
            candidate = candidates[name]
            node_failures = failures.get(name, {})
            candidate.passed = not node_failures
            candidate.unresolvable = name in unresolvable
            candidate.verdicts = [
                Verdict(p, node_failures.get(p, ""), details.get(name, {}).get(p, "")) for p in filter_plugins
            ]
            if index < len(traffic):
                candidate.traffic_bytes = traffic[index]

    score_plugins: list[tuple[str, int, bool]] = []
    plugin_notes: list[tuple[str, str]] = []
    age: float | None = fr.metric_age_seconds if fr is not None else None
    note = fr.metric_note if fr is not None else ""
    if pr is not None:
        plugins = pr.plugins
        total_weight = sum(p.weight for p in plugins if p.applicable)
        score_plugins = [(p.name, p.weight, p.applicable) for p in plugins]
        plugin_notes = [(p.name, p.note) for p in plugins if p.note]
        for p in plugins:
            if p.name == NetworkTraffic.name and p.metric_age_seconds is not None:
                age = p.metric_age_seconds if age is None else max(age, p.metric_age_seconds)
            if p.name == NetworkTraffic.name and p.note and not note:
                note = p.note
        for index, name in enumerate(pr.nodes):
            candidate = candidates.setdefault(name, Candidate(name, len(candidates)))
            candidate.prioritized = True
            candidate.final = pr.final[index]
            candidate.extender = pr.extender[index]
            for p in plugins:
                applicable = p.applicable
                value = p.scores[index] if index < len(p.scores) else None
                raw = p.raw[index] if index < len(p.raw) else None
                points = (
                    contribution(value, p.weight, total_weight)
                    if applicable and total_weight and value is not None
                    else None
                )
                # A plugin that did not apply says why once, in its note (scheduler_core.extender.scoring.engine), as
                # explain reads it.
                note = p.notes.get(name, "") or ("" if applicable else p.note)
                candidate.terms.append(Term(p.name, p.weight, value, points, applicable, raw, note))
                if p.name == NetworkTraffic.name and candidate.traffic_bytes is None:
                    candidate.traffic_bytes = raw

    reference = cycle.chosen_node or cycle.preferred_node
    for candidate in candidates.values():
        candidate.chosen = bool(cycle.chosen_node) and candidate.node == cycle.chosen_node
        candidate.preferred = bool(cycle.preferred_node) and candidate.node == cycle.preferred_node

    def rank(c: Candidate) -> tuple[int, int, float, int]:
        group = 0 if c.node == reference else 1 if c.prioritized else 2 if c.passed is not False else 3
        return (group, 0, -(c.final or 0.0), c.index)

    ordered = sorted(candidates.values(), key=rank)
    explanation = explain(
        filter_record=fr,
        prioritize_record=pr,
        chosen_node=cycle.chosen_node,
        error=cycle.error,
        traffic_terms=traffic_terms,
    )
    explained = {n.node: n for n in explanation.nodes}
    for candidate in ordered:
        candidate.explained = explained.get(candidate.node)
    answers = [
        VerbAnswer(
            verb=read.call.verb,
            status=read.call.http_status,
            duration_ms=read.call.duration_ms,
            error=read.call.error,
            server=read.call.server,
            started_at=read.call.started_at,
            response_json=json.dumps(read.answer, indent=2, ensure_ascii=False),
        )
        for read in calls
    ]
    return Decision(
        cycle=cycle,
        candidates=ordered,
        filter_plugins=filter_plugins,
        score_plugins=score_plugins,
        plugin_notes=plugin_notes,
        traffic_terms=traffic_terms,
        traffic_age_seconds=age,
        traffic_note=note,
        answers=answers,
        reference=reference,
        filter_record=fr,
        prioritize_record=pr,
        explanation=explanation,
    )


# --- explanation ---------------------------------------------------------------------------------------
# The plain-language summary itself is ``scheduler_core.explanation.explain`` (shared with the audit API); these are the
# sentences the page adds around it: how fresh the traffic was (the explanation's verdict, with its figures), and what
# an operator should do next.


def supplementary_lines(decision: Decision) -> list[str]:
    cycle = decision.cycle
    lines: list[str] = []
    if cycle.outcome == Outcome.UNSCHEDULABLE and not any(c.passed for c in decision.candidates):
        lines.append("No node passed every filter, so the pod stays pending until something changes.")
    if cycle.outcome == Outcome.PENDING and not cycle.chosen_node:
        lines.append("No bind was recorded for this attempt (yet): kube-scheduler may have bound it itself.")
    if decision.explanation.metric_staleness:
        lines.append(decision.explanation.metric_staleness)
    return lines


def explanation_lines(decision: Decision) -> list[str]:
    """The decision page's explanation: the summary the audit API serves too, then the page's own sentences."""
    summary = decision.explanation.summary
    return [line for line in (summary, *supplementary_lines(decision)) if line]


# --- why not -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TermGap:
    plugin: str
    weight: int
    reference_score: float | None
    other_score: float | None
    reference_points: float | None
    other_points: float | None
    reference_raw: float | None
    other_raw: float | None

    @property
    def raw_is_bytes(self) -> bool:
        """The raw figures are NetworkTraffic's bytes (shown beside the scores)."""
        return self.plugin == NetworkTraffic.name

    @property
    def gap(self) -> float | None:
        if self.reference_points is None or self.other_points is None:
            return None
        return self.reference_points - self.other_points


@dataclass(frozen=True, slots=True)
class WhyNot:
    node: str
    reference: str
    excluded_by: list[Verdict]
    not_prioritized: bool
    terms: list[TermGap]
    reference_final: float | None
    other_final: float | None
    reference_answer: int | None
    other_answer: int | None
    summary: str

    @property
    def final_gap(self) -> float | None:
        if self.reference_final is None or self.other_final is None:
            return None
        return self.reference_final - self.other_final


def why_not(decision: Decision, node: str) -> WhyNot | None:
    other = decision.candidate(node)
    reference = decision.candidate(decision.reference) if decision.reference else None
    if other is None:
        return None
    ref_name = reference.node if reference is not None else ""
    if other.passed is False:
        reasons = "; ".join(
            f"{v.plugin}: {v.reason}" + (f" ({v.detail})" if v.detail else "") for v in other.failed_verdicts
        )
        hint = " Preemption cannot help (unresolvable)." if other.unresolvable else ""
        return WhyNot(
            node,
            ref_name,
            other.failed_verdicts,
            False,
            [],
            None,
            None,
            None,
            None,
            f"{node} was excluded before scoring — {reasons}.{hint}",
        )
    if not other.prioritized:
        return WhyNot(
            node,
            ref_name,
            [],
            True,
            [],
            None,
            None,
            None,
            None,
            f"{node} passed our filters but kube-scheduler did not send it to prioritize"
            " (its own filters or another extender excluded it).",
        )
    if reference is None or other.node == reference.node:
        return WhyNot(
            node,
            ref_name,
            [],
            False,
            [],
            other.final,
            other.final,
            other.extender,
            other.extender,
            f"{node} is the node this decision went to.",
        )
    ref_terms = {t.plugin: t for t in reference.terms}
    gaps = []
    for term in other.terms:
        mine = ref_terms.get(term.plugin)
        gaps.append(
            TermGap(
                plugin=term.plugin,
                weight=term.weight,
                reference_score=mine.score if mine else None,
                other_score=term.score,
                reference_points=mine.points if mine else None,
                other_points=term.points,
                reference_raw=mine.raw if mine else None,
                other_raw=term.raw,
            )
        )
    final_gap = (reference.final or 0.0) - (other.final or 0.0)
    decisive = max((g for g in gaps if g.gap is not None), key=lambda g: g.gap or 0.0, default=None)
    if final_gap > 0 and decisive is not None and (decisive.gap or 0) > 0:
        what = decisive.plugin
        if decisive.raw_is_bytes and decisive.other_raw is not None and decisive.reference_raw is not None:
            # Worded as the summary words it: the window only when it is known.
            minutes = decision.traffic_terms.window_minutes
            over = f" in {minutes} min" if minutes is not None else ""
            what = f"traffic ({human_bytes(decisive.other_raw)} against {human_bytes(decisive.reference_raw)}{over})"
        summary = f"{node} scored {final_gap:.1f} points less than {reference.node}; most of it from {what}."
    elif final_gap > 0:
        summary = f"{node} scored {final_gap:.1f} points less than {reference.node}."
    else:
        summary = (
            f"{node} scored as high as {reference.node} or higher: kube-scheduler's own scores or its tie-break chose."
        )
    if reference.extender == other.extender and final_gap > 0:
        summary += f" On the 0..10 scale both answered {other.extender}, so kube-scheduler saw them as equal."
    return WhyNot(
        node, reference.node, [], False, gaps, reference.final, other.final, reference.extender, other.extender, summary
    )


# --- chart ---------------------------------------------------------------------------------------------


def chart_data(decision: Decision) -> dict[str, Any]:
    """Stacked weighted contributions per node (the chosen node first), for ``json_script``."""
    nodes = [c for c in decision.candidates if c.prioritized][:CHART_NODES]
    return {
        "labels": [c.node for c in nodes],
        "reference": decision.reference,
        "datasets": [
            {"label": f"{name} ×{weight}", "data": [_points(c, name) for c in nodes]}
            for name, weight, applicable in decision.score_plugins
            if applicable
        ],
        "traffic": [None if c.traffic_bytes is None else round(c.traffic_bytes / 1e6, 3) for c in nodes],
    }


def _points(candidate: Candidate, plugin: str) -> float | None:
    term = next((t for t in candidate.terms if t.plugin == plugin), None)
    return None if term is None or term.points is None else round(term.points, 3)
