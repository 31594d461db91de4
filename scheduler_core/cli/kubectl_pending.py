"""``kubectl schedlens pending`` and ``why`` of a waiting pod: the live pending list (``/api/v1/pending/``) as
tables, with the same figures the API and the dashboard's page show (counts, the figure each check saw, its limit)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

Table = Callable[[Sequence[str], Sequence[Sequence[str]]], str]


def waited(seconds: Any) -> str:
    """kubectl's AGE column: ``45s``, ``12m``, ``3h20m``, ``2d4h``."""
    total = int(float(seconds or 0))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours}h" if hours else f"{days}d"
    if hours:
        return f"{hours}h{minutes}m" if minutes else f"{hours}h"
    return f"{minutes}m" if minutes else f"{secs}s"


def stamp(value: Any) -> str:
    """An API time to the second, as kubectl prints times: ``2026-11-28T10:24:52Z``."""
    text = str(value or "")
    return f"{text[:19]}Z" if len(text) >= 19 else text or "-"


def _attempts(count: Any) -> str:
    return f"{count} attempt" if count == 1 else f"{count} attempts"


def render_pending(data: dict[str, Any], table: Table) -> str:
    pods = data.get("results") or []
    if not pods:
        return "no pods waiting"
    rows = [
        [
            str(p.get("namespace")),
            str(p.get("name")),
            waited(p.get("waited_seconds")),
            str(p.get("attempts")),
            stamp(p.get("last_attempt_at")),
            str(p.get("summary") or ""),
        ]
        for p in pods
    ]
    shown = len(pods)
    more = (
        f"\n({data.get('count')} pods waiting; the {shown} waiting longest shown)"
        if data.get("count", 0) > shown
        else ""
    )
    return table(["NAMESPACE", "POD", "WAITING", "ATTEMPTS", "LAST-ATTEMPT", "HELD BACK BY"], rows) + more


def _reason_rows(reasons: Sequence[dict[str, Any]]) -> list[list[str]]:
    rows = []
    for r in reasons:
        figures = ", ".join(f"{f.get('node')}: {f.get('figure')}" for f in r.get("figures") or [])
        names = ", ".join(r.get("node_names") or [])
        rows.append(
            [
                str(r.get("nodes")),
                str(r.get("reason")),
                f"schedlens {r.get('plugin')}" if r.get("source") == "schedlens" else str(r.get("source")),
                str(r.get("limit") or "-"),
                figures or names or "-",
            ]
        )
    return rows


def render_pending_pod(data: dict[str, Any], table: Table) -> str:
    head = (
        f"pod {data.get('namespace')}/{data.get('name')}: waiting {waited(data.get('waited_seconds'))} "
        f"(since {stamp(data.get('waiting_since'))}), {_attempts(data.get('attempts'))}, profile {data.get('profile')}"
    )
    lines = [head, f"held back by: {data.get('summary')}"]
    for attempt in data.get("recent_attempts") or []:
        cycle = (
            f"cycle {attempt['cycle_id']}" if attempt.get("cycle_id") is not None else "no cycle: our filter not asked"
        )
        total, passed = attempt.get("nodes_total"), attempt.get("passed")
        counts = f"{total if total is not None else '?'} nodes" + (
            f", {passed} passed schedlens's filter" if passed is not None else ""
        )
        lines += ["", f"attempt at {stamp(attempt.get('at'))} ({cycle}; {counts})"]
        reasons = attempt.get("reasons") or []
        if reasons:
            lines.append(table(["NODES", "REASON", "BY", "LIMIT", "FIGURES (ELSE WHICH NODES)"], _reason_rows(reasons)))
        elif attempt.get("message") or attempt.get("error"):
            lines.append(str(attempt.get("message") or attempt.get("error")))
        closest = attempt.get("closest") or []
        if closest:
            lines.append("closest to passing (one check failed):")
            lines.append(
                table(
                    ["NODE", "CHECK", "REASON", "FIGURE", "LIMIT"],
                    [
                        [
                            str(m.get("node")),
                            str(m.get("plugin")),
                            str(m.get("reason")),
                            str(m.get("figure") or "-"),
                            str(m.get("limit") or "-"),
                        ]
                        for m in closest
                    ],
                )
            )
        for change in attempt.get("changes") or []:
            lines.append(f"changed: {change}")
    return "\n".join(lines)
