"""Where the dashboard meets modules other parts of schedlens own.

- The history filters are the audit API's ``dashboard.filters.CycleFilterSet``: one FilterSet for both, so a
  dashboard URL and an API query mean the same rows.
- The plain-language explanation is ``scheduler_core.explain`` (the API serves the same text), which the presenter
  runs once per decision; the page adds the presenter's supplementary sentences around it.
"""

from __future__ import annotations

from dashboard.filters import CycleFilterSet
from dashboard.ui import presenters


def explanation_lines(decision: presenters.Decision) -> list[str]:
    summary = decision.explanation.summary
    return [line for line in (summary, *presenters.supplementary_lines(decision)) if line]


__all__ = ["CycleFilterSet", "explanation_lines"]
