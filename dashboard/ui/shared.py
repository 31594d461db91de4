"""Where the dashboard meets modules other parts of schedlens own.

- The history filters are the audit API's ``dashboard.filters.CycleFilterSet``: one FilterSet for both, so a
  dashboard URL and an API query mean the same rows.
- The plain-language explanation is ``scheduler_core.explain`` (the API serves the same text); the page adds
  the presenter's supplementary sentences around it.
"""

from __future__ import annotations

from dashboard.filters import CycleFilterSet
from dashboard.ui import presenters
from scheduler_core.explain import explain


def explanation_lines(decision: presenters.Decision) -> list[str]:
    cycle = decision.cycle
    explained = explain(
        filter_record=decision.filter_record,
        prioritize_record=decision.prioritize_record,
        chosen_node=cycle.chosen_node,
        error=cycle.error,
        traffic_window_minutes=decision.window_seconds // 60 or None,
    )
    return [line for line in (explained.summary, *presenters.supplementary_lines(decision)) if line]


__all__ = ["CycleFilterSet", "explanation_lines"]
