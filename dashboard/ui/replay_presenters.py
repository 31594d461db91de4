"""What the history-replay pages show: a replay in the list, its progress, and its report with the
figures every statement follows from, the placements chart's series and the links to each changed decision's
what-if with the candidate's settings filled in.

Pure functions of a replay's row and its report (``scheduler_core.history_replay.report.HistoryReplayReport``); nothing
here queries the database. The report's own ``basis`` texts say how each figure is counted; the sums shown beside
them (ties after = before + created − removed, the placements' totals, each node's mean rate = Σ / count) let a
reader check that the figures add up.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

import msgspec
from django.urls import reverse

from dashboard.replays.models import HistoryReplay
from dashboard.replays.selectors import ReplaySelection
from scheduler_core.extender.scoring.units import human_rate
from scheduler_core.history_replay.report import (
    CandidateDescription,
    ChangedDecision,
    Count,
    HistoryReplayReport,
    Spread,
)
from scheduler_core.history_replay.report_text import candidate_text
from scheduler_core.history_replay.scenarios import candidate_description

CHART_NODES = 40
"""Nodes drawn in the placements chart (those with the most placements before or after); the table lists more."""
TABLE_NODES = 300
"""Nodes listed in the placements table; the rest are counted in one line."""


def share(k: int, n: int) -> str:
    """``k of n (p %)``; ``k of 0`` without a percentage."""
    if n <= 0:
        return f"{k:,} of {n:,}"
    return f"{k:,} of {n:,} ({100.0 * k / n:.1f} %)"


def rate(value: float | None) -> str:
    return "—" if value is None else human_rate(value)


def selection_text(data: Mapping[str, Any] | None) -> str:
    """The selection as the replay's row keeps it, in words (``ReplaySelection.describe``)."""
    try:
        return ReplaySelection.from_json(data or {}).describe()
    except (TypeError, ValueError, KeyError):
        return str(data)


def _parsed_time(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text) if text else None
    except ValueError:
        return None


# --- the list and the progress -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Progress:
    done: int
    total: int | None
    """Cycles selected; None until the run has listed them."""

    @property
    def percent(self) -> float | None:
        if not self.total:
            return 100.0 if self.total == 0 else None
        return min(100.0, 100.0 * self.done / self.total)

    @property
    def text(self) -> str:
        if self.total is None:
            return f"{self.done:,} cycles replayed (listing the selection)"
        percent = self.percent
        return f"{self.done:,} of {self.total:,} cycles ({percent:.0f} %)" if percent is not None else ""


@dataclass(frozen=True, slots=True)
class ReplayRow:
    """One replay as the list shows it."""

    id: int
    status: str
    status_label: str
    finished: bool
    progress: Progress
    created_by: str
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    candidate: str
    candidate_source: str
    """``configured`` or ``YAML``."""
    candidate_version: str
    """The candidate's profile version (empty: a replay kept before versions were named)."""
    candidate_text: str
    """Name, version and where it was read from (``report_text.candidate_text``)."""
    selection: str
    error: str


def replay_row(replay: HistoryReplay) -> ReplayRow:
    return ReplayRow(
        id=replay.pk,
        status=replay.status,
        status_label=replay.get_status_display(),
        finished=replay.finished,
        progress=Progress(replay.progress_done, replay.progress_total),
        created_by=replay.created_by,
        created_at=replay.created_at,
        started_at=replay.started_at,
        finished_at=replay.finished_at,
        candidate=replay.candidate_profile or "(YAML)",
        candidate_source={"yaml": "YAML", "version": "recorded"}.get(replay.candidate_source, "configured"),
        candidate_version=str(replay.candidate_scenario.get("version") or ""),
        candidate_text=_candidate_text(replay),
        selection=selection_text(replay.selection),
        error=replay.error,
    )


def _candidate_text(replay: HistoryReplay) -> str:
    try:
        return candidate_text(msgspec.convert(replay.candidate_scenario, CandidateDescription))
    except msgspec.ValidationError:  # not replayed yet in an older version: no description kept
        return f"{replay.candidate_profile or '(YAML)'}, version not recorded"


def seconds_between(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None:
        return None
    return max(0.0, (end - start).total_seconds())


# --- the what-if link ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WhatIfLink:
    """The what-if parameters that put the candidate on a decision page, and how they were chosen."""

    params: dict[str, str]
    mode: str
    """``profile`` (the configured profile by name) or ``custom`` (its weights, filters, threshold, answer scale)."""
    note: str

    def url(self, cycle_id: int) -> str:
        return f"{reverse('ui:what-if', args=[cycle_id])}?{urlencode(self.params)}"


def what_if_link(description: CandidateDescription, *, configured: Mapping[str, Mapping[str, Any]]) -> WhatIfLink:
    """Profile mode when the candidate is a configured profile still configured as it was replayed (the what-if
    then replays the same settings); custom settings otherwise (profile YAML, or a profile changed since)."""
    custom = dict(description.what_if_params)
    if description.source == "profile" and description.label in configured:
        now = candidate_description(configured[description.label], source="profile")
        if now.what_if_params == description.what_if_params:
            return WhatIfLink(
                {"mode": "profile", "profile": description.label},
                "profile",
                f"The links open the what-if under the configured profile {description.label}.",
            )
        return WhatIfLink(
            custom,
            "custom",
            f"The profile {description.label} has changed since this replay: the links fill in the settings it was "
            "replayed with (weights, filters, threshold, answer scale).",
        )
    return WhatIfLink(
        custom,
        "custom",
        "The links fill in the candidate's weights, filters, threshold and answer scale (custom settings).",
    )


# --- the report ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PlacementRow:
    node: str
    before: int
    after: int
    before_rate_sum: float
    before_with_rate: int
    after_rate_sum: float
    after_with_rate: int

    @property
    def delta(self) -> int:
        return self.after - self.before

    @property
    def before_mean(self) -> float | None:
        return self.before_rate_sum / self.before_with_rate if self.before_with_rate else None

    @property
    def after_mean(self) -> float | None:
        return self.after_rate_sum / self.after_with_rate if self.after_with_rate else None

    @property
    def before_mean_arithmetic(self) -> str:
        return _mean_arithmetic(self.before_rate_sum, self.before_with_rate)

    @property
    def after_mean_arithmetic(self) -> str:
        return _mean_arithmetic(self.after_rate_sum, self.after_with_rate)


def _mean_arithmetic(total: float, count: int) -> str:
    if not count:
        return "no placement with a traffic figure"
    return f"{human_rate(total)} summed over {count:,} placement{'s' if count != 1 else ''} / {count:,}"


@dataclass(frozen=True, slots=True)
class SpreadRow:
    """One figure of the traffic balance, before and after."""

    label: str
    before: str
    after: str
    key: str


@dataclass(frozen=True, slots=True)
class SampleRow:
    cycle_id: int
    started_at: datetime | None
    started_text: str
    pod_namespace: str
    pod_name: str
    profile: str
    before_node: str
    after_node: str
    before_node_finals: str
    """The node preferred before: its final score before → after."""
    after_node_finals: str
    why: str
    decision_url: str
    what_if_url: str


@dataclass(frozen=True, slots=True)
class Figure:
    """A headline figure with the sum or count it follows from and how it is counted."""

    key: str
    label: str
    value: str
    adds_up: str
    basis: str


@dataclass
class ReportView:
    report: HistoryReplayReport
    figures: list[Figure]
    placements: list[PlacementRow]
    placements_more: int
    placements_before_total: int
    placements_after_total: int
    placements_adds_up: str
    chart: dict[str, Any]
    balance: list[SpreadRow]
    balance_summary: str
    balance_basis: str
    quietest_before: str
    quietest_after: str
    quietest_basis: str
    rejections_basis: str
    sample: list[SampleRow]
    sample_note: str
    what_if: WhatIfLink | None
    candidate_weights: list[tuple[str, int]] = field(default_factory=list)
    gone: int = 0
    """Cycles selected but pruned before the run read them."""

    @property
    def chart_json(self) -> str:
        """The chart's series for the canvas's ``data-chart`` attribute (escaped by the template). Not
        ``json_script``: the report arrives by an htmx swap, and htmx (``allowScriptTags: false``, as the CSP wants)
        removes every ``<script>`` element, JSON ones too, from swapped content."""
        return json.dumps(self.chart, separators=(",", ":"))


def _basis(report: HistoryReplayReport, key: str) -> str:
    return report.figures.get(key, "")


def _finals(before: float | None, after: float | None) -> str:
    def text(value: float | None) -> str:
        return "not feasible" if value is None else f"{value:.1f}"

    return f"{text(before)} → {text(after)}"


def _spread_rows(before: Spread, after: Spread) -> list[SpreadRow]:
    def node_rate(value: float | None, node: str) -> str:
        return "—" if value is None else f"{human_rate(value)} ({node})"

    def ratio(value: float | None, spread: Spread) -> str:
        if value is None:
            return "—" if spread.nodes == 0 else "— (the quietest node's mean is 0)"
        return f"{value:.2f} = {human_rate(spread.max or 0)} / {human_rate(spread.min or 0)}"

    return [
        SpreadRow("Nodes with a placement that had a traffic figure", f"{before.nodes:,}", f"{after.nodes:,}", "nodes"),
        SpreadRow("Mean of the nodes' mean rate at placement", rate(before.mean), rate(after.mean), "mean"),
        SpreadRow("Spread: population standard deviation of those means", rate(before.stdev), rate(after.stdev),
                  "stdev"),
        SpreadRow("Busiest node at placement (highest mean)", node_rate(before.max, before.max_node),
                  node_rate(after.max, after.max_node), "max"),
        SpreadRow("Quietest node at placement (lowest mean)", node_rate(before.min, before.min_node),
                  node_rate(after.min, after.min_node), "min"),
        SpreadRow("Busiest / quietest", ratio(before.max_over_min, before), ratio(after.max_over_min, after),
                  "max_over_min"),
    ]  # fmt: skip


def _nodes(count: int) -> str:
    return f"{count:,} node{'' if count == 1 else 's'}"


def _balance_summary(before: Spread, after: Spread) -> str:
    if before.stdev is None or after.stdev is None:
        side = "before" if before.stdev is None else "after"
        return f"No placement {side} had a recorded traffic figure, so the balance cannot be compared."
    if before.nodes < 2 and after.nodes < 2:
        return (
            f"Placements with a traffic figure went to one node before ({before.max_node}, "
            f"{human_rate(before.max or 0)} on average) and one after ({after.max_node}, "
            f"{human_rate(after.max or 0)}): there is no spread across nodes to compare."
        )
    if after.stdev < before.stdev:
        verb = "narrower"
    elif after.stdev > before.stdev:
        verb = "wider"
    else:
        verb = "the same"
    return (
        f"The spread of traffic at placement across nodes would be {verb}: {human_rate(after.stdev)} after against "
        f"{human_rate(before.stdev)} before (population standard deviation of the mean rate at placement of the "
        f"{_nodes(after.nodes)} after and the {_nodes(before.nodes)} before; each node's mean is in the placements "
        "table)."
    )


def _figures(report: HistoryReplayReport) -> list[Figure]:
    changed: Count = report.decisions_changed
    moved = changed.k - report.became_unschedulable - report.became_schedulable
    none_either = report.cycles_replayed - changed.n
    replayed_text = (
        f"{report.cycles_replayed:,} replayed + {report.cycles_skipped:,} skipped"
        + (
            f" + {report.cycles_selected - report.cycles_replayed - report.cycles_skipped:,} gone since listed"
            if report.cycles_selected > report.cycles_replayed + report.cycles_skipped
            else ""
        )
        + f" = {report.cycles_selected:,} selected"
    )
    return [
        Figure("cycles_replayed", "Cycles replayed", f"{report.cycles_replayed:,}", replayed_text,
               _basis(report, "cycles_replayed")),
        Figure("decisions_changed", "Decisions that change", share(changed.k, changed.n),
               f"{changed.k:,} = {moved:,} moved to another node + {report.became_unschedulable:,} left without a "
               f"feasible node + {report.became_schedulable:,} given one; n = {report.cycles_replayed:,} replayed − "
               f"{none_either:,} with no preferred node before or after",
               changed.basis or _basis(report, "decisions_changed")),
        Figure("became_unschedulable", "Cycles left without a feasible node", f"{report.became_unschedulable:,}",
               f"and {report.became_schedulable:,} the other way (no feasible node before, one after)",
               _basis(report, "became_unschedulable")),
        Figure("feasible_to_infeasible", "Nodes feasible → infeasible", f"{report.feasible_to_infeasible:,}",
               f"node-cycles; {report.infeasible_to_feasible:,} infeasible → feasible; net "
               f"{report.infeasible_to_feasible - report.feasible_to_infeasible:+,}",
               _basis(report, "feasible_to_infeasible")),
        Figure("ties", "Ties on the 0..10 answer", f"{report.ties_created:,} created, {report.ties_removed:,} removed",
               f"tied after = tied before + created − removed: {report.ties_after:,} = {report.ties_before:,} + "
               f"{report.ties_created:,} − {report.ties_removed:,}",
               _basis(report, "ties_created")),
        Figure("partially_scored", "Nodes scored without a recorded plugin score", f"{report.partially_scored:,}",
               "node-cycles after (that plugin's term is left out of their final scores)",
               _basis(report, "partially_scored")),
        Figure("recorded_preferred_differs", "Replays of the recorded profile that differ from the record",
               share(report.recorded_preferred_differs, report.cycles_replayed),
               "the “before” figures are those of the replay under the recorded profile as configured now",
               _basis(report, "recorded_preferred_differs")),
    ]  # fmt: skip


def _placements_chart(rows: Sequence[PlacementRow], candidate: str) -> dict[str, Any]:
    shown = list(rows[:CHART_NODES])
    return {
        "labels": [r.node for r in shown],
        "before": [r.before for r in shown],
        "after": [r.after for r in shown],
        "before_label": "before (recorded profile)",
        "after_label": f"after ({candidate})",
        "more": max(0, len(rows) - len(shown)),
    }


def _sample_row(changed: ChangedDecision, link: WhatIfLink | None) -> SampleRow:
    started = _parsed_time(changed.started_at)
    return SampleRow(
        cycle_id=changed.cycle_id,
        started_at=started,
        started_text=changed.started_at,
        pod_namespace=changed.pod_namespace,
        pod_name=changed.pod_name,
        profile=changed.profile,
        before_node=changed.before_node,
        after_node=changed.after_node,
        before_node_finals=_finals(changed.before_node_final_before, changed.before_node_final_after),
        after_node_finals=_finals(changed.after_node_final_before, changed.after_node_final_after),
        why=changed.why,
        decision_url=reverse("ui:decision", args=[changed.cycle_id]),
        what_if_url=link.url(changed.cycle_id) if link is not None else "",
    )


def build_report(report: HistoryReplayReport, *, configured: Mapping[str, Mapping[str, Any]]) -> ReportView:
    """The report page's view of ``report``; ``configured``: the configured profiles, described (for the what-if
    links' mode)."""
    candidate = report.candidate
    link = what_if_link(candidate, configured=configured) if candidate is not None else None
    rows = [
        PlacementRow(
            p.node, p.before, p.after, p.before_rate_sum, p.before_with_rate, p.after_rate_sum, p.after_with_rate
        )
        for p in report.placements
    ]
    before_total = sum(r.before for r in rows)
    after_total = sum(r.after for r in rows)
    balance = report.balance
    changed = report.decisions_changed
    label = candidate.label if candidate is not None else "candidate"
    sample = [_sample_row(c, link) for c in report.sample]
    if changed.k > len(sample):
        sample_note = f"The first {len(sample):,} of the {changed.k:,} changed decisions, oldest first."
    else:
        sample_note = f"All {changed.k:,} changed decisions, oldest first."
    gone = max(0, report.cycles_selected - report.cycles_replayed - report.cycles_skipped)
    return ReportView(
        report=report,
        figures=_figures(report),
        placements=rows[:TABLE_NODES],
        placements_more=max(0, len(rows) - TABLE_NODES),
        placements_before_total=before_total,
        placements_after_total=after_total,
        placements_adds_up=(
            f"Σ before − Σ after = {before_total:,} − {after_total:,} = {before_total - after_total:,} = "
            f"{report.became_unschedulable:,} left without a feasible node − {report.became_schedulable:,} given one"
        ),
        chart=_placements_chart(rows, label),
        balance=_spread_rows(balance.before, balance.after),
        balance_summary=_balance_summary(balance.before, balance.after),
        balance_basis=balance.before.basis or _basis(report, "balance.spread"),
        quietest_before=share(balance.quietest_chosen_before.k, balance.quietest_chosen_before.n),
        quietest_after=share(balance.quietest_chosen_after.k, balance.quietest_chosen_after.n),
        quietest_basis=balance.quietest_chosen_before.basis or _basis(report, "balance.quietest_chosen"),
        rejections_basis=_basis(report, "new_rejections"),
        sample=sample,
        sample_note=sample_note,
        what_if=link,
        candidate_weights=sorted(candidate.weights.items()) if candidate is not None else [],
        gone=gone,
    )
