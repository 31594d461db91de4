"""The decision page's every-candidate table, written here as HTML rather than by the template engine.

A 1000-node cluster hands the extender hundreds of candidates, each with a row of a dozen figures and a row saying
how its scores add up. Django's template engine resolves every variable, filter and tag of every cell anew, row after
row; a plain loop writes the same markup with the same figures without that per-cell work. Every string that comes
from a record (node names, reasons, notes, arithmetic) is escaped exactly as the template's autoescape escapes it
(``html.escape``); the units are the template filters' own functions.
"""

from __future__ import annotations

from html import escape
from urllib.parse import quote

from django.utils.formats import localize
from django.utils.safestring import SafeString, mark_safe

from dashboard.ui.presenters import Candidate, Decision
from dashboard.ui.templatetags.schedlens_ui import bytes_filter, rate_over, score

DASH = "—"
NO_SERIES = '<span class="muted" title="no traffic series for this node">no series</span>'


def _text(value: object) -> str:
    """A value as ``{{ value }}`` shows it, escaped: a whole number as is (the settings group no thousands), any
    other number localized."""
    if isinstance(value, str):
        return escape(value)
    return str(value) if type(value) is int else escape(str(localize(value)))


def why_not_options(decision: Decision, selected: str) -> SafeString:
    """The "why not?" picker's nodes: every candidate but the one the decision is explained against."""
    options = []
    for c in decision.candidates:
        if c.node == decision.reference:
            continue
        node = escape(c.node)
        chosen = " selected" if c.node == selected else ""
        label = " (excluded)" if c.passed is False else f" ({score(c.final)})" if c.final is not None else ""
        options.append(f'<option value="{node}"{chosen}>{node}{label}</option>')
    return mark_safe("".join(options))  # noqa: S308 - the node names are escaped above


def candidate_rows(decision: Decision) -> SafeString:
    """The table's body: each candidate's row, then (when it was scored) the row saying how its scores add up."""
    rows: list[str] = []
    for c in decision.candidates:
        rows.append(_candidate_row(decision, c))
        if c.explained is not None and c.explained.final_arithmetic:
            rows.append(_arithmetic_row(decision, c))
    return mark_safe("\n".join(rows))  # noqa: S308 - every string from a record is escaped above


def _candidate_row(d: Decision, c: Candidate) -> str:
    node = escape(c.node)
    reference = c.node == d.reference
    row_class = ("chosen" if reference else "") + (" excluded" if c.passed is False else "")
    tag = ' <span class="tag">bound</span>' if c.chosen else ' <span class="tag">highest</span>' if c.preferred else ""
    cells = [f'<tr class="{row_class}" data-node="{node}"><th scope="row">{node}{tag}</th>']
    if c.verdicts:
        for v in c.verdicts:
            if v.passed:
                cells.append('<td class="verdict pass">pass</td>')
            else:
                detail = f'<span class="sub">{escape(v.detail)}</span>' if v.detail else ""
                cells.append(f'<td class="verdict fail"><span class="reason">{escape(v.reason)}</span>{detail}</td>')
    else:
        cells.append(f'<td class="muted">{DASH}</td>' * len(d.filter_plugins))
    cells.append(_traffic_cell(d, c))
    terms = c.explained.terms if c.explained is not None else ()
    for t in terms:
        inapplicable = "" if t.applicable else " inapplicable"
        points = f'<span class="sub">= {score(t.contribution)} pts</span>' if t.applicable else ""
        note = f'<span class="sub note">{escape(t.note)}</span>' if t.note else ""
        cells.append(
            f'<td class="num term{inapplicable}" data-plugin="{escape(t.plugin)}">'
            f"{score(t.normalized)} × {_text(t.weight)}{points}{note}</td>"
        )
    if not terms:
        cells.append(f'<td class="muted num">{DASH}</td>' * len(d.score_plugins))
    cells.append(f'<td class="num final">{score(c.final)}</td>')
    answer = DASH if c.extender is None else _text(c.extender)
    kube_points = c.explained.kube_scheduler_points if c.explained is not None else None
    if kube_points is not None:
        answer += f'<span class="sub">{_text(kube_points)} pts in kube-scheduler</span>'
    cells.append(f'<td class="num answer">{answer}</td>')
    why_not = "" if reference else f'<a href="?why_not={escape(quote(c.node))}#why-not">why not?</a>'
    cells.append(f'<td class="nowrap">{why_not}</td></tr>')
    return "".join(cells)


def _traffic_cell(d: Decision, c: Candidate) -> str:
    if c.traffic_bytes is None:
        return f'<td class="num traffic">{NO_SERIES}</td>'
    text = f'{bytes_filter(c.traffic_bytes)}<span class="sub">{rate_over(c.traffic_bytes, d.window_seconds)}</span>'
    traffic = c.traffic
    if traffic is not None and traffic.herd_bytes:
        binds = ""
        if traffic.herd_binds is not None:
            binds = f" ({_text(traffic.herd_binds)} recent bind{'' if traffic.herd_binds == 1 else 's'})"
        text += (
            f'<span class="sub herd">+ {bytes_filter(traffic.herd_bytes)} assumed{binds}'
            f" = {bytes_filter(traffic.estimate_bytes)}</span>"
        )
    return f'<td class="num traffic">{text}</td>'


def _arithmetic_row(d: Decision, c: Candidate) -> str:
    explained = c.explained
    assert explained is not None
    node = escape(c.node)
    reference = c.node == d.reference
    steps = [
        f'<div data-plugin="{escape(t.plugin)}"><dt>{escape(t.plugin)}</dt>'
        f"<dd>{_text(t.arithmetic or t.normalized)}</dd></div>"
        for t in explained.terms
    ]
    answer = escape(explained.answer_arithmetic)
    if explained.kube_scheduler_points is not None:
        answer += (
            f"; × weight {_text(d.explanation.extender_weight)} × 10 = {_text(explained.kube_scheduler_points)}"
            " points in kube-scheduler"
        )
    return (
        f'<tr class="arithmetic-row{" chosen" if reference else ""}" data-arithmetic-of="{node}">'
        f'<td colspan="{d.table_columns}"><details{" open" if reference else ""}>'
        f"<summary>How {node}'s scores add up</summary>"
        f'<dl class="arithmetic">{"".join(steps)}'
        f'<div data-step="final"><dt>Final (weighted mean)</dt><dd>{escape(explained.final_arithmetic)}</dd></div>'
        f'<div data-step="answer"><dt>Answer (0..10)</dt><dd>{answer}</dd></div>'
        "</dl></details></td></tr>"
    )
