"""Why a pod went where it went: one cycle's record as a structured explanation and a plain-language summary.

Works on the plain dicts the ingester stores (``FilterRecord`` / ``PrioritizeRecord`` as
``msgspec.to_builtins`` wrote them; extra keys are ignored), so the audit API and the dashboard explain a
cycle the same way without a database. A record that cannot be read (a refused call's) counts as absent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import msgspec

from scheduler_core.record import FilterRecord, PluginScores, PrioritizeRecord
from scheduler_core.units import human_bytes

TRAFFIC_PLUGIN = "NetworkTraffic"
MAX_LISTED_EXCLUSIONS = 5
"""The summary names this many excluded nodes, then says how many more; the structure has them all."""


@dataclass(frozen=True, slots=True)
class FilterVerdict:
    plugin: str
    reason: str
    detail: str = ""
    """Node-specific figures (the reason itself never has any, so kube-scheduler can count reasons)."""


@dataclass(frozen=True, slots=True)
class ScoreTerm:
    plugin: str
    weight: int
    applicable: bool
    """False when the plugin could not tell the nodes apart for this pod: it carried no weight."""
    normalized: float
    """The plugin's 0..100 score for the node."""
    weighted: float
    """``normalized × weight``."""
    contribution: float
    """Points this term adds to the final score: ``weighted`` / the sum of the applicable weights."""
    raw: float | None = None
    """The plugin's input for the node (received bytes for ``NetworkTraffic``)."""
    note: str = ""


@dataclass(frozen=True, slots=True)
class NodeExplanation:
    node: str
    passed: bool | None
    """None when no filter call was recorded."""
    unresolvable: bool
    verdicts: tuple[FilterVerdict, ...]
    """The failing filter plugins and their reasons; empty for a node that passed."""
    traffic_bytes: float | None
    terms: tuple[ScoreTerm, ...]
    final_score: float | None
    """Weighted mean of the applicable terms, 0..100; None when the node was not scored."""
    extender_score: int | None
    """What kube-scheduler was answered, 0..10."""
    rank: int | None
    """1 for the highest final score (ties keep kube-scheduler's order)."""


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
    nodes: tuple[NodeExplanation, ...]
    """Scored nodes by rank, then nodes that passed without a score, then the excluded ones."""
    summary: str


_Record = TypeVar("_Record", FilterRecord, PrioritizeRecord)


def _decode(record: Mapping[str, Any] | None, kind: type[_Record]) -> _Record | None:
    if not record:
        return None
    try:
        return msgspec.convert(dict(record), kind)
    except msgspec.ValidationError:
        return None


def _terms(prioritize: PrioritizeRecord, index: int, node: str) -> tuple[ScoreTerm, ...]:
    total_weight = sum(p.weight for p in prioritize.plugins if p.applicable)
    terms: list[ScoreTerm] = []
    for plugin in prioritize.plugins:
        normalized = plugin.scores[index] if index < len(plugin.scores) else 0.0
        weighted = normalized * plugin.weight
        share = weighted / total_weight if plugin.applicable and total_weight else 0.0
        raw = plugin.raw[index] if index < len(plugin.raw) else None
        note = plugin.notes.get(node, "") or ("" if plugin.applicable else plugin.note)
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
            )
        )
    return tuple(terms)


def _traffic_plugin(prioritize: PrioritizeRecord | None) -> PluginScores | None:
    if prioritize is None:
        return None
    return next((p for p in prioritize.plugins if p.name == TRAFFIC_PLUGIN), None)


def _traffic_of(
    node: str, filtered: FilterRecord | None, prioritize: PrioritizeRecord | None, index: dict[str, int]
) -> float | None:
    if filtered is not None and filtered.traffic_bytes:
        position = filtered.nodes.index(node) if node in filtered.nodes else -1
        if 0 <= position < len(filtered.traffic_bytes):
            return filtered.traffic_bytes[position]
    plugin = _traffic_plugin(prioritize)
    if plugin is not None and node in index and index[node] < len(plugin.raw):
        return plugin.raw[index[node]]
    return None


def _node_explanations(
    filtered: FilterRecord | None, prioritize: PrioritizeRecord | None
) -> tuple[NodeExplanation, ...]:
    candidates = list(filtered.nodes) if filtered is not None else []
    scored = list(prioritize.nodes) if prioritize is not None else []
    candidates += [n for n in scored if n not in set(candidates)]
    index = {n: i for i, n in enumerate(scored)}
    finals = list(prioritize.final) if prioritize is not None else []
    ranking = sorted(range(len(scored)), key=lambda i: -finals[i])
    rank = {scored[i]: position + 1 for position, i in enumerate(ranking)}
    passed = set(filtered.passed) if filtered is not None else set()
    unresolvable = set(filtered.unresolvable) if filtered is not None else set()

    explained: list[NodeExplanation] = []
    for node in candidates:
        failures = filtered.failures.get(node, {}) if filtered is not None else {}
        details = filtered.details.get(node, {}) if filtered is not None else {}
        i = index.get(node)
        explained.append(
            NodeExplanation(
                node=node,
                passed=None if filtered is None else node in passed,
                unresolvable=node in unresolvable,
                verdicts=tuple(FilterVerdict(p, r, details.get(p, "")) for p, r in failures.items()),
                traffic_bytes=_traffic_of(node, filtered, prioritize, index),
                terms=_terms(prioritize, i, node) if prioritize is not None and i is not None else (),
                final_score=prioritize.final[i] if prioritize is not None and i is not None else None,
                extender_score=prioritize.extender[i] if prioritize is not None and i is not None else None,
                rank=rank.get(node),
            )
        )

    def order(n: NodeExplanation) -> tuple[int, int]:
        if n.rank is not None:
            return (0, n.rank)
        return (1, 0) if n.passed is not False else (2, 0)

    return tuple(sorted(explained, key=order))


def _exclusion(node: NodeExplanation) -> str:
    text = ", ".join(f"{v.reason} ({v.detail})" if v.detail else v.reason for v in node.verdicts)
    return f"{node.node} {text[5:]}" if text.startswith("node ") else f"{node.node}: {text}"


def _why_winner(winner: NodeExplanation, runner_up: NodeExplanation | None, window: int | None) -> str:
    """The term that gave the winner its largest lead over the runner-up, in words."""
    others = {t.plugin: t.contribution for t in runner_up.terms} if runner_up is not None else {}
    applicable = [t for t in winner.terms if t.applicable]
    if not applicable:
        return ""
    key = max(applicable, key=lambda t: t.contribution - others.get(t.plugin, 0.0))
    if runner_up is not None and key.contribution - others.get(key.plugin, 0.0) <= 0:
        return ""
    if key.plugin == TRAFFIC_PLUGIN and key.raw is not None:
        amount = human_bytes(key.raw) + (f" in {window} min" if window else "")
        beaten = runner_up is None or any(
            t.plugin == TRAFFIC_PLUGIN and t.raw is not None and t.raw > key.raw for t in runner_up.terms
        )
        return f"lowest traffic ({amount})" if beaten else f"traffic {amount}"
    return f"highest {key.plugin} score ({key.normalized:.0f})"


def _lead(
    chosen: str,
    preferred: str,
    nodes: tuple[NodeExplanation, ...],
    filtered: FilterRecord | None,
    prioritize: PrioritizeRecord | None,
    window: int | None,
) -> tuple[str, str, float | None]:
    """The first sentence, the runner-up and the margin."""
    by_name = {n.node: n for n in nodes}
    winner_name = chosen or preferred
    if not winner_name:
        if filtered is not None and not filtered.passed:
            return "Not placed: no candidate node passed the filters.", "", None
        return "Not placed.", "", None
    head = f"Placed on {winner_name}" if chosen else f"{winner_name} scored highest (not bound)"
    winner = by_name.get(winner_name)
    if winner is None or winner.final_score is None:
        if prioritize is None and filtered is not None and filtered.passed == [winner_name]:
            return f"{head}: the only node that passed the filters.", "", None
        if prioritize is None:
            return f"{head}: no prioritize call was recorded.", "", None
        return f"{head}: kube-scheduler chose it among nodes this extender did not score.", "", None
    runner_up: NodeExplanation | None
    if chosen and preferred and chosen != preferred:
        runner_up = by_name[preferred]
    else:
        runner_up = next((n for n in nodes if n.rank is not None and n.node != winner_name), None)
    if runner_up is None or runner_up.final_score is None:
        return f"{head}: the only node scored.", "", None
    margin = round(winner.final_score - runner_up.final_score, 4)
    reasons = [_why_winner(winner, runner_up, window)] if margin > 0 else []
    if margin > 0:
        reasons.append(f"{margin:.1f} points ahead of {runner_up.node}")
    elif margin == 0:
        reasons.append(f"tied with {runner_up.node} at {winner.final_score:.1f} points (kube-scheduler broke the tie)")
    else:
        reasons.append(
            f"{-margin:.1f} points behind our preferred {runner_up.node} (kube-scheduler adds its own scores)"
        )
    return f"{head}: {', '.join(r for r in reasons if r)}.", runner_up.node, margin


def explain(
    *,
    filter_record: Mapping[str, Any] | None,
    prioritize_record: Mapping[str, Any] | None,
    chosen_node: str = "",
    error: str = "",
    traffic_window_minutes: int | None = None,
) -> Explanation:
    """Explain one cycle from its filter and prioritize records (either may be missing).

    ``chosen_node`` is the bind's node; ``traffic_window_minutes`` only words the summary ("1.0 MB in
    5 min") and is the caller's to know (the profile's ``timeRangeInMinutes``).
    """
    filtered = _decode(filter_record, FilterRecord)
    prioritize = _decode(prioritize_record, PrioritizeRecord)
    nodes = _node_explanations(filtered, prioritize)
    preferred = ""
    if prioritize is not None and prioritize.nodes:
        preferred = prioritize.nodes[prioritize.final.index(max(prioritize.final))]
    elif filtered is not None and len(filtered.passed) == 1:
        preferred = filtered.passed[0]  # kube-scheduler skips prioritize for a single feasible node

    sentences: list[str] = []
    lead, runner_up, margin = _lead(chosen_node, preferred, nodes, filtered, prioritize, traffic_window_minutes)
    if filtered is not None or prioritize is not None or not error:
        sentences.append(lead)
    excluded = [n for n in nodes if n.verdicts]
    if excluded:
        listed = "; ".join(_exclusion(n) for n in excluded[:MAX_LISTED_EXCLUSIONS])
        more = len(excluded) - MAX_LISTED_EXCLUSIONS
        noun = "node" if len(excluded) == 1 else "nodes"
        sentences.append(f"{len(excluded)} {noun} excluded: {listed}" + (f"; and {more} more." if more > 0 else "."))
    traffic = _traffic_plugin(prioritize)
    notes = dict.fromkeys(n for n in (filtered.metric_note if filtered else "", traffic.note if traffic else "") if n)
    sentences += [f"Traffic metrics: {note}." for note in notes]
    if error:
        sentences.append(f"Error: {error}.")

    ages = [filtered.metric_age_seconds if filtered else None]
    ages += [p.metric_age_seconds for p in (prioritize.plugins if prioritize else [])]
    known_ages = [a for a in ages if a is not None]
    return Explanation(
        chosen_node=chosen_node,
        preferred_node=preferred,
        runner_up=runner_up,
        margin=margin,
        candidate_count=len(nodes),
        excluded_count=len(excluded),
        metric_age_seconds=max(known_ages) if known_ages else None,
        metric_note=next(iter(notes), ""),
        traffic_window_minutes=traffic_window_minutes,
        nodes=nodes,
        summary=" ".join(sentences),
    )
