"""Why a pod went where it went: one cycle's record as a structured explanation and a plain-language summary.

Works on the plain dicts the ingester stores (``FilterRecord`` / ``PrioritizeRecord`` as
``msgspec.to_builtins`` wrote them; extra keys are ignored), so the audit API and the dashboard explain a
cycle the same way without a database. A record that cannot be read (a refused call's) counts as absent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import msgspec

from scheduler_core.answer import answer_arithmetic, answer_rule, preference_tied, spread_bounds
from scheduler_core.figures import (
    IMAGES_PLUGIN,
    RESOURCES_PLUGIN,
    TRAFFIC_PLUGIN,
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
    seconds_text,
)
from scheduler_core.record import NODE_CACHE, FilterRecord, PluginScores, PrioritizeRecord
from scheduler_core.units import human_bytes

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
    arithmetic: str = ""
    """How ``normalized`` follows from the figures below, written out with them."""
    traffic: TrafficFigures | None = None
    resources: ResourceFigures | None = None
    images: ImageFigures | None = None


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
    final_arithmetic: str = ""
    """The weighted mean written out with the terms' scores and weights."""
    answer_arithmetic: str = ""
    """How the answer follows from the final score (the profile's answer scale, rounded half up)."""
    kube_scheduler_points: int | None = None
    """What the answer adds to the node's total in kube-scheduler: answer × extender weight × 10 (when the profile
    states the weight)."""


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
    answer_scale: str = ""
    """How final scores became answers: ``fixed`` or ``spread`` (``scheduler_core.answer``); empty: not scored."""
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


_Record = TypeVar("_Record", FilterRecord, PrioritizeRecord)


def _decode(record: Mapping[str, Any] | None, kind: type[_Record]) -> _Record | None:
    if not record:
        return None
    try:
        return msgspec.convert(dict(record), kind)
    except msgspec.ValidationError:
        return None


def contribution(normalized: float, weight: int, applicable_weight: int) -> float:
    """Points a score adds to a node's final score (here and on the decision page): score × weight / Σ weights."""
    return normalized * weight / applicable_weight if applicable_weight else 0.0


def _terms(prioritize: PrioritizeRecord, index: int, node: str, traffic: TrafficColumn | None) -> tuple[ScoreTerm, ...]:
    total_weight = sum(p.weight for p in prioritize.plugins if p.applicable)
    terms: list[ScoreTerm] = []
    for plugin in prioritize.plugins:
        normalized = plugin.scores[index] if index < len(plugin.scores) else 0.0
        weighted = normalized * plugin.weight
        share = contribution(normalized, plugin.weight, total_weight) if plugin.applicable else 0.0
        raw = plugin.raw[index] if index < len(plugin.raw) else None
        note = plugin.notes.get(node, "") or ("" if plugin.applicable else plugin.note)
        term = ScoreTerm(
            plugin=plugin.name,
            weight=plugin.weight,
            applicable=plugin.applicable,
            normalized=normalized,
            weighted=round(weighted, 4),
            contribution=round(share, 4),
            raw=raw,
            note=note,
        )
        terms.append(_with_figures(term, plugin, index, traffic))
    return tuple(terms)


def _with_figures(term: ScoreTerm, plugin: PluginScores, index: int, traffic: TrafficColumn | None) -> ScoreTerm:
    """``term`` with the figures its score follows from and the arithmetic, for the plugins that have them."""
    if not plugin.applicable:
        return replace(term, arithmetic=f"{term.note or plugin.note or 'not applicable'}: carries no weight")
    if plugin.name == TRAFFIC_PLUGIN and traffic is not None and traffic.plugin is plugin:
        figures = traffic.figures(index, term.note or ("" if plugin.raw else plugin.note))
        return replace(term, traffic=figures, arithmetic=traffic.arithmetic(figures, term.normalized))
    if plugin.name == RESOURCES_PLUGIN and (resources := resource_figures(plugin, index)) is not None:
        return replace(term, resources=resources, arithmetic=resource_arithmetic(resources, term.normalized, term.note))
    if plugin.name == IMAGES_PLUGIN and (images := image_figures(plugin, index)) is not None:
        return replace(term, images=images, arithmetic=image_arithmetic(images, term.normalized))
    return term


def _forced(prioritize: PrioritizeRecord | None) -> dict[str, str]:
    """Nodes answered 0 whatever the plugins said (unknown to the node cache) → why."""
    if prioritize is None:
        return {}
    return {node: note for p in prioritize.plugins if p.name == NODE_CACHE for node, note in p.notes.items()}


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
    filtered: FilterRecord | None, prioritize: PrioritizeRecord | None, bounds: tuple[float, float] | None
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
    plugin = _traffic_plugin(prioritize)
    traffic = TrafficColumn(plugin, scored) if plugin is not None else None
    forced = _forced(prioritize)
    weight = prioritize.extender_weight if prioritize is not None else 0

    explained: list[NodeExplanation] = []
    for node in candidates:
        failures = filtered.failures.get(node, {}) if filtered is not None else {}
        details = filtered.details.get(node, {}) if filtered is not None else {}
        i = index.get(node)
        scored_here = prioritize is not None and i is not None
        final_text = answer_text = ""
        points: int | None = None
        if prioritize is not None and i is not None:
            if node in forced:
                final_text = answer_text = f"{forced[node]}: answered 0 whatever the plugins scored"
            else:
                final_text = final_arithmetic(prioritize, i)
                answer_text = answer_arithmetic(
                    prioritize.final[i], prioritize.extender[i], prioritize.answer_scale, bounds
                )
            points = prioritize.extender[i] * weight * 10 if weight else None
        explained.append(
            NodeExplanation(
                node=node,
                passed=None if filtered is None else node in passed,
                unresolvable=node in unresolvable,
                verdicts=tuple(FilterVerdict(p, r, details.get(p, "")) for p, r in failures.items()),
                traffic_bytes=_traffic_of(node, filtered, prioritize, index),
                terms=_terms(prioritize, i, node, traffic) if prioritize is not None and i is not None else (),
                final_score=prioritize.final[i] if prioritize is not None and i is not None else None,
                extender_score=prioritize.extender[i] if prioritize is not None and i is not None else None,
                rank=rank.get(node),
                final_arithmetic=final_text,
                answer_arithmetic=answer_text,
                kube_scheduler_points=points if scored_here else None,
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


def _traffic_estimate(node: NodeExplanation) -> float | None:
    return next((t.traffic.estimate_bytes for t in node.terms if t.traffic is not None), None)


def _why_winner(winner: NodeExplanation, runner_up: NodeExplanation | None, window: int | None) -> str:
    """The term that gave the winner its largest lead over the runner-up, in words."""
    others = {t.plugin: t.contribution for t in runner_up.terms} if runner_up is not None else {}
    applicable = [t for t in winner.terms if t.applicable]
    if not applicable:
        return ""
    key = max(applicable, key=lambda t: t.contribution - others.get(t.plugin, 0.0))
    if runner_up is not None and key.contribution - others.get(key.plugin, 0.0) <= 0:
        return ""
    figures = key.traffic
    if key.plugin == TRAFFIC_PLUGIN and figures is not None and figures.estimate_bytes is not None:
        over = f" in {window} min" if window else ""
        estimate = figures.estimate_bytes
        if figures.herd_bytes and figures.measured_bytes is not None:
            amount = (
                f"{human_bytes(estimate)}{over}: {human_bytes(figures.measured_bytes)} measured + "
                f"{human_bytes(figures.herd_bytes)} assumed for recent binds"
            )
        else:
            amount = human_bytes(estimate) + over
        theirs = _traffic_estimate(runner_up) if runner_up is not None else None
        beaten = runner_up is None or (theirs is not None and theirs > estimate)
        return f"lowest traffic ({amount})" if beaten else f"traffic {amount}"
    return f"highest {key.plugin} score ({key.normalized:.0f})"


def _scale(answer: int | None, weight: int, *others: int | None) -> str:
    """``on the 0..10 scale``, and with the extender's weight what those answers are worth in kube-scheduler's total:
    ``on the 0..10 scale, 800 points each at weight 10`` (one answer) or ``…, 800 against 600 points at weight 10``."""
    if not weight or answer is None:
        return "on the 0..10 scale"
    points = [a * weight * 10 for a in (answer, *others) if a is not None]
    if len(points) == 1:
        return f"on the 0..10 scale, {points[0]} points each at weight {weight}"
    return f"on the 0..10 scale, {' against '.join(map(str, points))} points at weight {weight}"


def _names(nodes: list[str]) -> str:
    """``a, b and c``; past three, ``a, b, c and 4 more``."""
    if len(nodes) > 3:
        return f"{', '.join(nodes[:3])} and {len(nodes) - 3} more"
    return " and ".join([", ".join(nodes[:-1]), nodes[-1]]) if len(nodes) > 1 else "".join(nodes)


def _lead(
    chosen: str,
    preferred: str,
    nodes: tuple[NodeExplanation, ...],
    filtered: FilterRecord | None,
    prioritize: PrioritizeRecord | None,
    window: int | None,
) -> tuple[str, str, float | None]:
    """The first sentence, the runner-up and the margin.

    kube-scheduler saw our 0..10 answers, not our final scores: the sentence compares those, names ties, and blames
    kube-scheduler's own scores only when our answers cannot explain where the pod went.
    """
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
    weight = prioritize.extender_weight if prioritize is not None else 0
    if chosen and preferred and chosen != preferred and by_name[preferred].final_score is not None:
        ours = by_name[preferred]
        assert ours.final_score is not None
        margin = round(winner.final_score - ours.final_score, 4)
        answer = ours.extender_score
        finals = f"our final scores: {preferred} {ours.final_score:.1f}, {winner_name} {winner.final_score:.1f}"
        if winner.extender_score == answer:
            tied = [n.node for n in nodes if n.rank is not None and n.extender_score == answer]
            who = f"{_names(tied)} all" if len(tied) > 2 else f"{winner_name} and {preferred} both"
            return (
                f"{head}: {who} answered {answer} {_scale(answer, weight)} ({finals}): "
                "kube-scheduler picked among tied nodes.",
                preferred,
                margin,
            )
        return (
            f"{head}, although our preferred {preferred} answered {answer} and {winner_name} "
            f"{winner.extender_score} {_scale(answer, weight, winner.extender_score)} ({finals}): "
            "kube-scheduler's own scores, or another extender's, outweighed ours.",
            preferred,
            margin,
        )
    runner_up = next((n for n in nodes if n.rank is not None and n.node != winner_name), None)
    if runner_up is None or runner_up.final_score is None:
        return f"{head}: the only node scored.", "", None
    margin = round(winner.final_score - runner_up.final_score, 4)
    reasons = [_why_winner(winner, runner_up, window)] if margin > 0 else []
    answer = winner.extender_score
    tied = [n.node for n in nodes if n.rank is not None and n.node != winner_name and n.extender_score == answer]
    picked = "kube-scheduler picked among tied nodes" if chosen else "kube-scheduler may pick any of them"
    who = "both" if len(tied) == 1 else f"{_names([winner_name, *tied])} all"
    if margin <= 0:
        reasons.append(f"tied with {_names(tied or [runner_up.node])} at {winner.final_score:.1f} points")
        reasons.append(f"{who} answered {answer} {_scale(answer, weight)}: {picked}" if tied else "")
    elif tied:
        reasons.append(f"{_points(margin)} points ahead of {runner_up.node}")
        reasons.append(f"but {who} answered {answer} {_scale(answer, weight)}, so {picked}")
    else:
        versus = (
            f"answers {answer} against {runner_up.extender_score} {_scale(answer, weight, runner_up.extender_score)}"
        )
        reasons.append(f"{_points(margin)} points ahead of {runner_up.node} ({versus})")
    return f"{head}: {', '.join(r for r in reasons if r)}.", runner_up.node, margin


def _herd_sentence(leader: str, preferred: str, nodes: tuple[NodeExplanation, ...]) -> str:
    """``On measured traffic alone node-c would score highest; 3 recent binds there assume 900.0 MB more (the newest
    2.2 s before the call), which puts node-a first.``"""
    head = f"On measured traffic alone {leader} would score highest"
    figures = next((t.traffic for n in nodes if n.node == leader for t in n.terms if t.traffic is not None), None)
    if figures is None or not figures.herd_bytes:
        return f"{head}; the bytes assumed for recent binds put {preferred} first."
    verb = "assumes" if figures.herd_binds == 1 else "assume"
    binds = "recent binds" if figures.herd_binds is None else f"{figures.herd_binds} recent bind"
    binds += "s" if figures.herd_binds not in (1, None) else ""
    newest = figures.herd_newest_bind_age_seconds
    when = f" (the newest {seconds_text(newest)} before the call)" if newest is not None else ""
    return f"{head}; {binds} there {verb} {human_bytes(figures.herd_bytes)} more{when}, which puts {preferred} first."


def _points(value: float) -> str:
    """A difference of final scores: one decimal, or as many as it takes to show it is not zero (up to 4)."""
    if value == 0 or abs(value) >= 0.1:
        return f"{value:.1f}"
    return f"{value:.4f}".rstrip("0")


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
    forced = _forced(prioritize)
    bounds = None
    if prioritize is not None and prioritize.answer_scale == "spread":
        positions = [i for i, node in enumerate(prioritize.nodes) if node in forced]
        bounds = spread_bounds(prioritize.final, positions)
    nodes = _node_explanations(filtered, prioritize, bounds)
    preferred = ""
    if prioritize is not None and prioritize.nodes:
        preferred = prioritize.nodes[prioritize.final.index(max(prioritize.final))]
    elif filtered is not None and len(filtered.passed) == 1:
        preferred = filtered.passed[0]  # kube-scheduler skips prioritize for a single feasible node

    sentences: list[str] = []
    lead, runner_up, margin = _lead(chosen_node, preferred, nodes, filtered, prioritize, traffic_window_minutes)
    if filtered is not None or prioritize is not None or not error:
        sentences.append(lead)
    leader = measured_leader(prioritize, forced) if prioritize is not None else ""
    herd_changed = bool(leader) and leader != preferred
    if herd_changed:
        sentences.append(_herd_sentence(leader, preferred, nodes))
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
        runner_up=runner_up,
        margin=margin,
        candidate_count=len(nodes),
        excluded_count=len(excluded),
        metric_age_seconds=max(known_ages) if known_ages else None,
        metric_note=next(iter(notes), ""),
        traffic_window_minutes=traffic_window_minutes,
        nodes=nodes,
        summary=" ".join(sentences),
        answer_scale=prioritize.answer_scale if prioritize is not None else "",
        answer_rule=answer_rule(prioritize.answer_scale, bounds) if prioritize is not None else "",
        spread_min=bounds[0] if bounds is not None else None,
        spread_max=bounds[1] if bounds is not None else None,
        extender_weight=(prioritize.extender_weight or None) if prioritize is not None else None,
        answer_tie=preference_tied(prioritize.final, prioritize.extender) if prioritize is not None else False,
        tied_nodes=tied,
        measured_leader=leader,
        herd_changed_ranking=herd_changed,
    )
