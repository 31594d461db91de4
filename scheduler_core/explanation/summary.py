"""The plain-language summary of a cycle's explanation: its wording, in one place.

``scheduler_core.explanation.explain`` calls :func:`summarize` twice over: for
:func:`~scheduler_core.explanation.explain.explain` with every node explained, and for
:func:`~scheduler_core.explanation.explain.explain_summary` with only the nodes the summary names built on demand (the
chosen node, the runner-up, our preferred node, the measured leader, the first excluded nodes). Both read the nodes
through :class:`SummaryNodes`, so the decision page, the why API and the ``Explained`` Event say the same sentence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from scheduler_core.explanation.figures import seconds_text
from scheduler_core.explanation.nodes import NodeExplanation
from scheduler_core.extender.record.structs import SOURCE_CONSTANT, FilterRecord, PrioritizeRecord
from scheduler_core.extender.scoring.plugins.traffic import NetworkTraffic
from scheduler_core.extender.scoring.units import human_bytes

MAX_LISTED_EXCLUSIONS = 5
"""The summary names this many excluded nodes, then says how many more; the structure has them all."""


class SummaryNodes(Protocol):
    """What the summary reads of a cycle's nodes."""

    def get(self, name: str) -> NodeExplanation | None:
        """The candidate ``name`` explained; None when it was no candidate."""

    def best_other_than(self, name: str) -> NodeExplanation | None:
        """The best-ranked scored node not called ``name``."""

    def answering(self, answer: int | None) -> list[str]:
        """The scored nodes that answered ``answer``, by rank."""

    def excluded(self, listed: int) -> tuple[int, list[NodeExplanation]]:
        """How many nodes a filter excluded, and the first ``listed`` of them in the explanation's order."""


@dataclass(frozen=True, slots=True)
class Summary:
    text: str
    runner_up: str
    margin: float | None
    excluded_count: int


def summarize(
    nodes: SummaryNodes,
    *,
    filtered: FilterRecord | None,
    prioritize: PrioritizeRecord | None,
    chosen: str,
    preferred: str,
    leader: str,
    notes: Sequence[str],
    error: str,
    window: int | None,
) -> Summary:
    """The summary of a cycle whose records are ``filtered`` and ``prioritize``; ``leader`` is the measured leader
    (``scheduler_core.explanation.figures.measured_leader``), ``notes`` the traffic metrics' notes."""
    sentences: list[str] = []
    lead, runner_up, margin = _lead(chosen, preferred, nodes, filtered, prioritize, window)
    if filtered is not None or prioritize is not None or not error:
        sentences.append(lead)
    if leader and leader != preferred:
        sentences.append(_herd_sentence(leader, preferred, nodes))
    assumed = _pod_assumed_sentence(prioritize)
    if assumed:
        sentences.append(assumed)
    count, excluded = nodes.excluded(MAX_LISTED_EXCLUSIONS)
    if count:
        listed = "; ".join(_exclusion(n) for n in excluded)
        more = count - MAX_LISTED_EXCLUSIONS
        noun = "node" if count == 1 else "nodes"
        sentences.append(f"{count} {noun} excluded: {listed}" + (f"; and {more} more." if more > 0 else "."))
    sentences += [f"Traffic metrics: {note}." for note in notes]
    if error:
        sentences.append(f"Error: {error}.")
    return Summary(" ".join(sentences), runner_up, margin, count)


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
    if key.plugin == NetworkTraffic.name and figures is not None and figures.estimate_bytes is not None:
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
    nodes: SummaryNodes,
    filtered: FilterRecord | None,
    prioritize: PrioritizeRecord | None,
    window: int | None,
) -> tuple[str, str, float | None]:
    """The first sentence, the runner-up and the margin.

    kube-scheduler saw our 0..10 answers, not our final scores: the sentence compares those, names ties, and blames
    kube-scheduler's own scores only when our answers cannot explain where the pod went.
    """
    winner_name = chosen or preferred
    if not winner_name:
        if filtered is not None and not filtered.passed:
            return "Not placed: no candidate node passed the filters.", "", None
        return "Not placed.", "", None
    head = f"Placed on {winner_name}" if chosen else f"{winner_name} scored highest (not bound)"
    winner = nodes.get(winner_name)
    if winner is None or winner.final_score is None:
        if prioritize is None and filtered is not None and filtered.passed == [winner_name]:
            return f"{head}: the only node that passed the filters.", "", None
        if prioritize is None:
            return f"{head}: no prioritize call was recorded.", "", None
        return f"{head}: kube-scheduler chose it among nodes this extender did not score.", "", None
    weight = prioritize.extender_weight if prioritize is not None else 0
    ours = nodes.get(preferred) if chosen and preferred and chosen != preferred else None
    if ours is not None and ours.final_score is not None:
        margin = round(winner.final_score - ours.final_score, 4)
        answer = ours.extender_score
        finals = f"our final scores: {preferred} {ours.final_score:.1f}, {winner_name} {winner.final_score:.1f}"
        if winner.extender_score == answer:
            tied = nodes.answering(answer)
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
    runner_up = nodes.best_other_than(winner_name)
    if runner_up is None or runner_up.final_score is None:
        return f"{head}: the only node scored.", "", None
    margin = round(winner.final_score - runner_up.final_score, 4)
    reasons = [_why_winner(winner, runner_up, window)] if margin > 0 else []
    answer = winner.extender_score
    tied = [n for n in nodes.answering(answer) if n != winner_name]
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


def _herd_sentence(leader: str, preferred: str, nodes: SummaryNodes) -> str:
    """``On measured traffic alone node-c would score highest; 3 recent binds there assume 900.0 MB more (the newest
    2.2 s before the call), which puts node-a first.``"""
    head = f"On measured traffic alone {leader} would score highest"
    node = nodes.get(leader)
    figures = next((t.traffic for t in node.terms if t.traffic is not None), None) if node is not None else None
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


def _pod_assumed_sentence(prioritize: PrioritizeRecord | None) -> str:
    """Where the pod's own assumed bytes come from, when not from the constant (the usual case says nothing)."""
    plugin = next((p for p in prioritize.plugins if p.pod_assumed is not None), None) if prioritize else None
    found = plugin.pod_assumed if plugin is not None else None
    if found is None or found.source == SOURCE_CONSTANT:
        return ""
    return f"Once bound, the pod is assumed to add {human_bytes(found.bytes)} to its node ({found.text()})."
