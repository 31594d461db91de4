"""The history replay's report as text, for a terminal (``manage.py replay_history``).

Kept apart from :mod:`~scheduler_core.history_replay.report` (the data) and from the pages' presenters: it is the
one place that words the figures for plain text.
"""

from __future__ import annotations

from scheduler_core.extender.scoring.units import human_bytes, human_rate
from scheduler_core.history_replay.report import (
    CandidateDescription,
    Count,
    HistoryReplayReport,
    LearningComparison,
    LearningCycle,
)


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
            f"Candidate: {candidate_text(candidate)}",
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
    if report.learning is not None:
        lines += ["", *learning_lines(report.learning, cycles_shown=sample_shown)]
    return lines


def _error_text(value: float | None) -> str:
    return "—" if value is None else f"{value:+.2f}"


def _bytes_text(value: float | None) -> str:
    return "—" if value is None else human_bytes(value)


def learning_lines(found: LearningComparison, *, cycles_shown: int = 10) -> list[str]:
    """The comparison of learned traffic with the constant as text: the totals, then cycles, each with its figures."""
    lines = [
        f"Learned traffic against the constant ({found.before} → {found.after}), under the candidate: "
        f"constant {human_bytes(found.constant_bytes)} per pod over {found.window_seconds} s, binds weigh "
        f"{found.decay_seconds:g} s",
        f"  cycles compared: {found.cycles_compared:,}",
        *(f"  not compared {n:,}: {reason}" for reason, n in found.not_compared.items()),
        f"  preferred node changed: {_count_text(found.changed)}",
    ]
    for side in (found.before_side, found.after_side):
        error = side.error
        sources = ", ".join(f"{source} {n:,}" for source, n in side.sources.items()) or "none"
        lines.append(
            f"  {side.mode:8s} pods assumed from: {sources}; estimate error over {error.pods:,} measured pods: "
            f"mean {_error_text(error.mean)}, mean |error| {_error_text(error.mean_abs)}; preferred node stayed "
            f"quietest: {_count_text(side.quietest)}"
        )
    if found.cycles:
        lines.append(f"  cycles (changed first; {min(cycles_shown, len(found.cycles))} of {len(found.cycles)} listed):")
        lines += [line for cycle in found.cycles[:cycles_shown] for line in _cycle_lines(found, cycle)]
    lines += [f"  {name}: {basis}" for name, basis in found.figures.items()]
    lines += [f"  - {caveat}" for caveat in found.caveats]
    return lines


def _cycle_lines(found: LearningComparison, cycle: LearningCycle) -> list[str]:
    measured = (
        f"measured {_bytes_text(cycle.measured_pod_bytes)} in {cycle.measured_seconds} s"
        if cycle.measured_pod_bytes is not None
        else "no measured outcome"
    )
    lines = [
        f"    cycle {cycle.cycle_id} {cycle.pod_namespace}/{cycle.pod_name} ({cycle.workload or 'workload unknown'}): "
        f"{cycle.before_node or '(none)'} → {cycle.after_node or '(none)'}; {measured}",
    ]
    for mode, assumed, error in (
        (found.before, cycle.before_assumed, cycle.before_error),
        (found.after, cycle.after_assumed, cycle.after_error),
    ):
        lines.append(
            f"      {mode:8s} assumed {human_bytes(assumed.bytes)} ({assumed.text()}), error {_error_text(error)}"
        )
    for node in cycle.nodes:
        lines.append(
            f"      {node.node}: measured {_bytes_text(node.measured_bytes)} + herd {human_bytes(node.herd_before)} "
            f"({found.before}) / {human_bytes(node.herd_after)} ({found.after}) from {node.binds} recent bind(s)"
        )
    return lines


def candidate_text(candidate: CandidateDescription) -> str:
    """The candidate's name, version and origin, as the report and the replays list name it."""
    if candidate.source == "version":
        origin = "a recorded profile version"
    elif candidate.source != "profile":
        origin = "profile YAML given with the replay"
    elif not candidate.version:  # a replay kept before versions were named: nor was the file
        origin = "configured profile"
    elif candidate.profile_file:
        origin = f"configured in {candidate.profile_file}"
    else:
        origin = "the built-in default profile"
    version = f"version {candidate.version}" if candidate.version else "version not recorded"
    return f"{candidate.label}, {version} ({origin})"
